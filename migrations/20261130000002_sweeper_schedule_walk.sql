-- Where the sweeper's check of changed schedules stands: rules whose change records fall
-- in (since, until] are checked in batches after `after`, then the window moves on. Kept in
-- the database (one row), so the process that holds the sweeper lock next carries on.
CREATE TABLE sweeper_schedule_walk (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    since   timestamptz NOT NULL,
    until   timestamptz NOT NULL,
    after   uuid NOT NULL
);
