-- Which start of its runner claimed an execution: runner_register declares executions of
-- earlier boots crashed at once, instead of when their leases expire.
ALTER TABLE executions ADD COLUMN boot_id text;
CREATE INDEX executions_live_runner
    ON executions (runner_id) WHERE status IN ('scheduled', 'running');

-- Runs a runner made without a claim while the functions were unreachable, recorded
-- from their late report.
ALTER TABLE executions ADD COLUMN offline boolean NOT NULL DEFAULT false;
