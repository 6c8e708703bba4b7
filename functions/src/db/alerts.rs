//! SQL for alerts: what needs someone now (for brands with a notification channel), the
//! items already announced, and the notification outbox (queue, claim, settle, prune).

use chrono::{DateTime, Utc};
use res_shared::wire::{ChannelKind, RunnerThresholds};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::types::Json;
use uuid::Uuid;

use super::Tx;
use crate::alerts::items::{AlertKind, CurrentItem, OpenItem, Subject};
use crate::db::branch_rules::{live_ack, overdue, runner_seen_sql};

#[derive(sqlx::FromRow)]
struct ItemRow {
    key: String,
    #[sqlx(try_from = "String")]
    kind: AlertKind,
    brand_id: Uuid,
    brand_name: String,
    branch_id: Option<Uuid>,
    branch_name: Option<String>,
    branch_rule_id: Option<Uuid>,
    rule_name: Option<String>,
    runner_id: Option<String>,
    reason: String,
    since: DateTime<Utc>,
    silenced: bool,
}

impl From<ItemRow> for CurrentItem {
    fn from(row: ItemRow) -> CurrentItem {
        CurrentItem {
            key: row.key,
            kind: row.kind,
            silenced: row.silenced,
            subject: Subject {
                brand_id: row.brand_id,
                brand_name: row.brand_name,
                branch_id: row.branch_id,
                branch_name: row.branch_name,
                branch_rule_id: row.branch_rule_id,
                rule_name: row.rule_name,
                runner_id: row.runner_id,
                reason: row.reason,
                since: row.since,
            },
        }
    }
}

/// A time in a reason: `2026-11-26 09:12 UTC`.
macro_rules! utc_minute {
    ($column:literal) => {
        concat!(
            "to_char(",
            $column,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI \"UTC\"')"
        )
    };
}

/// Every item that needs someone now, at brands with a channel: rules needing attention
/// (a new flag is a new item), rules overdue with their branch's runners silent past the
/// stale threshold, runners silent past the gone threshold, and branches whose offline
/// owner is silent past the stale threshold. Rule items an operator acknowledged are
/// `silenced`.
pub(crate) async fn current(
    pool: &PgPool,
    thresholds: RunnerThresholds,
) -> Result<Vec<CurrentItem>, sqlx::Error> {
    let rows: Vec<ItemRow> = sqlx::query_as(concat!(
        "WITH watched AS (SELECT DISTINCT brand_id FROM notification_channels), \
         overdue_rules AS MATERIALIZED ( \
             SELECT br.id, br.branch_id, br.next_run_time, br.needs_attention_at, \
                    bd.id AS brand_id, bd.name AS brand_name, b.name AS branch_name, \
                    r.name AS rule_name \
             FROM branch_rules br JOIN branches b ON b.id = br.branch_id \
             JOIN brands bd ON bd.id = b.brand_id JOIN rules r ON r.id = br.rule_id \
             LEFT JOIN executions latest ON latest.branch_rule_id = br.id \
                  AND latest.status IN ('scheduled', 'running', 'paused') \
             WHERE bd.id IN (SELECT brand_id FROM watched) AND ",
        overdue!(),
        ") \
         SELECT 'needs_attention:' || br.id || ':' \
                    || to_char(br.needs_attention_at, 'YYYYMMDDHH24MISSUS') AS key, \
                'needs_attention' AS kind, bd.id AS brand_id, bd.name AS brand_name, \
                b.id AS branch_id, b.name AS branch_name, br.id AS branch_rule_id, \
                r.name AS rule_name, NULL::text AS runner_id, \
                COALESCE(br.needs_attention_reason, 'needs attention') AS reason, \
                br.needs_attention_at AS since, EXISTS (",
        live_ack!("br"),
        ") AS silenced \
         FROM branch_rules br JOIN branches b ON b.id = br.branch_id \
         JOIN brands bd ON bd.id = b.brand_id JOIN rules r ON r.id = br.rule_id \
         WHERE br.needs_attention_at IS NOT NULL AND bd.id IN (SELECT brand_id FROM watched) \
         UNION ALL \
         SELECT 'overdue:' || o.id, 'overdue', o.brand_id, o.brand_name, o.branch_id, \
                o.branch_name, o.id, o.rule_name, NULL, \
                'due since ' || ",
        utc_minute!("o.next_run_time"),
        " || ', no runner of the branch seen ' \
                    || COALESCE('since ' || ",
        utc_minute!("s.seen"),
        ", 'ever'), \
                o.next_run_time, EXISTS (",
        live_ack!("o"),
        ") \
         FROM overdue_rules o CROSS JOIN LATERAL (SELECT ",
        runner_seen_sql!("o"),
        " AS seen) s \
         WHERE COALESCE(s.seen < now() - make_interval(secs => $1), true) \
         UNION ALL \
         SELECT 'runner_gone:' || bd.id || ':' || rn.key_id || ':' || rn.runner_id, \
                'runner_gone', bd.id, bd.name, NULL, NULL, NULL, NULL, rn.runner_id, \
                'silent since ' || ",
        utc_minute!("rn.last_seen_at"),
        ", rn.last_seen_at, false \
         FROM runners rn JOIN api_keys k ON k.id = rn.key_id AND k.revoked_at IS NULL \
         JOIN brands bd ON bd.id = ANY(k.brand_ids) \
              OR bd.id IN (SELECT brand_id FROM branches WHERE id = ANY(k.branch_ids)) \
         WHERE rn.last_seen_at < now() - make_interval(secs => $2) \
           AND bd.id IN (SELECT brand_id FROM watched) \
         UNION ALL \
         SELECT 'offline_owner_absent:' || o.branch_id || ':' || o.key_id || ':' || o.runner_id, \
                'offline_owner_absent', bd.id, bd.name, b.id, b.name, NULL, NULL, o.runner_id, \
                'its offline owner ' || o.runner_id || ' silent since ' || ",
        utc_minute!("rn.last_seen_at"),
        ", rn.last_seen_at, false \
         FROM branch_offline_owners o \
         JOIN runners rn ON rn.key_id = o.key_id AND rn.runner_id = o.runner_id \
         JOIN branches b ON b.id = o.branch_id JOIN brands bd ON bd.id = b.brand_id \
         WHERE rn.last_seen_at < now() - make_interval(secs => $1) \
           AND bd.id IN (SELECT brand_id FROM watched)"
    ))
    .bind(f64::from(thresholds.stale_after_seconds))
    .bind(f64::from(thresholds.gone_after_seconds))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(CurrentItem::from).collect())
}

#[derive(sqlx::FromRow)]
struct OpenRow {
    key: String,
    #[sqlx(try_from = "String")]
    kind: AlertKind,
    subject: Json<Subject>,
}

/// The items announced and not yet resolved.
pub(crate) async fn open_items(tx: &mut Tx) -> Result<Vec<OpenItem>, sqlx::Error> {
    let rows: Vec<OpenRow> = sqlx::query_as("SELECT key, kind, subject FROM alert_items")
        .fetch_all(&mut **tx)
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| OpenItem {
            key: row.key,
            kind: row.kind,
            subject: row.subject.0,
        })
        .collect())
}

/// Records items as announced.
pub(crate) async fn open(tx: &mut Tx, items: &[CurrentItem]) -> Result<(), sqlx::Error> {
    for item in items {
        sqlx::query(
            "INSERT INTO alert_items (key, brand_id, kind, subject) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(&item.key)
        .bind(item.subject.brand_id)
        .bind(item.kind.as_str())
        .bind(Json(&item.subject))
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Forgets resolved items.
pub(crate) async fn close(tx: &mut Tx, keys: &[&str]) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM alert_items WHERE key = ANY($1)")
        .bind(keys)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A channel as the evaluation addresses it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ChannelTarget {
    pub(crate) id: Uuid,
    pub(crate) brand_id: Uuid,
    #[sqlx(try_from = "String")]
    pub(crate) kind: ChannelKind,
}

/// The channels of these brands.
pub(crate) async fn channels_of(
    tx: &mut Tx,
    brands: &[Uuid],
) -> Result<Vec<ChannelTarget>, sqlx::Error> {
    sqlx::query_as("SELECT id, brand_id, kind FROM notification_channels WHERE brand_id = ANY($1)")
        .bind(brands)
        .fetch_all(&mut **tx)
        .await
}

/// A message waiting for delivery.
#[derive(Debug, Clone)]
pub(crate) struct Queued<'a> {
    pub(crate) channel_id: Uuid,
    pub(crate) event: &'a str,
    pub(crate) item_key: &'a str,
    pub(crate) payload: Value,
}

/// Queues messages, in order.
pub(crate) async fn queue(
    executor: impl sqlx::PgExecutor<'_>,
    messages: &[Queued<'_>],
) -> Result<(), sqlx::Error> {
    if messages.is_empty() {
        return Ok(());
    }
    let channels: Vec<Uuid> = messages.iter().map(|m| m.channel_id).collect();
    let events: Vec<&str> = messages.iter().map(|m| m.event).collect();
    let keys: Vec<&str> = messages.iter().map(|m| m.item_key).collect();
    let payloads: Vec<Json<&Value>> = messages.iter().map(|m| Json(&m.payload)).collect();
    sqlx::query(
        "INSERT INTO notification_outbox (channel_id, event, item_key, payload) \
         SELECT m.channel_id, m.event, m.item_key, m.payload \
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[]) \
              WITH ORDINALITY AS m(channel_id, event, item_key, payload, n) ORDER BY m.n",
    )
    .bind(&channels)
    .bind(&events)
    .bind(&keys)
    .bind(&payloads)
    .execute(executor)
    .await?;
    Ok(())
}

/// A claimed message with where it goes.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Claimed {
    pub(crate) id: i64,
    pub(crate) channel_id: Uuid,
    pub(crate) payload: Json<Value>,
    pub(crate) attempts: i32,
    pub(crate) url: String,
    pub(crate) secret: Option<String>,
}

/// Claims up to `limit` messages, each the oldest undelivered one of its channel (so a
/// channel's messages arrive in order) and due, for `lease_seconds`: another process
/// leaves them alone meanwhile, and one that died with them retries after it.
pub(crate) async fn claim(
    pool: &PgPool,
    limit: i64,
    lease_seconds: f64,
) -> Result<Vec<Claimed>, sqlx::Error> {
    sqlx::query_as(
        "WITH heads AS ( \
             SELECT p.id FROM notification_outbox p \
             WHERE p.delivered_at IS NULL AND p.next_attempt_at <= now() \
               AND NOT EXISTS (SELECT 1 FROM notification_outbox e \
                               WHERE e.channel_id = p.channel_id AND e.delivered_at IS NULL \
                                 AND e.id < p.id) \
             ORDER BY p.id LIMIT $1 FOR UPDATE SKIP LOCKED), \
         claimed AS ( \
             UPDATE notification_outbox o \
             SET next_attempt_at = now() + make_interval(secs => $2), attempts = o.attempts + 1 \
             FROM heads WHERE o.id = heads.id \
             RETURNING o.id, o.channel_id, o.payload, o.attempts) \
         SELECT claimed.*, c.url, c.secret FROM claimed \
         JOIN notification_channels c ON c.id = claimed.channel_id ORDER BY claimed.id",
    )
    .bind(limit)
    .bind(lease_seconds)
    .fetch_all(pool)
    .await
}

/// Hands claimed messages back unsent: due at once, the attempt not counted.
pub(crate) async fn release(pool: &PgPool, ids: &[i64]) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE notification_outbox SET next_attempt_at = now(), attempts = attempts - 1 \
         WHERE id = ANY($1) AND delivered_at IS NULL",
    )
    .bind(ids)
    .execute(pool)
    .await?;
    Ok(())
}

/// Marks a message delivered and its channel healthy.
pub(crate) async fn delivered(pool: &PgPool, id: i64, channel: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH done AS (UPDATE notification_outbox SET delivered_at = now(), last_error = NULL \
                       WHERE id = $1) \
         UPDATE notification_channels SET last_delivered_at = now(), failing_since = NULL, \
                last_error = NULL WHERE id = $2",
    )
    .bind(id)
    .bind(channel)
    .execute(pool)
    .await?;
    Ok(())
}

/// Schedules a message's next attempt in `retry_seconds` and marks its channel failing.
pub(crate) async fn failed(
    pool: &PgPool,
    (id, channel): (i64, Uuid),
    error: &str,
    retry_seconds: f64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH retry AS (UPDATE notification_outbox \
                        SET next_attempt_at = now() + make_interval(secs => $3), last_error = $4 \
                        WHERE id = $1) \
         UPDATE notification_channels SET failing_since = COALESCE(failing_since, now()), \
                last_error = $4 WHERE id = $2",
    )
    .bind(id)
    .bind(channel)
    .bind(retry_seconds)
    .bind(error)
    .execute(pool)
    .await?;
    Ok(())
}

/// Deletes messages delivered more than `days` ago.
pub(crate) async fn prune_delivered(pool: &PgPool, days: i32) -> Result<u64, sqlx::Error> {
    sqlx::query(
        "DELETE FROM notification_outbox WHERE delivered_at < now() - make_interval(days => $1)",
    )
    .bind(days)
    .execute(pool)
    .await
    .map(|r| r.rows_affected())
}
