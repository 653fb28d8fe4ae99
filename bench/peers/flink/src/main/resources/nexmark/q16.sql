-- q16, channel statistics report: q15 per channel and day, with the latest
-- minute (HH:mm) of the group's bids, as "channel,day,minute,bids,…,auctions3"
-- keyed by "channel,day".
INSERT INTO table_results
SELECT CONCAT_WS(',', channel, d), CONCAT_WS(',', channel, d, MAX(m),
    CAST(COUNT(*) AS STRING), CAST(COUNT(*) FILTER (WHERE price < 1000) AS STRING), CAST(COUNT(*) FILTER (WHERE price >= 1000 AND price < 100000) AS STRING), CAST(COUNT(*) FILTER (WHERE price >= 100000) AS STRING),
    CAST(COUNT(DISTINCT bidder) AS STRING), CAST(COUNT(DISTINCT bidder) FILTER (WHERE price < 1000) AS STRING), CAST(COUNT(DISTINCT bidder) FILTER (WHERE price >= 1000 AND price < 100000) AS STRING), CAST(COUNT(DISTINCT bidder) FILTER (WHERE price >= 100000) AS STRING),
    CAST(COUNT(DISTINCT auction) AS STRING), CAST(COUNT(DISTINCT auction) FILTER (WHERE price < 1000) AS STRING), CAST(COUNT(DISTINCT auction) FILTER (WHERE price >= 1000 AND price < 100000) AS STRING), CAST(COUNT(DISTINCT auction) FILTER (WHERE price >= 100000) AS STRING))
FROM (SELECT channel, DATE_FORMAT(TO_TIMESTAMP_LTZ(date_time, 3), 'yyyy-MM-dd') AS d,
    DATE_FORMAT(TO_TIMESTAMP_LTZ(date_time, 3), 'HH:mm') AS m, price, bidder, auction FROM bid)
GROUP BY channel, d;
