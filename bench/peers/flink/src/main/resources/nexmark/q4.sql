-- q4, average price for a category: per category the average of its auctions'
-- final prices (the highest of each auction's bids in its lifetime), as
-- "category,average,auctions" keyed by the category: Flink's q4, with the number
-- of auctions added for the runner (bench/nexmark AppendQ4).
INSERT INTO table_results
SELECT CAST(category AS STRING), CONCAT_WS(',', CAST(category AS STRING), CAST(AVG(final) AS STRING), CAST(COUNT(*) AS STRING))
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction AS A, bid AS B
  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
  GROUP BY A.id, A.category
)
GROUP BY category;
