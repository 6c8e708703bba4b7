-- The plan-change triggers on branch_rules, action_details and branches, and the NOTIFY on
-- plan_changes, fired once per row: creating a brand of 40,000 branch rules ran 160,000
-- PL/pgSQL calls inside its INSERTs (most of the apply's write time). They now fire once per
-- statement and read the statement's rows from its transition tables; what they record is
-- unchanged — one plan_changes row per branch rule (and per branch), the old branch too
-- when a row moves, one NOTIFY per branch. PostgreSQL allows transition tables on
-- single-event triggers only, hence three triggers per table over one function.

CREATE OR REPLACE FUNCTION res_plan_change_branch_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id) SELECT branch_id, id FROM old_rows;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id) SELECT branch_id, id FROM new_rows;
        RETURN NULL;
    END IF;
    -- A rule moved to another branch leaves the old branch's plans too. A UNION, not a join
    -- of the two transition tables: they have no statistics, and a plan cached after a
    -- one-row update (a claim) joined 40,000 rows to 40,000 in a nested loop — minutes
    -- with every claim of those rules waiting.
    INSERT INTO plan_changes (branch_id, branch_rule_id)
        SELECT branch_id, id FROM new_rows UNION SELECT branch_id, id FROM old_rows;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION res_plan_change_action_details() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- When the branch rule itself is being deleted, its own trigger records the change (the
    -- join finds no row for it).
    IF TG_OP = 'DELETE' THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id)
            SELECT br.branch_id, br.id FROM branch_rules br
             WHERE br.id IN (SELECT branch_rule_id FROM old_rows);
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id)
            SELECT br.branch_id, br.id FROM branch_rules br
             WHERE br.id IN (SELECT branch_rule_id FROM new_rows);
    ELSE
        INSERT INTO plan_changes (branch_id, branch_rule_id)
            SELECT br.branch_id, br.id FROM branch_rules br
             WHERE br.id IN (SELECT branch_rule_id FROM new_rows
                             UNION SELECT branch_rule_id FROM old_rows);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION res_plan_change_branches() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO plan_changes (branch_id) SELECT id FROM old_rows;
    ELSE
        INSERT INTO plan_changes (branch_id) SELECT id FROM new_rows;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION res_notify_plan_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('res_plan', branch)
       FROM (SELECT DISTINCT COALESCE(branch_id::text, '') AS branch FROM new_rows) changed;
    RETURN NULL;
END $$;

DROP TRIGGER branch_rules_plan_change ON branch_rules;
CREATE TRIGGER branch_rules_plan_change_insert AFTER INSERT ON branch_rules
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_branch_rules();
CREATE TRIGGER branch_rules_plan_change_update AFTER UPDATE ON branch_rules
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_branch_rules();
CREATE TRIGGER branch_rules_plan_change_delete AFTER DELETE ON branch_rules
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_branch_rules();

DROP TRIGGER action_details_plan_change ON action_details;
CREATE TRIGGER action_details_plan_change_insert AFTER INSERT ON action_details
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_action_details();
CREATE TRIGGER action_details_plan_change_update AFTER UPDATE ON action_details
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_action_details();
CREATE TRIGGER action_details_plan_change_delete AFTER DELETE ON action_details
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_action_details();

DROP TRIGGER branches_plan_change ON branches;
CREATE TRIGGER branches_plan_change_insert AFTER INSERT ON branches
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_branches();
CREATE TRIGGER branches_plan_change_update AFTER UPDATE ON branches
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_branches();
CREATE TRIGGER branches_plan_change_delete AFTER DELETE ON branches
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_branches();

DROP TRIGGER plan_changes_notify ON plan_changes;
CREATE TRIGGER plan_changes_notify AFTER INSERT ON plan_changes
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_notify_plan_changes();

DROP FUNCTION res_plan_change_branch_rule();
DROP FUNCTION res_plan_change_action_detail();
DROP FUNCTION res_plan_change_branch();
DROP FUNCTION res_notify_plan_change();
