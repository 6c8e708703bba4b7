-- Every change to a branch rule gets the next number of that row's revision. A runner
-- remembers the revision its own claim or report produced and keeps its local schedule only
-- while a plan shows no newer one: a plan read before its report committed cannot undo the
-- report, and a change committed after it reaches the site at once (before, the runner kept
-- its own values for a whole refresh interval after every run, dropping such a change).
-- Row locks order the updates of one row, so the counter follows commit order. The default
-- is a constant: the column is added without rewriting the table.
ALTER TABLE branch_rules ADD COLUMN revision bigint NOT NULL DEFAULT 0;

-- One BEFORE trigger as before (the touch), now also counting: no extra trigger on the
-- claim and report path.
CREATE FUNCTION res_touch_branch_rule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    NEW.revision := OLD.revision + 1;
    RETURN NEW;
END $$;

DROP TRIGGER branch_rules_touch ON branch_rules;
CREATE TRIGGER branch_rules_touch BEFORE UPDATE ON branch_rules
    FOR EACH ROW EXECUTE FUNCTION res_touch_branch_rule();
