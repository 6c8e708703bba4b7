-- Deterministic jitter (res-shared schedule/jitter.rs): a branch rule runs a fixed number
-- of seconds in [0, jitter_seconds) after each cron time, derived from its id, so a fleet's
-- rules that share a cron time do not all start in the same second. Set on the brand rule
-- for all its branches, or on a branch rule to override it; NULL inherits, 0 turns it off.
-- Takes effect from each rule's next reschedule.
ALTER TABLE brand_rules ADD COLUMN jitter_seconds integer
    CHECK (jitter_seconds BETWEEN 0 AND 3600);
ALTER TABLE branch_rules ADD COLUMN jitter_seconds integer
    CHECK (jitter_seconds BETWEEN 0 AND 3600);
