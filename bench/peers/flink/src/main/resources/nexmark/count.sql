-- count: each bid as "auction,n", n the bids on its auction so far. An
-- OVER aggregation, so that the output is append-only (a GROUP BY would
-- update its counts, which the append-only Kafka sink refuses).
INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(n AS STRING)), ts
FROM (
  SELECT auction, ts, COUNT(*) OVER (PARTITION BY auction ORDER BY pt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n
  FROM (SELECT auction, ts, PROCTIME() AS pt FROM bid)
);
