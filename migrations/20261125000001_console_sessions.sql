-- Console sign-ins: the browser holds a random session token in an HttpOnly cookie; the
-- database keeps its SHA-256 and the key it stands for, so revoking the key ends every
-- session made with it, and signing out deletes the row.
CREATE TABLE console_sessions (
    token_hash   text PRIMARY KEY,
    key_id       uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
-- The sweeper deletes expired sessions.
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
