-- Configuring RES is its own permission: an admin key reads and acts like an operator key and
-- also manages the keys inside its scope (and, next, the configuration).
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
    CHECK (role IN ('service', 'runner', 'operator', 'viewer', 'admin'));
