-- no-transaction
-- Fleet scale (issue 14): each execution wrote this index at its claim and its first
-- heartbeat, and every later heartbeat (it moves the lease) could not be made in place.
-- What read it — expired leases for the sweeper and for plan deltas — finds the few live
-- executions through executions_one_live_per_rule (a site's own rules, or all live ones).
DROP INDEX CONCURRENTLY IF EXISTS executions_live_lease;
