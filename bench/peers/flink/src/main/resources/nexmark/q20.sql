-- q20, expand bid with auction: every bid on an auction of category 10, as the
-- bid's "auction,bidder,price,channel,url,dateTime" and the auction's
-- "itemName,description,initialBid,reserve,dateTime,expires,seller,category":
-- Flink's q20, a regular inner join that keeps both inputs. The output's
-- timestamp is the later input's.
INSERT INTO results
SELECT CONCAT_WS(',', CAST(B.auction AS STRING), CAST(B.bidder AS STRING), CAST(B.price AS STRING), B.channel, B.url,
    CAST(B.date_time AS STRING), A.item_name, A.description, A.initial_bid, A.reserve, CAST(A.date_time AS STRING),
    CAST(A.expires AS STRING), CAST(A.seller AS STRING), CAST(A.category AS STRING)), GREATEST(A.ts, B.ts)
FROM bid AS B
INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10;
