-- q9, winning bids: per auction its highest bid in its lifetime (ties: the
-- earlier, then the smaller url; bench/nexmark HigherBid), joined with the
-- auction, as "id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,bidder,price,bidDateTime"
-- keyed by the id: Flink's q9, a regular join and a Top-1.
INSERT INTO table_results
SELECT CAST(id AS STRING), CONCAT_WS(',', CAST(id AS STRING), item_name, description, initial_bid, reserve,
    CAST(date_time AS STRING), CAST(expires AS STRING), CAST(seller AS STRING), CAST(category AS STRING),
    CAST(bidder AS STRING), CAST(price AS STRING), CAST(bid_date_time AS STRING))
FROM (
  SELECT A.id, A.item_name, A.description, A.initial_bid, A.reserve, A.date_time, A.expires, A.seller, A.category,
    B.bidder, B.price, B.date_time AS bid_date_time,
    ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC, B.url ASC) AS rn
  FROM auction AS A, bid AS B
  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
)
WHERE rn <= 1;
