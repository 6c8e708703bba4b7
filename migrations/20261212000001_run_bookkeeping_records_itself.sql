-- A claim's or a report's update of its branch rule fired three PL/pgSQL triggers: the touch
-- (updated_at, revision), the statement trigger that records the plan change from the
-- update's transition tables, and the NOTIFY check on that plan_changes insert, which only
-- returned (run bookkeeping wakes no wait). Together they were most of the report's rule
-- update, 0.255 ms a call at 12,000 sites (docs/benchmarks.md). The functions' claim and
-- report statements now do that work themselves — they count the revision, set updated_at
-- and insert their plan_changes rows in the same statement — in transactions that say so
-- with `res.run_bookkeeping = 'recorded'`. Functions of earlier releases set 'on' and keep
-- the triggers, so both can run against this schema during a rolling upgrade.

-- The touch runs only for an update that left the revision alone. In a 'recorded'
-- transaction every update of a branch rule records itself, so one that did not is refused
-- rather than left out of every delta.
CREATE OR REPLACE FUNCTION res_touch_branch_rule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('res.run_bookkeeping', true) = 'recorded' THEN
        RAISE EXCEPTION 'branch rule % updated in run bookkeeping without recording its plan change', NEW.id;
    END IF;
    NEW.updated_at := now();
    NEW.revision := OLD.revision + 1;
    RETURN NEW;
END $$;

DROP TRIGGER branch_rules_touch ON branch_rules;
CREATE TRIGGER branch_rules_touch BEFORE UPDATE ON branch_rules
    FOR EACH ROW WHEN (OLD.revision = NEW.revision)
    EXECUTE FUNCTION res_touch_branch_rule();

DROP TRIGGER branch_rules_plan_change_update ON branch_rules;
CREATE TRIGGER branch_rules_plan_change_update AFTER UPDATE ON branch_rules
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (current_setting('res.run_bookkeeping', true) IS DISTINCT FROM 'recorded')
    EXECUTE FUNCTION res_plan_change_branch_rules();

-- Checked before the call instead of inside it: run bookkeeping wakes no wait, either way,
-- and the function no longer looks at the mark.
CREATE OR REPLACE FUNCTION res_notify_plan_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('res_plan', branch)
       FROM (SELECT DISTINCT COALESCE(branch_id::text, '') AS branch FROM new_rows) changed;
    RETURN NULL;
END $$;

DROP TRIGGER plan_changes_notify ON plan_changes;
CREATE TRIGGER plan_changes_notify AFTER INSERT ON plan_changes
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (COALESCE(current_setting('res.run_bookkeeping', true), '') NOT IN ('on', 'recorded'))
    EXECUTE FUNCTION res_notify_plan_changes();
