//! Reading configuration revisions back: a scope's history, and one revision in full.

use chrono::{DateTime, Utc};
use res_shared::wire::ConfigRevision;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// A revision's summary columns (its counts are made with it).
macro_rules! revision_columns {
    () => {
        "r.id, r.created_at, r.key_name, r.message, r.created, r.changed, r.removed"
    };
}

#[derive(sqlx::FromRow)]
struct RevisionRow {
    id: i64,
    created_at: DateTime<Utc>,
    key_name: String,
    message: String,
    created: i64,
    changed: i64,
    removed: i64,
}

impl From<RevisionRow> for ConfigRevision {
    fn from(row: RevisionRow) -> ConfigRevision {
        ConfigRevision {
            revision: row.id,
            applied_at: row.created_at,
            key_name: row.key_name,
            message: row.message,
            created: row.created,
            changed: row.changed,
            removed: row.removed,
        }
    }
}

/// A brand's (or, for `None`, the catalogue's) revisions before `before`, newest first.
pub(crate) async fn history(
    pool: &PgPool,
    brand_id: Option<Uuid>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<ConfigRevision>, sqlx::Error> {
    let rows: Vec<RevisionRow> = sqlx::query_as(concat!(
        "SELECT ",
        revision_columns!(),
        " FROM config_revisions r \
          WHERE r.brand_id IS NOT DISTINCT FROM $1 AND ($2::bigint IS NULL OR r.id < $2) \
          ORDER BY r.id DESC LIMIT $3"
    ))
    .bind(brand_id)
    .bind(before)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(ConfigRevision::from).collect())
}

/// One revision in full: its summary, the brand it configured, the document as applied
/// and its diff.
pub(crate) struct RevisionDetail {
    pub(crate) revision: ConfigRevision,
    pub(crate) brand_id: Option<Uuid>,
    pub(crate) document: Value,
    pub(crate) diff: Value,
}

#[derive(sqlx::FromRow)]
struct DetailRow {
    #[sqlx(flatten)]
    summary: RevisionRow,
    brand_id: Option<Uuid>,
    document: Value,
    diff: Value,
}

pub(crate) async fn show(
    pool: &PgPool,
    revision: i64,
) -> Result<Option<RevisionDetail>, sqlx::Error> {
    let row: Option<DetailRow> = sqlx::query_as(concat!(
        "SELECT ",
        revision_columns!(),
        ", r.brand_id, r.document, r.diff FROM config_revisions r WHERE r.id = $1"
    ))
    .bind(revision)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| RevisionDetail {
        revision: row.summary.into(),
        brand_id: row.brand_id,
        document: row.document,
        diff: row.diff,
    }))
}
