//! SQL for `api_keys`.

use sqlx::PgPool;
use uuid::Uuid;

use crate::access::{Caller, Role};

/// The live key with this hash, as a caller.
pub(crate) async fn find_live(
    pool: &PgPool,
    key_hash: &str,
) -> Result<Option<Caller>, sqlx::Error> {
    let row: Option<(Uuid, String, Vec<Uuid>)> = sqlx::query_as(
        "SELECT id, role, branch_ids FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
    )
    .bind(key_hash)
    .fetch_optional(pool)
    .await?;
    Ok(row.and_then(|(key_id, role, branch_ids)| {
        Role::parse(&role).map(|role| Caller {
            key_id,
            role,
            branch_ids,
        })
    }))
}

/// Stores a new key (only its hash) and returns its id.
pub async fn insert(
    pool: &PgPool,
    name: &str,
    key_hash: &str,
    role: Role,
    branch_ids: &[Uuid],
) -> Result<Uuid, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO api_keys (name, key_hash, role, branch_ids) VALUES ($1, $2, $3, $4) \
         RETURNING id",
    )
    .bind(name)
    .bind(key_hash)
    .bind(role.as_str())
    .bind(branch_ids)
    .fetch_one(pool)
    .await
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

/// Which of these branch ids exist (a runner key naming a missing branch is a typo).
pub async fn existing_branches(pool: &PgPool, ids: &[Uuid]) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM branches WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(pool)
        .await
}
