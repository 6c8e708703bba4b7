-- The configuration an execution ran with: the latest revision of its brand and of the
-- catalogue when it was claimed (NULL: claimed before any apply, or an offline run, which
-- ran from the site's copy of the plan). Nullable without a default: no table rewrite.
ALTER TABLE executions ADD COLUMN config_revision bigint;
ALTER TABLE executions ADD COLUMN catalogue_revision bigint;
