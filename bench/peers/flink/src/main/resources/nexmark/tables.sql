-- The tables and views every query reads and writes (Sql.java fills in
-- ${in}, ${out}, ${brokers}, ${group} and ${txn}). An event is one line
-- "kind,field,…" (bench/nexmark); its Kafka timestamp is carried to the
-- output record, so that the runner measures visibility latency.
CREATE TABLE events (
  line STRING,
  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL
) WITH (
  'connector' = 'kafka',
  'topic' = '${in}',
  'properties.bootstrap.servers' = '${brokers}',
  'properties.group.id' = '${group}',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'raw'
);

-- The same input with event time, for the windowed queries: an event's
-- date_time (field 7 of a person, 6 of an auction or a bid), and a
-- watermark per partition that trails it by MaxOutOfOrderness (1 s).
CREATE TABLE timed_events (
  line STRING,
  dt AS TO_TIMESTAMP_LTZ(CAST(CASE WHEN SUBSTR(line, 1, 2) = 'P,' THEN SPLIT_INDEX(line, ',', 7) ELSE SPLIT_INDEX(line, ',', 6) END AS BIGINT), 3),
  WATERMARK FOR dt AS dt - INTERVAL '1' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = '${in}',
  'properties.bootstrap.servers' = '${brokers}',
  'properties.group.id' = '${group}',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'raw'
);

CREATE TABLE results (
  v STRING,
  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'
) WITH (
  'connector' = 'kafka',
  'topic' = '${out}',
  'properties.bootstrap.servers' = '${brokers}',
  'properties.transaction.timeout.ms' = '900000',
  'sink.delivery-guarantee' = 'exactly-once',
  'sink.transactional-id-prefix' = '${txn}',
  'format' = 'raw'
);

-- The updating queries' (q15-q19) output: the table's changelog, each row
-- upserted under its key, a delete as a null value.
CREATE TABLE table_results (
  k STRING,
  v STRING,
  PRIMARY KEY (k) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = '${out}',
  'properties.bootstrap.servers' = '${brokers}',
  'properties.transaction.timeout.ms' = '900000',
  'sink.delivery-guarantee' = 'exactly-once',
  'sink.transactional-id-prefix' = '${txn}',
  'key.format' = 'raw',
  'value.format' = 'raw',
  'value.fields-include' = 'EXCEPT_KEY'
);

-- B,auction,bidder,price,channel,url,date_time,extra
CREATE TEMPORARY VIEW bid AS
SELECT
  CAST(SPLIT_INDEX(line, ',', 1) AS BIGINT) AS auction,
  CAST(SPLIT_INDEX(line, ',', 2) AS BIGINT) AS bidder,
  CAST(SPLIT_INDEX(line, ',', 3) AS BIGINT) AS price,
  SPLIT_INDEX(line, ',', 4) AS channel,
  SPLIT_INDEX(line, ',', 5) AS url,
  CAST(SPLIT_INDEX(line, ',', 6) AS BIGINT) AS date_time,
  ts
FROM events
WHERE SUBSTR(line, 1, 2) = 'B,';

CREATE TEMPORARY VIEW timed_bid AS
SELECT
  CAST(SPLIT_INDEX(line, ',', 1) AS BIGINT) AS auction,
  CAST(SPLIT_INDEX(line, ',', 2) AS BIGINT) AS bidder,
  CAST(SPLIT_INDEX(line, ',', 3) AS BIGINT) AS price,
  CAST(SPLIT_INDEX(line, ',', 6) AS BIGINT) AS date_time,
  dt
FROM timed_events
WHERE SUBSTR(line, 1, 2) = 'B,';

-- P,id,name,email,creditCard,city,state,dateTime,extra
CREATE TEMPORARY VIEW timed_person AS
SELECT CAST(SPLIT_INDEX(line, ',', 1) AS BIGINT) AS id, SPLIT_INDEX(line, ',', 2) AS name, dt
FROM timed_events
WHERE SUBSTR(line, 1, 2) = 'P,';

-- A,id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra
CREATE TEMPORARY VIEW timed_auction AS
SELECT CAST(SPLIT_INDEX(line, ',', 1) AS BIGINT) AS id, CAST(SPLIT_INDEX(line, ',', 8) AS BIGINT) AS seller, dt
FROM timed_events
WHERE SUBSTR(line, 1, 2) = 'A,';

-- P,id,name,email,creditCard,city,state,date_time,extra
CREATE TEMPORARY VIEW person AS
SELECT
  CAST(SPLIT_INDEX(line, ',', 1) AS BIGINT) AS id,
  SPLIT_INDEX(line, ',', 2) AS name,
  SPLIT_INDEX(line, ',', 5) AS city,
  SPLIT_INDEX(line, ',', 6) AS state,
  ts
FROM events
WHERE SUBSTR(line, 1, 2) = 'P,';

-- A,id,itemName,description,initialBid,reserve,date_time,expires,seller,category,extra
CREATE TEMPORARY VIEW auction AS
SELECT
  CAST(SPLIT_INDEX(line, ',', 1) AS BIGINT) AS id,
  SPLIT_INDEX(line, ',', 2) AS item_name,
  SPLIT_INDEX(line, ',', 3) AS description,
  SPLIT_INDEX(line, ',', 4) AS initial_bid,
  SPLIT_INDEX(line, ',', 5) AS reserve,
  CAST(SPLIT_INDEX(line, ',', 6) AS BIGINT) AS date_time,
  CAST(SPLIT_INDEX(line, ',', 7) AS BIGINT) AS expires,
  CAST(SPLIT_INDEX(line, ',', 8) AS BIGINT) AS seller,
  CAST(SPLIT_INDEX(line, ',', 9) AS BIGINT) AS category,
  ts
FROM events
WHERE SUBSTR(line, 1, 2) = 'A,';
