//! SQL for a brand's secrets. Values go in and out sealed; this layer never sees one in
//! clear. Every change is recorded in `secret_changes` and marks the plans of the brand's
//! branches in its old and new scope changed, so their sites get the new value (or lose
//! the old one) at their next plan answer.

use chrono::{DateTime, Utc};
use res_shared::wire::{ConfigSecretUse, SecretChange, SecretSummary};
use sqlx::PgPool;
use uuid::Uuid;

use crate::access::Caller;
use crate::secrets::Sealed;

#[derive(sqlx::FromRow)]
struct SummaryRow {
    brand_id: Uuid,
    brand_name: String,
    name: String,
    branch_ids: Option<Vec<Uuid>>,
    version: i32,
    created_at: DateTime<Utc>,
    created_by: String,
    updated_at: DateTime<Utc>,
    updated_by: String,
}

impl From<SummaryRow> for SecretSummary {
    fn from(row: SummaryRow) -> SecretSummary {
        SecretSummary {
            brand_id: row.brand_id,
            brand_name: row.brand_name,
            name: row.name,
            branch_ids: row.branch_ids,
            version: row.version,
            created_at: row.created_at,
            created_by: row.created_by,
            updated_at: row.updated_at,
            updated_by: row.updated_by,
        }
    }
}

/// A [`SummaryRow`]'s query, without its WHERE clause.
macro_rules! summary_select {
    () => {
        "SELECT s.brand_id, bd.name AS brand_name, s.name, s.branch_ids, s.version, \
         s.created_at, s.created_by, s.updated_at, s.updated_by \
         FROM secrets s JOIN brands bd ON bd.id = s.brand_id "
    };
}

/// A sealed secret as a plan or a rewrap reads it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct SealedRow {
    pub(crate) brand_id: Uuid,
    pub(crate) name: String,
    pub(crate) branch_ids: Option<Vec<Uuid>>,
    pub(crate) version: i32,
    pub(crate) key_id: String,
    pub(crate) wrapped_key: Vec<u8>,
    pub(crate) sealed_value: Vec<u8>,
}

impl SealedRow {
    pub(crate) fn sealed(&self) -> Sealed {
        Sealed {
            key_id: self.key_id.clone(),
            wrapped_key: self.wrapped_key.clone(),
            sealed_value: self.sealed_value.clone(),
        }
    }
}

/// What `secrets_set` writes.
pub(crate) struct NewValue<'a> {
    pub(crate) brand_id: Uuid,
    pub(crate) name: &'a str,
    pub(crate) branch_ids: Option<&'a [Uuid]>,
    pub(crate) sealed: &'a Sealed,
}

/// Creates the secret or gives it a new value (version + 1); whether it was created.
pub(crate) async fn set(
    pool: &PgPool,
    value: &NewValue<'_>,
    caller: &Caller,
) -> Result<(SecretSummary, bool), sqlx::Error> {
    let mut tx = pool.begin().await?;
    let before: Option<Option<Vec<Uuid>>> = sqlx::query_scalar(
        "SELECT branch_ids FROM secrets WHERE brand_id = $1 AND name = $2 FOR UPDATE",
    )
    .bind(value.brand_id)
    .bind(value.name)
    .fetch_optional(&mut *tx)
    .await?;
    let version: i32 = sqlx::query_scalar(
        "INSERT INTO secrets (brand_id, name, branch_ids, key_id, wrapped_key, sealed_value, \
                              created_by, updated_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
         ON CONFLICT (brand_id, name) DO UPDATE SET branch_ids = EXCLUDED.branch_ids, \
             version = secrets.version + 1, key_id = EXCLUDED.key_id, \
             wrapped_key = EXCLUDED.wrapped_key, sealed_value = EXCLUDED.sealed_value, \
             updated_at = now(), updated_by = EXCLUDED.updated_by \
         RETURNING version",
    )
    .bind(value.brand_id)
    .bind(value.name)
    .bind(value.branch_ids)
    .bind(&value.sealed.key_id)
    .bind(&value.sealed.wrapped_key)
    .bind(&value.sealed.sealed_value)
    .bind(&caller.key_name)
    .fetch_one(&mut *tx)
    .await?;
    let created = before.is_none();
    record(
        &mut tx,
        (value.brand_id, value.name, Some(version)),
        if created { "created" } else { "set" },
        caller,
    )
    .await?;
    let mut scope = before.unwrap_or(Some(Vec::new()));
    widen(&mut scope, value.branch_ids.map(<[Uuid]>::to_vec));
    mark_plans_changed(&mut tx, value.brand_id, scope.as_deref()).await?;
    let summary = sqlx::query_as::<_, SummaryRow>(concat!(
        summary_select!(),
        "WHERE s.brand_id = $1 AND s.name = $2"
    ))
    .bind(value.brand_id)
    .bind(value.name)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok((summary.into(), created))
}

/// The union of two scopes (`None`: the whole brand).
fn widen(scope: &mut Option<Vec<Uuid>>, other: Option<Vec<Uuid>>) {
    match (scope.as_mut(), other) {
        (Some(branches), Some(more)) => branches.extend(more),
        _ => *scope = None,
    }
}

/// Deletes a secret; false when the brand has none of that name.
pub(crate) async fn delete(
    pool: &PgPool,
    brand: Uuid,
    name: &str,
    caller: &Caller,
) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let scope: Option<Option<Vec<Uuid>>> = sqlx::query_scalar(
        "DELETE FROM secrets WHERE brand_id = $1 AND name = $2 RETURNING branch_ids",
    )
    .bind(brand)
    .bind(name)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(scope) = scope else {
        return Ok(false);
    };
    record(&mut tx, (brand, name, None), "deleted", caller).await?;
    mark_plans_changed(&mut tx, brand, scope.as_deref()).await?;
    tx.commit().await?;
    Ok(true)
}

async fn record(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    (brand, name, version): (Uuid, &str, Option<i32>),
    action: &str,
    caller: &Caller,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO secret_changes (brand_id, name, version, action, key_id, key_name) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(brand)
    .bind(name)
    .bind(version)
    .bind(action)
    .bind(caller.key_id)
    .bind(&caller.key_name)
    .execute(&mut **tx)
    .await
    .map(drop)
}

/// Marks the plans of the brand's branches in `scope` (`None`: all of them) changed.
async fn mark_plans_changed(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    brand: Uuid,
    scope: Option<&[Uuid]>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO plan_changes (branch_id) \
         SELECT id FROM branches WHERE brand_id = $1 AND ($2::uuid[] IS NULL OR id = ANY($2))",
    )
    .bind(brand)
    .bind(scope)
    .execute(&mut **tx)
    .await
    .map(drop)
}

/// The secrets of `brands` (`None`: every brand), by brand and name; only `name` if given.
pub(crate) async fn list(
    pool: &PgPool,
    brands: Option<&[Uuid]>,
    name: Option<&str>,
) -> Result<Vec<SecretSummary>, sqlx::Error> {
    let rows: Vec<SummaryRow> = sqlx::query_as(concat!(
        summary_select!(),
        "WHERE ($1::uuid[] IS NULL OR s.brand_id = ANY($1)) AND ($2::text IS NULL OR s.name = $2) \
         ORDER BY bd.name, s.brand_id, s.name"
    ))
    .bind(brands)
    .bind(name)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(SecretSummary::from).collect())
}

#[derive(sqlx::FromRow)]
struct ChangeRow {
    at: DateTime<Utc>,
    action: String,
    version: Option<i32>,
    key_name: String,
}

/// Every change to `name` of `brand`, newest first.
pub(crate) async fn changes(
    pool: &PgPool,
    brand: Uuid,
    name: &str,
) -> Result<Vec<SecretChange>, sqlx::Error> {
    let rows: Vec<ChangeRow> = sqlx::query_as(
        "SELECT at, action, version, key_name FROM secret_changes \
         WHERE brand_id = $1 AND name = $2 ORDER BY at DESC, id DESC",
    )
    .bind(brand)
    .bind(name)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| SecretChange {
            at: row.at,
            action: row.action,
            version: row.version,
            by: row.key_name,
        })
        .collect())
}

/// Each named secret's scope (`None`: the whole brand), for checking references.
pub(crate) async fn scopes(
    conn: &mut sqlx::PgConnection,
    brand: Uuid,
) -> Result<Vec<(String, Option<Vec<Uuid>>)>, sqlx::Error> {
    sqlx::query_as("SELECT name, branch_ids FROM secrets WHERE brand_id = $1 ORDER BY name")
        .bind(brand)
        .fetch_all(conn)
        .await
}

/// The sealed secrets named by `(brand, name)` pairs.
pub(crate) async fn sealed(
    pool: &PgPool,
    wanted: &[(Uuid, String)],
) -> Result<Vec<SealedRow>, sqlx::Error> {
    let (brands, names): (Vec<Uuid>, Vec<String>) = wanted.iter().cloned().unzip();
    sqlx::query_as(
        "SELECT s.brand_id, s.name, s.branch_ids, s.version, s.key_id, s.wrapped_key, \
                s.sealed_value \
         FROM secrets s JOIN unnest($1::uuid[], $2::text[]) AS w(brand_id, name) \
           ON s.brand_id = w.brand_id AND s.name = w.name",
    )
    .bind(brands)
    .bind(names)
    .fetch_all(pool)
    .await
}

/// Every secret not sealed under `active`, for a rewrap.
pub(crate) async fn not_under(pool: &PgPool, active: &str) -> Result<Vec<SealedRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT brand_id, name, branch_ids, version, key_id, wrapped_key, sealed_value \
         FROM secrets WHERE key_id <> $1 ORDER BY brand_id, name",
    )
    .bind(active)
    .fetch_all(pool)
    .await
}

/// Stores a rewrapped data key, unless the value changed meanwhile, and records it; whether
/// it was stored.
pub(crate) async fn rewrapped(
    pool: &PgPool,
    row: &SealedRow,
    sealed: &Sealed,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "WITH stored AS ( \
             UPDATE secrets SET key_id = $4, wrapped_key = $5 \
             WHERE brand_id = $1 AND name = $2 AND version = $3 AND key_id = $6 \
             RETURNING brand_id, name, version), \
         noted AS ( \
             INSERT INTO secret_changes (brand_id, name, version, action, key_name) \
             SELECT brand_id, name, version, 'rewrapped', \
                    'res-functions secrets rewrap (key ' || $4 || ')' FROM stored) \
         SELECT count(*) = 1 FROM stored",
    )
    .bind(row.brand_id)
    .bind(&row.name)
    .bind(row.version)
    .bind(&sealed.key_id)
    .bind(&sealed.wrapped_key)
    .bind(&row.key_id)
    .fetch_one(pool)
    .await
}

#[derive(sqlx::FromRow)]
struct UseRow {
    name: String,
    version: i32,
    updated_at: DateTime<Utc>,
    updated_by: String,
    changed_since_base: bool,
}

/// The brand's secrets of `names`, each with whether it was set after revision `base`.
pub(crate) async fn uses(
    conn: &mut sqlx::PgConnection,
    brand: Uuid,
    names: &[String],
    base: Option<i64>,
) -> Result<Vec<ConfigSecretUse>, sqlx::Error> {
    let rows: Vec<UseRow> = sqlx::query_as(
        "SELECT s.name, s.version, s.updated_at, s.updated_by, \
                COALESCE(s.updated_at > (SELECT created_at FROM config_revisions \
                                         WHERE id = $3 AND brand_id = $1), false) \
                    AS changed_since_base \
         FROM secrets s WHERE s.brand_id = $1 AND s.name = ANY($2) ORDER BY s.name",
    )
    .bind(brand)
    .bind(names)
    .bind(base)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| ConfigSecretUse {
            name: row.name,
            version: row.version,
            updated_at: row.updated_at,
            updated_by: row.updated_by,
            changed_since_base: row.changed_since_base,
        })
        .collect())
}

/// Which of `branches` are branches of `brand`, in id order.
pub(crate) async fn branches_of_brand(
    pool: &PgPool,
    brand: Uuid,
    branches: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM branches WHERE brand_id = $1 AND id = ANY($2) ORDER BY id")
        .bind(brand)
        .bind(branches)
        .fetch_all(pool)
        .await
}
