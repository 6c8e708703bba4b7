-- no-transaction
-- An overdue rule's cause and Run now's warning look up the runners of one branch: the live
-- keys whose branch_ids hold it. Without this index that is a scan of every key per rule,
-- which in a mass outage (every rule overdue) would be every key times every rule.
CREATE INDEX CONCURRENTLY IF NOT EXISTS api_keys_branch_ids ON api_keys USING gin (branch_ids);
