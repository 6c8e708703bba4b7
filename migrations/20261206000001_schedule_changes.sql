-- The sweeper checks the schedules of the rules whose schedule may have changed since its
-- last look. It read them from plan_changes, which records every write to a branch rule —
-- each claim and each report too — so at fleet scale its walk re-read every rule that had
-- run (20,000 sites: 25-40 s a page, PostgreSQL never idle). Changes to what a branch rule's
-- schedule is made of are recorded here instead, by triggers that claims and reports never
-- fire (they set none of these columns but needs_attention_at, and that only counts when a
-- flag is lifted). Branch-wide and shared changes (a branch's zone, a rule's cron) are still
-- read from plan_changes, through an index of those rows alone.
CREATE TABLE schedule_changes (
    id              bigserial PRIMARY KEY,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    branch_rule_id  uuid NOT NULL
);
CREATE INDEX schedule_changes_recorded_at ON schedule_changes (recorded_at);
CREATE INDEX plan_changes_shared_recorded_at ON plan_changes (recorded_at)
    WHERE branch_rule_id IS NULL;

CREATE FUNCTION res_schedule_change_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO schedule_changes (branch_rule_id) SELECT id FROM new_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION res_schedule_change_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO schedule_changes (branch_rule_id) VALUES (NEW.id);
    RETURN NULL;
END $$;

CREATE TRIGGER branch_rules_schedule_insert AFTER INSERT ON branch_rules
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_schedule_change_rows();

-- Row by row with a WHEN, checked without calling the function: an update that changes
-- none of these costs nothing more.
CREATE TRIGGER branch_rules_schedule_update
    AFTER UPDATE OF operation_time_from, operation_time_to, is_active, is_archived, rule_id,
                    brand_rule_id, branch_id, needs_attention_at ON branch_rules
    FOR EACH ROW
    WHEN (OLD.operation_time_from IS DISTINCT FROM NEW.operation_time_from
          OR OLD.operation_time_to IS DISTINCT FROM NEW.operation_time_to
          OR OLD.is_active IS DISTINCT FROM NEW.is_active
          OR OLD.is_archived IS DISTINCT FROM NEW.is_archived
          OR OLD.rule_id IS DISTINCT FROM NEW.rule_id
          OR OLD.brand_rule_id IS DISTINCT FROM NEW.brand_rule_id
          OR OLD.branch_id IS DISTINCT FROM NEW.branch_id
          OR (OLD.needs_attention_at IS NOT NULL AND NEW.needs_attention_at IS NULL))
    EXECUTE FUNCTION res_schedule_change_row();
