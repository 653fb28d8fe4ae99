-- q5, hot items: per sliding window of 10 s every 2 s of event time, every
-- auction with the most bids, as "windowStart,auction,count" (windowStart
-- in Unix ms): a window aggregation, then a window Top-N with RANK, which
-- keeps the ties.
INSERT INTO results
SELECT CONCAT_WS(',', CAST(CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', window_start) AS BIGINT) * 1000 AS STRING),
    CAST(auction AS STRING), CAST(num AS STRING)), window_time
FROM (
  SELECT window_start, window_time, auction, num,
    RANK() OVER (PARTITION BY window_start, window_end ORDER BY num DESC) AS rk
  FROM (
    SELECT window_start, window_end, window_time, auction, COUNT(*) AS num
    FROM TABLE(HOP(TABLE timed_bid, DESCRIPTOR(dt), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, window_time, auction
  )
)
WHERE rk = 1;
