-- q2, selection: the bids on auctions that are multiples of 123, as "auction,price".
INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(price AS STRING)), ts
FROM bid
WHERE MOD(auction, 123) = 0;
