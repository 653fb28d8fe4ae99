-- q3, local item suggestion: every auction of category 10 whose seller lives
-- in Oregon, Idaho or California, as "name,city,state,auctionId": Flink's q3,
-- a regular inner join that keeps both inputs. The output's timestamp is the
-- later input's.
INSERT INTO results
SELECT CONCAT_WS(',', P.name, P.city, P.state, CAST(A.id AS STRING)), GREATEST(P.ts, A.ts)
FROM auction AS A
INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
