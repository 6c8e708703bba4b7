-- no-transaction
-- A delta reads the changes of its own branches (and the shared ones, branch_id NULL) since
-- its cursor. Through the txid index alone it walked every branch's changes in that span,
-- which at fleet scale — thousands of sites claiming and reporting — is thousands of rows
-- per delta; this index finds a site's few. CONCURRENTLY, so it builds on a live database
-- without blocking the writers (hence no transaction around this migration).
CREATE INDEX CONCURRENTLY IF NOT EXISTS plan_changes_branch_txid ON plan_changes (branch_id, txid);
