-- A runner's state directory with less free space than its threshold (`state_free_warn_mb`),
-- as the runner said with its last plan request: the fleet view lists it before a write
-- fails. NULL while there is room (and from runners before 0.3.0).
ALTER TABLE runners ADD COLUMN state_space_low_since timestamptz;
