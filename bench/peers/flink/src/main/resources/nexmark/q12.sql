-- q12, processing time windows: per bidder and tumbling window of 10 s of
-- processing time, its bids, as "bidder,count,start,end" (start and end in
-- Unix ms) keyed by the bidder; the runner checks the sums per bidder.
CREATE TEMPORARY VIEW proc_bid AS
SELECT bidder, PROCTIME() AS p_time FROM bid;

INSERT INTO table_results
SELECT CAST(bidder AS STRING), CONCAT_WS(',', CAST(bidder AS STRING), CAST(COUNT(*) AS STRING),
    CAST(CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', window_start) AS BIGINT) * 1000 AS STRING),
    CAST(CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', window_end) AS BIGINT) * 1000 AS STRING))
FROM TABLE(TUMBLE(TABLE proc_bid, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
