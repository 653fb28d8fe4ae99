-- q7, highest bid: per tumbling window of 10 s of event time, every bid
-- at the window's highest price, as "windowStart,auction,bidder,price,dateTime"
-- (windowStart in Unix ms). A window join of the window's bids with its
-- highest price keeps the ties (a window Top-N would need RANK, which
-- Flink 2.2 does not support there).
INSERT INTO results
SELECT CONCAT_WS(',', CAST(CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', B.window_start) AS BIGINT) * 1000 AS STRING),
    CAST(B.auction AS STRING), CAST(B.bidder AS STRING), CAST(B.price AS STRING), CAST(B.date_time AS STRING)), B.window_time
FROM (
  SELECT * FROM TABLE(TUMBLE(TABLE timed_bid, DESCRIPTOR(dt), INTERVAL '10' SECOND))
) B
JOIN (
  SELECT window_start, window_end, MAX(price) AS maxprice
  FROM TABLE(TUMBLE(TABLE timed_bid, DESCRIPTOR(dt), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) M
ON B.window_start = M.window_start AND B.window_end = M.window_end AND B.price = M.maxprice;
