-- Every committed plan change wakes the plan requests waiting on its branch (the bounded
-- wait of get-execution-plan-v2): one NOTIFY per branch and transaction (PostgreSQL folds
-- repeats), delivered at commit to the one listening connection of each functions process.
-- Payload: the branch id, or '' for shared definitions (every plan).
CREATE FUNCTION res_notify_plan_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('res_plan', COALESCE(NEW.branch_id::text, ''));
    RETURN NULL;
END $$;

CREATE TRIGGER plan_changes_notify AFTER INSERT ON plan_changes
    FOR EACH ROW EXECUTE FUNCTION res_notify_plan_change();
