-- q10, log to file system: each bid as "auction,bidder,price,dateTime,day,minute"
-- (UTC yyyy-MM-dd and HH:mm), Flink's q10 with Kafka in place of its files.
INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price AS STRING), CAST(date_time AS STRING),
    DATE_FORMAT(TO_TIMESTAMP_LTZ(date_time, 3), 'yyyy-MM-dd'), DATE_FORMAT(TO_TIMESTAMP_LTZ(date_time, 3), 'HH:mm')), ts
FROM bid;
