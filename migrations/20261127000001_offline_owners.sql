-- Offline by default, never twice (issue 14): each branch has at most one offline owner, the
-- one runner that keeps running the branch's rules from its local plan while the functions
-- are unreachable. It is chosen at plan fetches from the runner registry and handed over
-- when it goes stale; the plan tells every runner of the branch who it is.

-- Since when a runner has been in contact without going stale: a runner only takes over a
-- stale owner's branches after it has itself been back that long, so the first runner back
-- after a site-wide outage does not take a branch whose owner is still delivering its
-- offline runs. (now() is stable: the column is added without rewriting the table.)
ALTER TABLE runners ADD COLUMN online_since timestamptz NOT NULL DEFAULT now();

CREATE TABLE branch_offline_owners (
    branch_id  uuid PRIMARY KEY REFERENCES branches (id) ON DELETE CASCADE,
    key_id     uuid NOT NULL,
    runner_id  text NOT NULL,
    -- When this owner was designated: a fresh designation is not handed over again, so two
    -- runners asking at once cannot both become the owner.
    since      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (key_id, runner_id) REFERENCES runners (key_id, runner_id) ON DELETE CASCADE
);
-- The registry listing marks each runner's owned branches; forgetting a runner drops them.
CREATE INDEX branch_offline_owners_runner ON branch_offline_owners (key_id, runner_id);
