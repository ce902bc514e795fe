-- A sqlite3 workload for fieldprof's runtime benchmark and demos: bulk
-- inserts in a transaction, an index build, aggregates, a join, updates and
-- text functions. Runs in about a second; prints a few deterministic lines.
--   sqlite3 :memory: < deploy/workloads/sqlite-bench.sql
PRAGMA journal_mode = MEMORY;
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount REAL, note TEXT);
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, region TEXT);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000)
  INSERT INTO customers SELECT x, 'customer-' || x, 'region-' || (x % 17) FROM c;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
  INSERT INTO orders SELECT x, (x * 7919) % 2000 + 1, (x % 1000) * 1.25,
                            printf('order %08d for %d', x, (x * 7919) % 2000 + 1) FROM c;
COMMIT;
CREATE INDEX orders_customer ON orders(customer);
SELECT region, count(*), round(sum(amount), 2) FROM orders JOIN customers ON customers.id = orders.customer
  GROUP BY region ORDER BY region LIMIT 5;
UPDATE orders SET amount = amount * 1.1 WHERE customer % 3 = 0;
SELECT count(*), round(avg(amount), 4) FROM orders WHERE note LIKE '%for 1%';
SELECT upper(substr(name, 1, 8)), length(group_concat(id)) FROM customers GROUP BY region ORDER BY 1 LIMIT 3;
SELECT count(DISTINCT customer) FROM orders WHERE amount > 600;
