-- no-transaction
-- Fleet scale (issue 14): written at every claim and first heartbeat, read only when a
-- runner registers a new boot (its live executions of earlier boots crash), which reads the
-- few live executions through executions_one_live_per_rule instead.
DROP INDEX CONCURRENTLY IF EXISTS executions_live_runner;
