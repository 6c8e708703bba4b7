-- A change to a brand (its calendars, week, timezone or name) or to a brand rule recorded a
-- global plan change, so every runner of every brand was sent a full plan: one calendar
-- edit was a fleet-wide herd of full plans. They now record what they change: a brand, each
-- of its branches as a whole (the branch's rules travel again with the brand's lookups); a
-- brand rule, each branch rule made from it. The catalogue (rules, action templates, their
-- connections) stays global: it is shared by every brand.

CREATE FUNCTION res_plan_change_brands() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A brand deleted takes its branches with it, and their own triggers record that.
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO plan_changes (branch_id)
            SELECT b.id FROM branches b WHERE b.brand_id IN (SELECT id FROM new_rows);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION res_plan_change_brand_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A new brand rule has no branch rules yet; a deleted one's branch rules change with it
    -- (their own triggers record that).
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO plan_changes (branch_id, branch_rule_id)
            SELECT br.branch_id, br.id FROM branch_rules br
             WHERE br.brand_rule_id IN (SELECT id FROM new_rows);
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER brands_plan_change ON brands;
CREATE TRIGGER brands_plan_change_update AFTER UPDATE ON brands
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_brands();

DROP TRIGGER brand_rules_plan_change ON brand_rules;
CREATE TRIGGER brand_rules_plan_change_update AFTER UPDATE ON brand_rules
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION res_plan_change_brand_rules();
