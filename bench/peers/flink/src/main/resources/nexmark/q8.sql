-- q8, monitor new users: per tumbling window of 10 s of event time, every
-- person who joined and sold an auction in it, once, as "id,name,windowStart"
-- (windowStart in Unix ms): Flink's q8, the persons and the sellers of each
-- window grouped, then joined in a window join.
INSERT INTO results
SELECT CONCAT_WS(',', CAST(P.id AS STRING), P.name,
    CAST(CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', P.window_start) AS BIGINT) * 1000 AS STRING)), P.window_time
FROM (
  SELECT id, name, window_start, window_end, window_time
  FROM TABLE(TUMBLE(TABLE timed_person, DESCRIPTOR(dt), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end, window_time
) P
JOIN (
  SELECT seller, window_start, window_end
  FROM TABLE(TUMBLE(TABLE timed_auction, DESCRIPTOR(dt), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.window_start = A.window_start AND P.window_end = A.window_end;
