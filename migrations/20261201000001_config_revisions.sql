-- Configuration applied as documents (docs/configure.md): every apply is a revision of its
-- scope (a brand, or the catalogue when brand_id is NULL) with who, why, the document as
-- applied and what it changed. Export names the latest, so an apply can tell whether what
-- its author started from is still current.
CREATE TABLE config_revisions (
    id          bigserial PRIMARY KEY,
    brand_id    uuid REFERENCES brands (id) ON DELETE CASCADE,
    key_id      uuid REFERENCES api_keys (id) ON DELETE SET NULL,
    key_name    text NOT NULL,
    message     text NOT NULL DEFAULT '',
    document    jsonb NOT NULL,
    diff        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX config_revisions_by_scope ON config_revisions (brand_id, id DESC);

-- What a document leaves out is archived, not deleted: kept with its history, out of every
-- export, and no longer run (an archived branch is also inactive).
ALTER TABLE brand_rules ADD COLUMN is_archived boolean NOT NULL DEFAULT false;
ALTER TABLE branches ADD COLUMN is_archived boolean NOT NULL DEFAULT false;
