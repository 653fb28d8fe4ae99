-- q21, add channel id: each bid as "auction,bidder,price,channel,channelID".
INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price AS STRING), channel,
    CASE
      WHEN LOWER(channel) = 'apple' THEN '0'
      WHEN LOWER(channel) = 'google' THEN '1'
      WHEN LOWER(channel) = 'facebook' THEN '2'
      WHEN LOWER(channel) = 'baidu' THEN '3'
      ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
    END), ts
FROM bid
WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL
   OR LOWER(channel) IN ('apple', 'google', 'facebook', 'baidu');
