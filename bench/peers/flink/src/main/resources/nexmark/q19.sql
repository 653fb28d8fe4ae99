-- q19, auction top-10 price: per auction its 10 highest bids, as
-- "auction,bidder,price,channel,url,dateTime,rank" keyed by "auction,rank"; ties
-- of price go to the earlier bid, then the smaller url (bench/nexmark HigherBid).
INSERT INTO table_results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(rn AS STRING)), CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price AS STRING), channel, url, CAST(date_time AS STRING), CAST(rn AS STRING))
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, date_time ASC, url ASC) AS rn FROM bid)
WHERE rn <= 10;
