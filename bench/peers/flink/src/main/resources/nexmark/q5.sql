-- q5, hot items: per sliding window of 10 s every 2 s of event time, every
-- auction with the most bids, as "windowStart,auction,count" (windowStart
-- in Unix ms). The counts per auction and window, then a window join of
-- them with the window's greatest count, which keeps the ties: each
-- sliding window's counts are windowed again by a tumbling window of the
-- slide on their window time, which holds that one sliding window.
CREATE TEMPORARY VIEW auction_counts AS
SELECT window_start AS hop_start, window_time AS hop_time, auction, COUNT(*) AS num
FROM TABLE(HOP(TABLE timed_bid, DESCRIPTOR(dt), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY window_start, window_end, window_time, auction;

INSERT INTO results
SELECT CONCAT_WS(',', CAST(CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', C.hop_start) AS BIGINT) * 1000 AS STRING),
    CAST(C.auction AS STRING), CAST(C.num AS STRING)), C.window_time
FROM (
  SELECT * FROM TABLE(TUMBLE(TABLE auction_counts, DESCRIPTOR(hop_time), INTERVAL '2' SECOND))
) C
JOIN (
  SELECT window_start, window_end, MAX(num) AS maxn
  FROM TABLE(TUMBLE(TABLE auction_counts, DESCRIPTOR(hop_time), INTERVAL '2' SECOND))
  GROUP BY window_start, window_end
) M
ON C.window_start = M.window_start AND C.window_end = M.window_end AND C.num = M.maxn;
