-- A revision keeps its document and diff as the text they were sent as (`json`): they are
-- only ever stored and handed back whole, and parsing a 40,000-branch-rule brand into
-- `jsonb` was the slowest statement of its apply. What a history listing shows (how many
-- objects each revision created, changed and removed) is counted once, when it is made.
ALTER TABLE config_revisions
    ADD COLUMN created bigint NOT NULL DEFAULT 0,
    ADD COLUMN changed bigint NOT NULL DEFAULT 0,
    ADD COLUMN removed bigint NOT NULL DEFAULT 0;

UPDATE config_revisions r SET
    created = (SELECT count(*) FROM jsonb_array_elements(r.diff->'changes') c
               WHERE c->>'action' = 'create'),
    changed = (SELECT count(*) FROM jsonb_array_elements(r.diff->'changes') c
               WHERE c->>'action' = 'update'),
    removed = (SELECT count(*) FROM jsonb_array_elements(r.diff->'changes') c
               WHERE c->>'action' IN ('archive', 'delete'));

ALTER TABLE config_revisions
    ALTER COLUMN document TYPE json USING document::json,
    ALTER COLUMN diff TYPE json USING diff::json;
