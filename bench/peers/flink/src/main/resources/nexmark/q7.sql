-- q7, highest bid: per tumbling window of 10 s of event time, every bid
-- at the window's highest price, as "windowStart,auction,bidder,price,date_time"
-- (windowStart in Unix ms). A window Top-N with RANK keeps the ties.
INSERT INTO results
SELECT CONCAT_WS(',', CAST(CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', window_start) AS BIGINT) * 1000 AS STRING),
    CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price AS STRING), CAST(date_time AS STRING)), window_time
FROM (
  SELECT window_start, window_time, auction, bidder, price, date_time,
    RANK() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rk
  FROM TABLE(TUMBLE(TABLE timed_bid, DESCRIPTOR(dt), INTERVAL '10' SECOND))
)
WHERE rk = 1;
