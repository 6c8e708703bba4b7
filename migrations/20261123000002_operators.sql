-- Operating RES without SQL: operator and viewer keys scoped to brands and/or branches,
-- who ran what and why, operator pause and "run now", and an audit of every action.

ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
    CHECK (role IN ('service', 'runner', 'operator', 'viewer'));
-- A brand scope covers the brand's branches, including ones created later.
ALTER TABLE api_keys ADD COLUMN brand_ids uuid[] NOT NULL DEFAULT '{}';
-- Operator and viewer keys that see every brand say so explicitly.
ALTER TABLE api_keys ADD COLUMN all_brands boolean NOT NULL DEFAULT false;
-- Touched at most once a minute per key, so authentication does not write on every call.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
-- A rotated key names its successor; it keeps working until revoked.
ALTER TABLE api_keys ADD COLUMN rotated_to uuid REFERENCES api_keys (id);

-- Why an execution exists.
ALTER TABLE executions ADD COLUMN trigger text NOT NULL DEFAULT 'schedule'
    CHECK (trigger IN ('schedule', 'manual', 'retry', 'crash_retry', 'resume', 'offline'));
-- For a manual run: the key name that asked and its reason.
ALTER TABLE executions ADD COLUMN triggered_by text;
ALTER TABLE executions ADD COLUMN trigger_reason text;
UPDATE executions SET trigger = 'offline' WHERE offline;
UPDATE executions SET trigger = 'crash_retry' WHERE retry_of IS NOT NULL AND NOT offline;
CREATE INDEX executions_recent ON executions (scheduled_at DESC, id DESC);
-- executions_show walks retry chains both ways.
CREATE INDEX executions_retry_of ON executions (retry_of) WHERE retry_of IS NOT NULL;

-- An operator's pause: no new runs start; a live run finishes.
ALTER TABLE branch_rules ADD COLUMN paused_at timestamptz;
ALTER TABLE branch_rules ADD COLUMN paused_by text;
ALTER TABLE branch_rules ADD COLUMN pause_reason text;
-- Who force-stopped the rule, when and why (is_force_stopped is the flag itself).
ALTER TABLE branch_rules ADD COLUMN force_stopped_at timestamptz;
ALTER TABLE branch_rules ADD COLUMN force_stopped_by text;
ALTER TABLE branch_rules ADD COLUMN force_stop_reason text;
-- "Run now": the next claim runs the rule whatever its schedule and window say.
ALTER TABLE branch_rules ADD COLUMN run_requested_at timestamptz;
ALTER TABLE branch_rules ADD COLUMN run_requested_by text;
ALTER TABLE branch_rules ADD COLUMN run_request_reason text;

-- The failure policy: after failure_threshold failures in a row (3 unless the brand rule
-- sets it) the rule stops its 5-minute retries, follows its schedule and needs attention,
-- until a run succeeds or an operator resumes it. Unusable schedules need attention too.
ALTER TABLE brand_rules ADD COLUMN failure_threshold integer CHECK (failure_threshold >= 1);
ALTER TABLE branch_rules ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0;
ALTER TABLE branch_rules ADD COLUMN needs_attention_at timestamptz;
ALTER TABLE branch_rules ADD COLUMN needs_attention_reason text;
CREATE INDEX branch_rules_needs_attention ON branch_rules (needs_attention_at)
    WHERE needs_attention_at IS NOT NULL;

-- Every operator action: who (the key and its name at the time), when, what, and why.
CREATE TABLE operator_actions (
    id              bigserial PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT now(),
    key_id          uuid NOT NULL REFERENCES api_keys (id),
    key_name        text NOT NULL,
    action          text NOT NULL,
    branch_rule_id  uuid REFERENCES branch_rules (id) ON DELETE CASCADE,
    execution_id    uuid REFERENCES executions (id) ON DELETE SET NULL,
    reason          text NOT NULL
);
CREATE INDEX operator_actions_branch_rule ON operator_actions (branch_rule_id, at DESC);
