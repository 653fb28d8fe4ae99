-- q18, find last bid: per bidder and auction its last bid, as
-- "auction,bidder,price,channel,url,dateTime" keyed by "bidder,auction". Flink's
-- q18 orders by dateTime alone; bids of one bidder on one auction in the same
-- millisecond would leave the result to the order of arrival, so price and url
-- break the ties (bench/nexmark LaterBid).
INSERT INTO table_results
SELECT CONCAT_WS(',', CAST(bidder AS STRING), CAST(auction AS STRING)), CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price AS STRING), channel, url, CAST(date_time AS STRING))
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC, price DESC, url DESC) AS rn FROM bid)
WHERE rn <= 1;
