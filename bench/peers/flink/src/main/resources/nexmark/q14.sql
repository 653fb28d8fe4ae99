-- q14, calculation: the bids whose priceEuro lies in (10,000, 500,000)
-- cents, as "auction,bidder,priceEuro,bidTimeType,date_time,cCount"
-- (bench/nexmark: the bounds are a hundredth of Flink's, and the 'c' are
-- counted in the url, this generator's bids having no extra).
INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price * 908 / 1000 AS STRING),
    CASE
      WHEN HOUR(TO_TIMESTAMP_LTZ(date_time, 3)) >= 8 AND HOUR(TO_TIMESTAMP_LTZ(date_time, 3)) <= 18 THEN 'dayTime'
      WHEN HOUR(TO_TIMESTAMP_LTZ(date_time, 3)) <= 6 OR HOUR(TO_TIMESTAMP_LTZ(date_time, 3)) >= 20 THEN 'nightTime'
      ELSE 'otherTime'
    END,
    CAST(date_time AS STRING), CAST(CHAR_LENGTH(url) - CHAR_LENGTH(REPLACE(url, 'c', '')) AS STRING)), ts
FROM bid
WHERE price * 908 / 1000 > 10000 AND price * 908 / 1000 < 500000;
