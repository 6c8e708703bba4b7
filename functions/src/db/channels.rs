//! SQL for a brand's notification channels.

use chrono::{DateTime, Utc};
use res_shared::wire::{ChannelKind, ChannelSummary};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
struct ChannelRow {
    id: Uuid,
    brand_id: Uuid,
    brand_name: String,
    name: String,
    #[sqlx(try_from = "String")]
    kind: ChannelKind,
    url: String,
    created_at: DateTime<Utc>,
    created_by: String,
    last_delivered_at: Option<DateTime<Utc>>,
    failing_since: Option<DateTime<Utc>>,
    last_error: Option<String>,
    pending: i64,
}

impl From<ChannelRow> for ChannelSummary {
    fn from(row: ChannelRow) -> ChannelSummary {
        ChannelSummary {
            channel_id: row.id,
            brand_id: row.brand_id,
            brand_name: row.brand_name,
            name: row.name,
            kind: row.kind,
            target: target(&row.url),
            created_at: row.created_at,
            created_by: row.created_by,
            last_delivered_at: row.last_delivered_at,
            failing_since: row.failing_since,
            last_error: row.last_error,
            pending: row.pending,
        }
    }
}

/// Where a URL points, without its path and query (a Slack URL's path is its secret):
/// `https://hooks.slack.com/…`.
fn target(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => format!(
            "{}://{}/…",
            parsed.scheme(),
            parsed.host_str().unwrap_or_default()
        ),
        Err(_) => "…".to_owned(),
    }
}

/// A [`ChannelRow`]'s query, without its WHERE clause.
macro_rules! channel_select {
    () => {
        "SELECT c.id, c.brand_id, bd.name AS brand_name, c.name, c.kind, c.url, \
            c.created_at, c.created_by, c.last_delivered_at, c.failing_since, c.last_error, \
            (SELECT count(*) FROM notification_outbox o \
              WHERE o.channel_id = c.id AND o.delivered_at IS NULL) AS pending \
         FROM notification_channels c JOIN brands bd ON bd.id = c.brand_id"
    };
}

/// A new channel.
pub(crate) struct NewChannel<'a> {
    pub(crate) brand_id: Uuid,
    pub(crate) name: &'a str,
    pub(crate) kind: ChannelKind,
    pub(crate) url: &'a str,
    pub(crate) secret: Option<&'a str>,
    pub(crate) created_by: &'a str,
}

/// Creates a channel; `None` when the brand already has one of that name.
pub(crate) async fn insert(
    pool: &PgPool,
    channel: &NewChannel<'_>,
) -> Result<Option<ChannelSummary>, sqlx::Error> {
    let id: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO notification_channels (brand_id, name, kind, url, secret, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (brand_id, name) DO NOTHING RETURNING id",
    )
    .bind(channel.brand_id)
    .bind(channel.name)
    .bind(channel.kind.as_str())
    .bind(channel.url)
    .bind(channel.secret)
    .bind(channel.created_by)
    .fetch_optional(pool)
    .await?;
    match id {
        Some(id) => find(pool, id).await,
        None => Ok(None),
    }
}

/// One channel.
pub(crate) async fn find(pool: &PgPool, id: Uuid) -> Result<Option<ChannelSummary>, sqlx::Error> {
    let row: Option<ChannelRow> = sqlx::query_as(concat!(channel_select!(), " WHERE c.id = $1"))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(ChannelSummary::from))
}

/// The channels of every brand (`None`) or of these brands, by brand and name.
pub(crate) async fn list(
    pool: &PgPool,
    brands: Option<&[Uuid]>,
) -> Result<Vec<ChannelSummary>, sqlx::Error> {
    let rows: Vec<ChannelRow> = sqlx::query_as(concat!(
        channel_select!(),
        " WHERE ($1 OR c.brand_id = ANY($2)) ORDER BY bd.name, c.brand_id, c.name"
    ))
    .bind(brands.is_none())
    .bind(brands.unwrap_or_default())
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(ChannelSummary::from).collect())
}

/// The brands of these branches.
pub(crate) async fn brands_of_branches(
    pool: &PgPool,
    branches: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT DISTINCT brand_id FROM branches WHERE id = ANY($1)")
        .bind(branches)
        .fetch_all(pool)
        .await
}

/// Deletes a channel and the messages waiting for it; whether it existed.
pub(crate) async fn delete(pool: &PgPool, id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query("DELETE FROM notification_channels WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await
        .map(|r| r.rows_affected() > 0)
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn a_target_keeps_scheme_and_host_only() {
        assert_eq!(
            target("https://hooks.slack.com/services/T000/B000/XXXX?x=1"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(target("http://127.0.0.1:9000/hook"), "http://127.0.0.1/…");
        assert_eq!(target("not a url"), "…");
    }
}
