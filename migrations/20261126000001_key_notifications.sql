-- Processes that remember verified keys (see functions/src/key_cache.rs) hear at once when
-- a key may no longer be what they remember: changed or revoked, or a branch joined or left
-- a brand (the scope of a brand-scoped key). `last_used_at` is written once a minute per
-- key and is not among the columns, so use does not clear every process's memory.
CREATE FUNCTION res_notify_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('res_keys', '');
    RETURN NULL;
END $$;

CREATE TRIGGER api_keys_notify
    AFTER UPDATE OF name, key_hash, role, branch_ids, brand_ids, all_brands, revoked_at OR DELETE
    ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION res_notify_keys();
CREATE TRIGGER branches_notify_keys
    AFTER INSERT OR DELETE OR UPDATE OF brand_id
    ON branches FOR EACH STATEMENT EXECUTE FUNCTION res_notify_keys();
