-- q1, currency conversion: each bid as "auction,bidder,priceEuro,date_time".
INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price * 908 / 1000 AS STRING), CAST(date_time AS STRING)), ts
FROM bid;
