-- A violation a retry found again after an earlier attempt of its chain had recorded it:
-- one violation per occurrence, so it is not a violation, but it is kept aside (with the
-- key it was recorded under) because a chain can split. When a crashed run's own late
-- report arrives, the offline runs the functions took for its retries were runs of their
-- own, and what each of them (or the crashed run) found becomes a violation of its own.
-- Deleted with its execution (retention).
CREATE TABLE violations_withheld (
    id               bigserial PRIMARY KEY,
    branch_rule_id   uuid NOT NULL REFERENCES branch_rules (id) ON DELETE CASCADE,
    execution_id     uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    kind             text NOT NULL,
    details          jsonb NOT NULL,
    idempotency_key  text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (execution_id, idempotency_key)
);
