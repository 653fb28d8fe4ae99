-- q15, bidding statistics report: per day, the bids, distinct bidders and
-- distinct auctions, in all and by price rank (below 1,000; to 100,000; from
-- 100,000 cents: bench/nexmark PriceRank), as
-- "day,bids,bids1,bids2,bids3,bidders,…,auctions3" keyed by day.
INSERT INTO table_results
SELECT d, CONCAT_WS(',', d,
    CAST(COUNT(*) AS STRING), CAST(COUNT(*) FILTER (WHERE price < 1000) AS STRING), CAST(COUNT(*) FILTER (WHERE price >= 1000 AND price < 100000) AS STRING), CAST(COUNT(*) FILTER (WHERE price >= 100000) AS STRING),
    CAST(COUNT(DISTINCT bidder) AS STRING), CAST(COUNT(DISTINCT bidder) FILTER (WHERE price < 1000) AS STRING), CAST(COUNT(DISTINCT bidder) FILTER (WHERE price >= 1000 AND price < 100000) AS STRING), CAST(COUNT(DISTINCT bidder) FILTER (WHERE price >= 100000) AS STRING),
    CAST(COUNT(DISTINCT auction) AS STRING), CAST(COUNT(DISTINCT auction) FILTER (WHERE price < 1000) AS STRING), CAST(COUNT(DISTINCT auction) FILTER (WHERE price >= 1000 AND price < 100000) AS STRING), CAST(COUNT(DISTINCT auction) FILTER (WHERE price >= 100000) AS STRING))
FROM (SELECT DATE_FORMAT(TO_TIMESTAMP_LTZ(date_time, 3), 'yyyy-MM-dd') AS d, price, bidder, auction FROM bid)
GROUP BY d;
