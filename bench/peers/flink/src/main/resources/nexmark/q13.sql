-- q13, bounded side input join: each bid as "auction,bidder,price,dateTime,value",
-- value the side input's of key auction mod 10000. Flink's q13 is a lookup join
-- of a bounded table; Flink 2 ships no connector that serves a file to a lookup
-- join, so the side input file (--side-input) is loaded whole by the function
-- side_value when the job opens it (SideInput.java), as a lookup join with a
-- full cache would.
CREATE TEMPORARY FUNCTION side_value AS 'exactly.bench.flink.SideInput';

INSERT INTO results
SELECT CONCAT_WS(',', CAST(auction AS STRING), CAST(bidder AS STRING), CAST(price AS STRING), CAST(date_time AS STRING),
    side_value(MOD(auction, 10000))), ts
FROM bid;
