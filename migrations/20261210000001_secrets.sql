-- A brand's secrets (issue 46), referenced by name from configuration as ${secret:NAME}.
-- Values are sealed by the functions (functions/src/secrets/seal.rs): `sealed_value` under
-- a data key of its own, `wrapped_key` that data key under the sealing key `key_id`. No
-- column here holds a value in clear.
CREATE TABLE secrets (
    brand_id      uuid NOT NULL REFERENCES brands (id) ON DELETE CASCADE,
    name          text NOT NULL,
    -- NULL: every branch of the brand; else only these branches' sites receive it.
    branch_ids    uuid[],
    version       integer NOT NULL DEFAULT 1,
    key_id        text NOT NULL,
    wrapped_key   bytea NOT NULL,
    sealed_value  bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    created_by    text NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    updated_by    text NOT NULL,
    PRIMARY KEY (brand_id, name)
);

-- Every change to a secret, for the audit trail: who, when, which version; never a value.
CREATE TABLE secret_changes (
    id        bigserial PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT now(),
    brand_id  uuid NOT NULL REFERENCES brands (id) ON DELETE CASCADE,
    name      text NOT NULL,
    version   integer,
    action    text NOT NULL CHECK (action IN ('created', 'set', 'deleted', 'rewrapped')),
    key_id    uuid REFERENCES api_keys (id) ON DELETE SET NULL,
    key_name  text NOT NULL
);
CREATE INDEX secret_changes_by_name ON secret_changes (brand_id, name, at DESC);
