-- RES schema. Table and column names follow the original system, so an existing database
-- maps onto it; executions, api_keys and plan_changes are new.

CREATE FUNCTION res_touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END $$;

CREATE TABLE brands (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL,
    timezone    text NOT NULL DEFAULT 'Asia/Riyadh',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE branches (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    brand_id    uuid NOT NULL REFERENCES brands (id) ON DELETE CASCADE,
    name        text NOT NULL,
    is_active   boolean NOT NULL DEFAULT true,
    -- Overrides the brand's zone when set.
    timezone    text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX branches_brand_id ON branches (brand_id);

CREATE TABLE rules (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name             text NOT NULL,
    status           text NOT NULL DEFAULT 'draft' CHECK (status IN ('active', 'inactive', 'draft')),
    cron_expression  text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE brand_rules (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    brand_id         uuid NOT NULL REFERENCES brands (id) ON DELETE CASCADE,
    rule_id          uuid NOT NULL REFERENCES rules (id) ON DELETE CASCADE,
    -- Overrides the rule's expression when set.
    cron_expression  text,
    settings         jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (brand_id, rule_id)
);

CREATE TABLE action_templates (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('detection', 'business')),
    config      jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE action_template_connections (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    rule_id          uuid NOT NULL UNIQUE REFERENCES rules (id) ON DELETE CASCADE,
    workflow_config  jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE branch_rules (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    branch_id             uuid NOT NULL REFERENCES branches (id) ON DELETE CASCADE,
    rule_id               uuid NOT NULL REFERENCES rules (id) ON DELETE CASCADE,
    brand_rule_id         uuid REFERENCES brand_rules (id) ON DELETE SET NULL,
    is_active             boolean NOT NULL DEFAULT true,
    is_archived           boolean NOT NULL DEFAULT false,
    is_force_stopped      boolean NOT NULL DEFAULT false,
    is_currently_running  boolean NOT NULL DEFAULT false,
    next_run_time         timestamptz,
    last_run_time         timestamptz,
    -- Local wall-clock window in the branch's zone; both or neither.
    operation_time_from   time,
    operation_time_to     time,
    run_count             bigint NOT NULL DEFAULT 0,
    failure_count         bigint NOT NULL DEFAULT 0,
    is_last_run_failed    boolean NOT NULL DEFAULT false,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT branch_rules_window_both_or_neither
        CHECK ((operation_time_from IS NULL) = (operation_time_to IS NULL))
);
CREATE INDEX branch_rules_branch_id ON branch_rules (branch_id);
CREATE INDEX branch_rules_rule_id ON branch_rules (rule_id);

CREATE TABLE action_details (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    branch_rule_id      uuid NOT NULL REFERENCES branch_rules (id) ON DELETE CASCADE,
    action_template_id  uuid NOT NULL REFERENCES action_templates (id) ON DELETE CASCADE,
    config              jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX action_details_branch_rule_id ON action_details (branch_rule_id);

-- One row per attempt to run a branch rule.
CREATE TABLE executions (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    branch_rule_id    uuid NOT NULL REFERENCES branch_rules (id) ON DELETE CASCADE,
    runner_id         text NOT NULL,
    status            text NOT NULL CHECK (status IN (
                          'scheduled', 'running', 'completed', 'failed', 'cancelled',
                          'timeout', 'operation_window_exceeded', 'crashed')),
    attempt           integer NOT NULL DEFAULT 1,
    retry_of          uuid REFERENCES executions (id) ON DELETE SET NULL,
    claim_token       text NOT NULL,
    lease_seconds     integer NOT NULL,
    lease_expires_at  timestamptz NOT NULL,
    cancel_requested  boolean NOT NULL DEFAULT false,
    scheduled_at      timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    result            jsonb,
    error             text,
    metrics           jsonb,
    -- The answer given to the finishing report, replayed when the report repeats.
    report            jsonb
);
-- At most one live attempt per rule, whatever the application does.
CREATE UNIQUE INDEX executions_one_live_per_rule
    ON executions (branch_rule_id) WHERE status IN ('scheduled', 'running');
CREATE INDEX executions_live_lease
    ON executions (lease_expires_at) WHERE status IN ('scheduled', 'running');
CREATE INDEX executions_branch_rule_recent ON executions (branch_rule_id, scheduled_at DESC);

CREATE TABLE violations (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    branch_rule_id   uuid NOT NULL REFERENCES branch_rules (id) ON DELETE CASCADE,
    execution_id     uuid REFERENCES executions (id) ON DELETE SET NULL,
    kind             text NOT NULL,
    details          jsonb NOT NULL DEFAULT '{}',
    idempotency_key  text NOT NULL UNIQUE,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX violations_branch_rule_id ON violations (branch_rule_id, created_at DESC);

-- Bearer tokens: only their SHA-256 is stored. A runner key sees only its branches.
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL,
    key_hash    text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('service', 'runner')),
    branch_ids  uuid[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- Every change that can alter an execution plan, stamped with the writing transaction, so
-- get-execution-plan-v2 can answer "what changed since this snapshot?" exactly, even when
-- transactions commit out of order. branch_id NULL: a change to shared definitions (rules,
-- templates, brands) that every plan must refetch. branch_rule_id NULL: the whole branch.
CREATE TABLE plan_changes (
    id              bigserial PRIMARY KEY,
    txid            xid8 NOT NULL DEFAULT pg_current_xact_id(),
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    branch_id       uuid,
    branch_rule_id  uuid
);
CREATE INDEX plan_changes_txid ON plan_changes (txid);
CREATE INDEX plan_changes_recorded_at ON plan_changes (recorded_at);

CREATE FUNCTION res_plan_change_branch_rule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id) VALUES (OLD.branch_id, OLD.id);
        RETURN OLD;
    END IF;
    INSERT INTO plan_changes (branch_id, branch_rule_id) VALUES (NEW.branch_id, NEW.id);
    -- A rule moved to another branch leaves the old branch's plans too.
    IF TG_OP = 'UPDATE' AND OLD.branch_id IS DISTINCT FROM NEW.branch_id THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id) VALUES (OLD.branch_id, OLD.id);
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION res_plan_change_action_detail() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed action_details%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
    -- When the branch rule itself is being deleted, its own trigger records the change.
    INSERT INTO plan_changes (branch_id, branch_rule_id)
        SELECT br.branch_id, br.id FROM branch_rules br WHERE br.id = changed.branch_rule_id;
    IF TG_OP = 'UPDATE' AND OLD.branch_rule_id IS DISTINCT FROM NEW.branch_rule_id THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id)
            SELECT br.branch_id, br.id FROM branch_rules br WHERE br.id = OLD.branch_rule_id;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION res_plan_change_branch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO plan_changes (branch_id) VALUES (OLD.id);
    ELSE
        INSERT INTO plan_changes (branch_id) VALUES (NEW.id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION res_plan_change_global() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO plan_changes (branch_id, branch_rule_id) VALUES (NULL, NULL);
    RETURN NULL;
END $$;

CREATE TRIGGER branch_rules_plan_change AFTER INSERT OR UPDATE OR DELETE ON branch_rules
    FOR EACH ROW EXECUTE FUNCTION res_plan_change_branch_rule();
CREATE TRIGGER action_details_plan_change AFTER INSERT OR UPDATE OR DELETE ON action_details
    FOR EACH ROW EXECUTE FUNCTION res_plan_change_action_detail();
CREATE TRIGGER branches_plan_change AFTER INSERT OR UPDATE OR DELETE ON branches
    FOR EACH ROW EXECUTE FUNCTION res_plan_change_branch();
CREATE TRIGGER brands_plan_change AFTER INSERT OR UPDATE OR DELETE ON brands
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_global();
CREATE TRIGGER rules_plan_change AFTER INSERT OR UPDATE OR DELETE ON rules
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_global();
CREATE TRIGGER brand_rules_plan_change AFTER INSERT OR UPDATE OR DELETE ON brand_rules
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_global();
CREATE TRIGGER action_templates_plan_change AFTER INSERT OR UPDATE OR DELETE ON action_templates
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_global();
CREATE TRIGGER action_template_connections_plan_change
    AFTER INSERT OR UPDATE OR DELETE ON action_template_connections
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_global();

CREATE TRIGGER brands_touch BEFORE UPDATE ON brands
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
CREATE TRIGGER branches_touch BEFORE UPDATE ON branches
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
CREATE TRIGGER rules_touch BEFORE UPDATE ON rules
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
CREATE TRIGGER brand_rules_touch BEFORE UPDATE ON brand_rules
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
CREATE TRIGGER action_templates_touch BEFORE UPDATE ON action_templates
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
CREATE TRIGGER action_template_connections_touch BEFORE UPDATE ON action_template_connections
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
CREATE TRIGGER branch_rules_touch BEFORE UPDATE ON branch_rules
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
CREATE TRIGGER action_details_touch BEFORE UPDATE ON action_details
    FOR EACH ROW EXECUTE FUNCTION res_touch_updated_at();
