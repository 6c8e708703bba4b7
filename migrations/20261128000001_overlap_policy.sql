-- Overlap policy (res-shared schedule/overlap.rs): what happens to the occurrences that
-- come due while a run is live. 'skip' drops them (the default, the behaviour so far);
-- 'buffer_one' starts one more run as soon as the live one finishes, inside the window.
-- Set on the brand rule for all its branches, or on a branch rule to override it; NULL
-- inherits. Adding a nullable column rewrites nothing, so a live database goes on.
ALTER TABLE brand_rules ADD COLUMN overlap_policy text
    CHECK (overlap_policy IN ('skip', 'buffer_one'));
ALTER TABLE branch_rules ADD COLUMN overlap_policy text
    CHECK (overlap_policy IN ('skip', 'buffer_one'));
