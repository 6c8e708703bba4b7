-- Since when a runner's state directory refuses writes (disk full, read-only), as it
-- reports with each plan request; NULL while it can write (or an older runner says
-- nothing). The fleet view lists such runners: their reports wait in memory.
ALTER TABLE runners ADD COLUMN state_unwritable_since timestamptz;
