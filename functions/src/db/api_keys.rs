//! SQL for `api_keys`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::access::{Caller, Role};

#[derive(sqlx::FromRow)]
struct LiveKey {
    id: Uuid,
    name: String,
    role: String,
    all_brands: bool,
    branch_ids: Vec<Uuid>,
    used_recently: bool,
}

/// The live key with this hash, as a caller whose branches include its brands' branches.
pub(crate) async fn find_live(
    pool: &PgPool,
    key_hash: &str,
) -> Result<Option<Caller>, sqlx::Error> {
    let row: Option<LiveKey> = sqlx::query_as(
        "SELECT k.id, k.name, k.role, k.all_brands, \
                ARRAY(SELECT unnest(k.branch_ids) \
                      UNION SELECT b.id FROM branches b WHERE b.brand_id = ANY(k.brand_ids)) \
                    AS branch_ids, \
                COALESCE(k.last_used_at > now() - interval '1 minute', false) AS used_recently \
         FROM api_keys k WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
    )
    .bind(key_hash)
    .fetch_optional(pool)
    .await?;
    let Some(key) = row else { return Ok(None) };
    if !key.used_recently {
        sqlx::query("UPDATE api_keys SET last_used_at = now() WHERE id = $1")
            .bind(key.id)
            .execute(pool)
            .await?;
    }
    Ok(Role::parse(&key.role).map(|role| Caller {
        key_id: key.id,
        key_name: key.name,
        role,
        all_brands: key.all_brands,
        branch_ids: key.branch_ids,
    }))
}

/// What a new key may see.
#[derive(Debug, Clone, Default)]
pub struct KeyScope {
    pub all_brands: bool,
    pub brand_ids: Vec<Uuid>,
    pub branch_ids: Vec<Uuid>,
}

/// Stores a new key (only its hash) and returns its id.
pub async fn insert(
    pool: &PgPool,
    name: &str,
    key_hash: &str,
    role: Role,
    scope: &KeyScope,
) -> Result<Uuid, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO api_keys (name, key_hash, role, branch_ids, brand_ids, all_brands) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(name)
    .bind(key_hash)
    .bind(role.as_str())
    .bind(&scope.branch_ids)
    .bind(&scope.brand_ids)
    .bind(scope.all_brands)
    .fetch_one(pool)
    .await
}

/// One key as `list-api-keys` shows it: never its secret or hash.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct KeyListing {
    pub id: Uuid,
    pub name: String,
    pub role: String,
    pub all_brands: bool,
    pub brand_ids: Vec<Uuid>,
    pub branch_ids: Vec<Uuid>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The key that replaced this one when it was rotated.
    pub rotated_to: Option<Uuid>,
}

/// Every key, newest first; revoked ones only when asked.
pub async fn list(pool: &PgPool, include_revoked: bool) -> Result<Vec<KeyListing>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, name, role, all_brands, brand_ids, branch_ids, created_at, last_used_at, \
                revoked_at, rotated_to \
         FROM api_keys WHERE $1 OR revoked_at IS NULL ORDER BY created_at DESC, id",
    )
    .bind(include_revoked)
    .fetch_all(pool)
    .await
}

/// Creates a key with the same name, role and scope as a live key and records it as the
/// old key's successor. The old key keeps working until it is revoked, so the holder can
/// switch without an outage. `None` when no live key has that id.
pub async fn rotate(pool: &PgPool, id: Uuid, key_hash: &str) -> Result<Option<Uuid>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let new_id: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO api_keys (name, key_hash, role, branch_ids, brand_ids, all_brands) \
         SELECT name, $2, role, branch_ids, brand_ids, all_brands FROM api_keys \
         WHERE id = $1 AND revoked_at IS NULL AND rotated_to IS NULL \
         RETURNING id",
    )
    .bind(id)
    .bind(key_hash)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(new_id) = new_id {
        sqlx::query("UPDATE api_keys SET rotated_to = $2 WHERE id = $1")
            .bind(id)
            .bind(new_id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(new_id)
}

/// Revokes a key; false when no live key has that id.
pub async fn revoke(pool: &PgPool, id: Uuid) -> Result<bool, sqlx::Error> {
    let result =
        sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL")
            .bind(id)
            .execute(pool)
            .await?;
    Ok(result.rows_affected() == 1)
}

/// Which of these branch ids exist (a key naming a missing branch is a typo).
pub async fn existing_branches(pool: &PgPool, ids: &[Uuid]) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM branches WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(pool)
        .await
}

/// Which of these brand ids exist.
pub async fn existing_brands(pool: &PgPool, ids: &[Uuid]) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM brands WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(pool)
        .await
}
