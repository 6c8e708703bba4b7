//! SQL for `api_keys`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use res_shared::wire::KeySummary;

use crate::access::{Caller, Role};

#[derive(sqlx::FromRow)]
struct LiveKey {
    id: Uuid,
    name: String,
    #[sqlx(try_from = "String")]
    role: Role,
    all_brands: bool,
    branch_ids: Vec<Uuid>,
    used_recently: bool,
}

/// The columns of a live key as a caller (its branches include its brands' branches), and
/// the `api_keys k` they come from.
macro_rules! live_key_from {
    ($rest:literal) => {
        concat!(
            "SELECT k.id, k.name, k.role, k.all_brands, \
                    ARRAY(SELECT unnest(k.branch_ids) \
                          UNION SELECT b.id FROM branches b WHERE b.brand_id = ANY(k.brand_ids)) \
                        AS branch_ids, \
                    COALESCE(k.last_used_at > now() - interval '1 minute', false) AS used_recently \
             FROM api_keys k ",
            $rest
        )
    };
}

/// The live key with this hash, as a caller.
pub(crate) async fn find_live(
    pool: &PgPool,
    key_hash: &str,
) -> Result<Option<Caller>, sqlx::Error> {
    let row: Option<LiveKey> = sqlx::query_as(live_key_from!(
        "WHERE k.key_hash = $1 AND k.revoked_at IS NULL"
    ))
    .bind(key_hash)
    .fetch_optional(pool)
    .await?;
    caller_of(pool, row).await
}

/// The live key an unexpired console session was signed in with, as a caller.
pub(crate) async fn find_by_session(
    pool: &PgPool,
    token_hash: &str,
) -> Result<Option<Caller>, sqlx::Error> {
    let row: Option<LiveKey> = sqlx::query_as(live_key_from!(
        "JOIN console_sessions s ON s.key_id = k.id \
         WHERE s.token_hash = $1 AND s.expires_at > now() AND k.revoked_at IS NULL"
    ))
    .bind(token_hash)
    .fetch_optional(pool)
    .await?;
    caller_of(pool, row).await
}

/// Marks the key used (at most once a minute) and makes it a caller.
async fn caller_of(pool: &PgPool, row: Option<LiveKey>) -> Result<Option<Caller>, sqlx::Error> {
    let Some(key) = row else { return Ok(None) };
    if !key.used_recently {
        sqlx::query("UPDATE api_keys SET last_used_at = now() WHERE id = $1")
            .bind(key.id)
            .execute(pool)
            .await?;
    }
    Ok(Some(Caller {
        key_id: key.id,
        key_name: key.name,
        role: key.role,
        all_brands: key.all_brands,
        branch_ids: key.branch_ids,
    }))
}

/// Records a console session for a key, valid for `lifetime`.
pub(crate) async fn insert_session(
    pool: &PgPool,
    token_hash: &str,
    key_id: Uuid,
    lifetime: chrono::TimeDelta,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO console_sessions (token_hash, key_id, expires_at) \
         VALUES ($1, $2, now() + $3)",
    )
    .bind(token_hash)
    .bind(key_id)
    .bind(lifetime)
    .execute(pool)
    .await
    .map(drop)
}

/// Ends a console session (signing out).
pub(crate) async fn delete_session(pool: &PgPool, token_hash: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM console_sessions WHERE token_hash = $1")
        .bind(token_hash)
        .execute(pool)
        .await
        .map(drop)
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

#[derive(sqlx::FromRow)]
struct KeyRow {
    id: Uuid,
    name: String,
    #[sqlx(try_from = "String")]
    role: Role,
    all_brands: bool,
    brand_ids: Vec<Uuid>,
    branch_ids: Vec<Uuid>,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
    rotated_to: Option<Uuid>,
    brand_names: Vec<String>,
    branch_names: Vec<String>,
}

/// Whose keys a listing shows.
#[derive(Debug, Clone, Copy)]
pub enum KeysSeen<'a> {
    /// Every key (the admin command, service keys).
    All,
    /// Every key but service keys (operators and viewers of every brand).
    AllButService,
    /// Keys whose whole scope lies inside the caller's: its brands (those of the key
    /// `caller_key`) and its branches; never an all-brands or a service key.
    Within {
        caller_key: Uuid,
        branches: &'a [Uuid],
    },
}

/// Keys newest first; revoked ones only when asked. Never a secret or a hash.
pub async fn list(
    pool: &PgPool,
    seen: KeysSeen<'_>,
    include_revoked: bool,
) -> Result<Vec<KeySummary>, sqlx::Error> {
    keys(pool, seen, include_revoked, None).await
}

/// One key, revoked or not, if `seen` covers it.
pub(crate) async fn one(
    pool: &PgPool,
    seen: KeysSeen<'_>,
    id: Uuid,
) -> Result<Option<KeySummary>, sqlx::Error> {
    Ok(keys(pool, seen, true, Some(id)).await?.pop())
}

/// The brands a key names (a brand-scoped admin makes keys only for these).
pub(crate) async fn brands_of(pool: &PgPool, id: Uuid) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT brand_ids FROM api_keys WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .map(Option::unwrap_or_default)
}

async fn keys(
    pool: &PgPool,
    seen: KeysSeen<'_>,
    include_revoked: bool,
    only: Option<Uuid>,
) -> Result<Vec<KeySummary>, sqlx::Error> {
    let (all, service, caller_key, branches) = match seen {
        KeysSeen::All => (true, true, None, &[][..]),
        KeysSeen::AllButService => (true, false, None, &[][..]),
        KeysSeen::Within {
            caller_key,
            branches,
        } => (false, false, Some(caller_key), branches),
    };
    let rows: Vec<KeyRow> = sqlx::query_as(
        "SELECT k.id, k.name, k.role, k.all_brands, k.brand_ids, k.branch_ids, k.created_at, \
                k.last_used_at, k.revoked_at, k.rotated_to, \
                ARRAY(SELECT bd.name FROM brands bd WHERE bd.id = ANY(k.brand_ids) \
                      ORDER BY bd.name) AS brand_names, \
                ARRAY(SELECT b.name FROM branches b WHERE b.id = ANY(k.branch_ids) \
                      ORDER BY b.name) AS branch_names \
         FROM api_keys k \
         WHERE ($1 OR k.revoked_at IS NULL) \
           AND ($2 OR k.role <> 'service') \
           AND ($3 OR (NOT k.all_brands \
                       AND k.branch_ids <@ $5 \
                       AND k.brand_ids <@ (SELECT c.brand_ids FROM api_keys c WHERE c.id = $4))) \
           AND ($6::uuid IS NULL OR k.id = $6) \
         ORDER BY k.created_at DESC, k.id",
    )
    .bind(include_revoked)
    .bind(service)
    .bind(all)
    .bind(caller_key)
    .bind(branches)
    .bind(only)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|k| KeySummary {
            id: k.id,
            name: k.name,
            role: k.role,
            all_brands: k.all_brands,
            brand_ids: k.brand_ids,
            branch_ids: k.branch_ids,
            created_at: k.created_at,
            last_used_at: k.last_used_at,
            revoked_at: k.revoked_at,
            rotated_to: k.rotated_to,
            brand_names: k.brand_names,
            branch_names: k.branch_names,
        })
        .collect())
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

/// How long ago the oldest of `address`'s refused sign-ins within the last `window_seconds`
/// was, and how many there were.
pub(crate) async fn sign_in_failures(
    pool: &PgPool,
    address: &str,
    window_seconds: i64,
) -> Result<(i64, Option<f64>), sqlx::Error> {
    sqlx::query_as(
        "SELECT count(*), extract(epoch FROM now() - min(at))::float8 \
         FROM console_sign_in_failures \
         WHERE address = $1 AND at > now() - make_interval(secs => $2)",
    )
    .bind(address)
    .bind(window_seconds as f64)
    .fetch_one(pool)
    .await
}

/// Records a refused sign-in from `address`.
pub(crate) async fn record_sign_in_failure(
    pool: &PgPool,
    address: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO console_sign_in_failures (address) VALUES ($1)")
        .bind(address)
        .execute(pool)
        .await
        .map(drop)
}
