-- q22, url directories: each bid as "auction,bidder,price,channel,dir1,dir2,dir3".
INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price AS STRING), channel,
    COALESCE(SPLIT_INDEX(url, '/', 3), ''), COALESCE(SPLIT_INDEX(url, '/', 4), ''), COALESCE(SPLIT_INDEX(url, '/', 5), '')), ts
FROM bid;
