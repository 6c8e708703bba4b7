-- The runner registry, and what the sweeper and the fleet lists read.

-- One row per runner (as it names itself) and the key it calls with: fed by
-- runner_register, plan fetches and heartbeats, read by runners_list and rules_describe.
CREATE TABLE runners (
    key_id                  uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    runner_id               text NOT NULL,
    boot_id                 text,
    version                 text,
    booted_at               timestamptz,
    first_seen_at           timestamptz NOT NULL DEFAULT now(),
    last_seen_at            timestamptz NOT NULL DEFAULT now(),
    last_plan_at            timestamptz,
    outbox_depth            integer,
    last_outage_started_at  timestamptz,
    last_outage_ended_at    timestamptz,
    PRIMARY KEY (key_id, runner_id)
);
-- The fleet gauges and the sweeper's retention read runners by silence.
CREATE INDEX runners_last_seen ON runners (last_seen_at);

-- violations_list pages newest first; retention deletes the oldest.
CREATE INDEX violations_recent ON violations (created_at DESC, id DESC);
-- Deleting an execution sets these references to NULL: without an index each deleted
-- execution would scan the whole table.
CREATE INDEX violations_execution ON violations (execution_id) WHERE execution_id IS NOT NULL;
CREATE INDEX operator_actions_execution ON operator_actions (execution_id)
    WHERE execution_id IS NOT NULL;

-- The history filtered by an outcome operators look for: only runs that did not complete
-- are in it, and each enters once, when its report sets the status.
CREATE INDEX executions_unsuccessful_recent ON executions (scheduled_at DESC, id DESC)
    WHERE status IN ('failed', 'crashed', 'cancelled', 'timeout', 'operation_window_exceeded');

-- rules_list orders rules by branch and rule name.
CREATE INDEX branches_name ON branches (name, id);
