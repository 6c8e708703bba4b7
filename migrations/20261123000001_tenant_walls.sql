-- Idempotency keys belong to their branch rule: two tenants (or two rules) using the same
-- key never collide, and a conflict can never name another scope's execution.
ALTER TABLE violations DROP CONSTRAINT violations_idempotency_key_key;
ALTER TABLE violations ADD CONSTRAINT violations_rule_idempotency_key
    UNIQUE (branch_rule_id, idempotency_key);

-- A resumed execution is continued by whichever runner claims it; who ran its earlier
-- parts is kept here, oldest first, while runner_id names the latest.
ALTER TABLE executions ADD COLUMN earlier_runner_ids text[] NOT NULL DEFAULT '{}';
