-- Pausing an execution at a long delay node and resuming it later, on any runner, with
-- the same execution id.

ALTER TABLE executions DROP CONSTRAINT executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check CHECK (status IN (
    'scheduled', 'running', 'paused', 'completed', 'failed', 'cancelled', 'timeout',
    'operation_window_exceeded', 'crashed'));

-- The first attempt of a retry chain: business actions derive idempotency keys from it,
-- so a crashed run that is retried never records a violation twice.
ALTER TABLE executions ADD COLUMN root_id uuid;
UPDATE executions SET root_id = id;
ALTER TABLE executions ALTER COLUMN root_id SET NOT NULL;

-- What a paused execution needs to continue, and when it may.
ALTER TABLE executions ADD COLUMN context jsonb;
ALTER TABLE executions ADD COLUMN resume_at timestamptz;
ALTER TABLE executions ADD COLUMN resumed_count integer NOT NULL DEFAULT 0;

-- A paused execution still holds its rule: no second run starts while it waits.
DROP INDEX executions_one_live_per_rule;
CREATE UNIQUE INDEX executions_one_live_per_rule
    ON executions (branch_rule_id) WHERE status IN ('scheduled', 'running', 'paused');
CREATE INDEX executions_paused_resume ON executions (resume_at) WHERE status = 'paused';
