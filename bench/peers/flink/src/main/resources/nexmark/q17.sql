-- q17, auction statistics report: per auction and day, the bids in all and by
-- price rank and the minimum, maximum, average (of the BIGINT prices: the
-- integer quotient) and sum of the prices, as
-- "auction,day,bids,bids1,bids2,bids3,min,max,avg,sum" keyed by "auction,day".
INSERT INTO table_results
SELECT CONCAT_WS(',', CAST(auction AS STRING), d), CONCAT_WS(',', CAST(auction AS STRING), d,
    CAST(COUNT(*) AS STRING), CAST(COUNT(*) FILTER (WHERE price < 1000) AS STRING), CAST(COUNT(*) FILTER (WHERE price >= 1000 AND price < 100000) AS STRING), CAST(COUNT(*) FILTER (WHERE price >= 100000) AS STRING),
    CAST(MIN(price) AS STRING), CAST(MAX(price) AS STRING), CAST(AVG(price) AS STRING), CAST(SUM(price) AS STRING))
FROM (SELECT auction, DATE_FORMAT(TO_TIMESTAMP_LTZ(date_time, 3), 'yyyy-MM-dd') AS d, price FROM bid)
GROUP BY auction, d;
