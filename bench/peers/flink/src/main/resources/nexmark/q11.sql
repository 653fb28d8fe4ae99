-- q11, user sessions: per bidder, its bids in session windows of 10 s of
-- event time, as "bidder,count,start,end": start is the first bid's
-- dateTime, end the last's plus the gap (the session window's end).
INSERT INTO results
SELECT CONCAT_WS(',', CAST(bidder AS STRING), CAST(COUNT(*) AS STRING), CAST(MIN(date_time) AS STRING), CAST(MAX(date_time) + 10000 AS STRING)), window_time
FROM TABLE(SESSION(TABLE timed_bid PARTITION BY bidder, DESCRIPTOR(dt), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end, window_time;
