-- Opening hours (issue 47). A brand's default week and its calendars of special days, and a
-- branch's own week, attached calendars and special days, are kept as the configuration
-- document writes them (`hours`), so an export gives back what was applied. What schedules
-- read is each branch's hours resolved from those (`opening_hours`: its week, and every
-- special day with the calendar it came from), and a rule's timing beyond cron and daily
-- window (`timing`: while open, a week of its own, validity dates, catch-up), the branch
-- rule's keys over its brand rule's.
ALTER TABLE brands ADD COLUMN hours jsonb;
ALTER TABLE branches ADD COLUMN hours jsonb;
ALTER TABLE branches ADD COLUMN opening_hours jsonb;
-- What a plan sends, so each calendar travels once per brand: a branch's week, own days and
-- the names of its calendars, and the brand's calendars; the runner resolves them as
-- `opening_hours` was resolved (res-shared's `HoursSpec::resolved`).
ALTER TABLE branches ADD COLUMN plan_hours jsonb;
ALTER TABLE brands ADD COLUMN calendars jsonb;
ALTER TABLE brand_rules ADD COLUMN timing jsonb;
ALTER TABLE branch_rules ADD COLUMN timing jsonb;

-- A rule's timing is part of its schedule: the sweeper looks at it again when it changes.
DROP TRIGGER branch_rules_schedule_update ON branch_rules;
CREATE TRIGGER branch_rules_schedule_update
    AFTER UPDATE OF operation_time_from, operation_time_to, is_active, is_archived, rule_id,
                    brand_rule_id, branch_id, needs_attention_at, timing ON branch_rules
    FOR EACH ROW
    WHEN (OLD.operation_time_from IS DISTINCT FROM NEW.operation_time_from
          OR OLD.operation_time_to IS DISTINCT FROM NEW.operation_time_to
          OR OLD.is_active IS DISTINCT FROM NEW.is_active
          OR OLD.is_archived IS DISTINCT FROM NEW.is_archived
          OR OLD.rule_id IS DISTINCT FROM NEW.rule_id
          OR OLD.brand_rule_id IS DISTINCT FROM NEW.brand_rule_id
          OR OLD.branch_id IS DISTINCT FROM NEW.branch_id
          OR OLD.timing IS DISTINCT FROM NEW.timing
          OR (OLD.needs_attention_at IS NOT NULL AND NEW.needs_attention_at IS NULL))
    EXECUTE FUNCTION res_schedule_change_row();
