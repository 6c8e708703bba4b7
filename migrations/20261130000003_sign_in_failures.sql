-- Refused console sign-ins by client address: past a documented number in a quarter of an
-- hour, the address is answered 429 before any key is looked up. Kept in the database so
-- every process (and every Lambda instance) counts the same attempts; the sweeper deletes
-- rows older than the window.
CREATE TABLE console_sign_in_failures (
    address  text NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sign_in_failures_address_at ON console_sign_in_failures (address, at);
CREATE INDEX console_sign_in_failures_at ON console_sign_in_failures (at);
