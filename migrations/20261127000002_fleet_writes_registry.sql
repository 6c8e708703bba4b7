-- no-transaction
-- Fleet scale (issue 14): every plan fetch rewrites its runner's registry row, every 20 s per
-- site. With no index on the columns it changes, PostgreSQL rewrites such a row in place
-- (HOT) instead of writing every index again. The registry is read by silence only by the
-- sweeper and the fleet gauges: a scan of one small row per runner, every 30 s at most.
-- CONCURRENTLY (alone in its migration, outside a transaction): a live database goes on.
DROP INDEX CONCURRENTLY IF EXISTS runners_last_seen;
