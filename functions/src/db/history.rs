//! SQL for the execution history: newest first, keyset-paginated on
//! `(scheduled_at, id)` so a page costs the same however deep it is.

use chrono::{DateTime, Utc};
use res_shared::wire::{
    ExecutionStatus, ExecutionSummary, StopAction, StopMark, Trigger, ViolationSummary,
};
use sqlx::PgPool;
use uuid::Uuid;

use crate::access::Scope;

/// The filters of one page, already checked.
#[derive(Debug, Clone, Default)]
pub(crate) struct HistoryFilter {
    pub(crate) brand_id: Option<Uuid>,
    pub(crate) branch_id: Option<Uuid>,
    pub(crate) branch_rule_id: Option<Uuid>,
    pub(crate) status: Option<ExecutionStatus>,
    pub(crate) trigger: Option<Trigger>,
    pub(crate) since: Option<DateTime<Utc>>,
    pub(crate) until: Option<DateTime<Utc>>,
    /// The last row of the previous page: only older rows.
    pub(crate) after: Option<(DateTime<Utc>, Uuid)>,
    /// The first row of a later page: only newer rows, the oldest of them first.
    pub(crate) before: Option<(DateTime<Utc>, Uuid)>,
    /// Only these executions (one execution's retry chain).
    pub(crate) execution_ids: Option<Vec<Uuid>>,
}

#[derive(sqlx::FromRow)]
struct SummaryRow {
    execution_id: Uuid,
    branch_rule_id: Uuid,
    rule_name: String,
    branch_id: Uuid,
    branch_name: String,
    timezone: String,
    #[sqlx(try_from = "String")]
    status: ExecutionStatus,
    #[sqlx(try_from = "String")]
    trigger: Trigger,
    triggered_by: Option<String>,
    trigger_reason: Option<String>,
    runner_id: String,
    boot_id: Option<String>,
    attempt: i32,
    retry_of: Option<Uuid>,
    scheduled_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    duration_ms: Option<i64>,
    error: Option<String>,
    cancel_requested: bool,
    waiting_node: Option<String>,
    waiting_until: Option<DateTime<Utc>>,
}

impl From<SummaryRow> for ExecutionSummary {
    fn from(row: SummaryRow) -> ExecutionSummary {
        ExecutionSummary {
            execution_id: row.execution_id,
            branch_rule_id: row.branch_rule_id,
            rule_name: row.rule_name,
            branch_id: row.branch_id,
            branch_name: row.branch_name,
            timezone: row.timezone,
            status: row.status,
            trigger: row.trigger,
            triggered_by: row.triggered_by,
            trigger_reason: row.trigger_reason,
            runner_id: row.runner_id,
            boot_id: row.boot_id,
            attempt: row.attempt,
            retry_of: row.retry_of,
            scheduled_at: row.scheduled_at,
            started_at: row.started_at,
            finished_at: row.finished_at,
            duration_ms: row.duration_ms,
            error: row.error,
            cancel_requested: row.cancel_requested,
            waiting_until: row.waiting_until,
            waiting_node: row.waiting_node,
        }
    }
}

/// The history's query up to its order: `$1`–`$11` and `$13`–`$15` filter, `$12` limits.
macro_rules! history_select {
    () => {
        "SELECT e.id AS execution_id, e.branch_rule_id, r.name AS rule_name, b.id AS branch_id, \
                b.name AS branch_name, COALESCE(b.timezone, bd.timezone) AS timezone, \
                e.status, e.trigger, e.triggered_by, e.trigger_reason, \
                e.runner_id, e.boot_id, e.attempt, e.retry_of, e.scheduled_at, e.started_at, \
                e.finished_at, \
                (extract(epoch FROM e.finished_at - COALESCE(e.started_at, e.scheduled_at)) \
                    * 1000)::bigint AS duration_ms, \
                left(split_part(e.error, E'\\n', 1), 200) AS error, e.cancel_requested, \
                CASE WHEN e.status = 'running' AND e.waiting_until > now() \
                     THEN e.waiting_node END AS waiting_node, \
                CASE WHEN e.status = 'running' AND e.waiting_until > now() THEN e.waiting_until \
                     WHEN e.status = 'paused' THEN e.resume_at END AS waiting_until \
         FROM executions e \
         JOIN branch_rules br ON br.id = e.branch_rule_id \
         JOIN branches b ON b.id = br.branch_id \
         JOIN brands bd ON bd.id = b.brand_id \
         JOIN rules r ON r.id = br.rule_id \
         WHERE ($1 OR br.branch_id = ANY($2)) \
           AND ($3::uuid IS NULL OR b.brand_id = $3) \
           AND ($4::uuid IS NULL OR br.branch_id = $4) \
           AND ($5::uuid IS NULL OR e.branch_rule_id = $5) \
           AND ($6::text IS NULL OR e.status = $6) \
           AND ($7::text IS NULL OR e.trigger = $7) \
           AND ($8::timestamptz IS NULL OR e.scheduled_at >= $8) \
           AND ($9::timestamptz IS NULL OR e.scheduled_at < $9) \
           AND ($10::timestamptz IS NULL OR (e.scheduled_at, e.id) < ($10, $11)) \
           AND ($13::uuid[] IS NULL OR e.id = ANY($13)) \
           AND ($14::timestamptz IS NULL OR (e.scheduled_at, e.id) > ($14, $15)) "
    };
}

/// `history_select!`'s parameters: the scope, `filter` and the row limit.
fn with_filter<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    (all, branches): &'q (bool, Vec<Uuid>),
    filter: &'q HistoryFilter,
    limit: i64,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    query
        .bind(*all)
        .bind(branches)
        .bind(filter.brand_id)
        .bind(filter.branch_id)
        .bind(filter.branch_rule_id)
        .bind(filter.status.map(ExecutionStatus::as_str))
        .bind(filter.trigger.map(Trigger::as_str))
        .bind(filter.since)
        .bind(filter.until)
        .bind(filter.after.map(|(at, _)| at))
        .bind(filter.after.map(|(_, id)| id))
        .bind(limit)
        .bind(filter.execution_ids.as_deref())
        .bind(filter.before.map(|(at, _)| at))
        .bind(filter.before.map(|(_, id)| id))
}

/// The matching executions by status, over at most `cap` of them (`filter`'s status and
/// page position are the caller's to clear).
pub(crate) async fn counts(
    pool: &PgPool,
    scope: Scope<'_>,
    filter: &HistoryFilter,
    cap: i64,
) -> Result<Vec<(ExecutionStatus, i64)>, sqlx::Error> {
    #[derive(sqlx::FromRow)]
    struct CountRow {
        #[sqlx(try_from = "String")]
        status: ExecutionStatus,
        count: i64,
    }
    let params = scope.as_params();
    let statement = concat!(
        "SELECT h.status, count(*) AS count FROM (",
        history_select!(),
        "LIMIT $12) h GROUP BY h.status"
    );
    let rows: Vec<CountRow> = with_filter(sqlx::query_as(statement), &params, filter, cap)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|r| (r.status, r.count)).collect())
}

/// Up to `limit` executions in scope matching `filter`: newest first, or with `before`
/// the oldest of the newer rows first (the caller turns that page around).
pub(crate) async fn page(
    pool: &PgPool,
    scope: Scope<'_>,
    filter: &HistoryFilter,
    limit: i64,
) -> Result<Vec<ExecutionSummary>, sqlx::Error> {
    let params = scope.as_params();
    let statement = if filter.before.is_some() {
        concat!(history_select!(), "ORDER BY e.scheduled_at, e.id LIMIT $12")
    } else {
        concat!(
            history_select!(),
            "ORDER BY e.scheduled_at DESC, e.id DESC LIMIT $12"
        )
    };
    let rows: Vec<SummaryRow> = with_filter(sqlx::query_as(statement), &params, filter, limit)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(ExecutionSummary::from).collect())
}

/// What `executions_show` adds to an execution's summary.
#[derive(sqlx::FromRow)]
pub(crate) struct ExecutionExtras {
    pub(crate) error: Option<String>,
    pub(crate) result: Option<serde_json::Value>,
    pub(crate) metrics: Option<serde_json::Value>,
    pub(crate) earlier_runner_ids: Vec<String>,
    pub(crate) resumed_count: i32,
    pub(crate) config_revision: Option<i64>,
    pub(crate) catalogue_revision: Option<i64>,
    pub(crate) heartbeat_at: Option<DateTime<Utc>>,
    pub(crate) current_node: Option<String>,
    /// While it holds its rule: since it started, or was claimed.
    pub(crate) elapsed_ms: Option<i64>,
    /// While it runs.
    pub(crate) lease_expires_at: Option<DateTime<Utc>>,
    #[sqlx(flatten)]
    pub(crate) stop: StopRow,
}

/// The operator's latest stop of an execution, if any.
#[derive(sqlx::FromRow)]
pub(crate) struct StopRow {
    #[sqlx(rename = "stop_action")]
    pub(crate) action: Option<String>,
    #[sqlx(rename = "stop_at")]
    pub(crate) at: Option<DateTime<Utc>>,
    #[sqlx(rename = "stop_by")]
    pub(crate) by: Option<String>,
    #[sqlx(rename = "stop_reason")]
    pub(crate) reason: Option<String>,
}

impl StopRow {
    /// The stop, if there was one and its action is one this build knows.
    pub(crate) fn mark(self) -> Option<StopMark> {
        Some(StopMark {
            action: StopAction::try_from(self.action?).ok()?,
            at: self.at?,
            by: self.by?,
            reason: self.reason?,
        })
    }
}

/// The full error, result and metrics of an execution, where a live one stands, and
/// who stopped it.
pub(crate) async fn extras(
    pool: &PgPool,
    id: Uuid,
) -> Result<Option<ExecutionExtras>, sqlx::Error> {
    sqlx::query_as(
        "SELECT e.error, e.result, e.metrics, e.earlier_runner_ids, e.resumed_count, \
                e.config_revision, e.catalogue_revision, e.heartbeat_at, e.current_node, \
                CASE WHEN e.status IN ('scheduled', 'running', 'paused') \
                     THEN (extract(epoch FROM now() - COALESCE(e.started_at, e.scheduled_at)) \
                           * 1000)::bigint END AS elapsed_ms, \
                CASE WHEN e.status = 'running' THEN e.lease_expires_at END AS lease_expires_at, \
                s.action AS stop_action, s.at AS stop_at, s.key_name AS stop_by, \
                s.reason AS stop_reason \
         FROM executions e \
         LEFT JOIN LATERAL ( \
             SELECT action, at, key_name, reason FROM operator_actions \
             WHERE execution_id = e.id AND action IN ('cancel', 'force_stop') \
             ORDER BY at DESC LIMIT 1) s ON true \
         WHERE e.id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// Every execution linked to this one by `retry_of`, both ways, itself included.
pub(crate) async fn chain(pool: &PgPool, id: Uuid) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "WITH RECURSIVE up AS ( \
             SELECT id, retry_of FROM executions WHERE id = $1 \
             UNION SELECT e.id, e.retry_of FROM executions e JOIN up ON e.id = up.retry_of), \
         down AS ( \
             SELECT id FROM executions WHERE id = $1 \
             UNION SELECT e.id FROM executions e JOIN down ON e.retry_of = down.id) \
         SELECT id FROM up UNION SELECT id FROM down",
    )
    .bind(id)
    .fetch_all(pool)
    .await
}

#[derive(sqlx::FromRow)]
struct ViolationRow {
    violation_id: Uuid,
    branch_rule_id: Uuid,
    rule_name: String,
    branch_id: Uuid,
    branch_name: String,
    timezone: String,
    kind: String,
    details: serde_json::Value,
    execution_id: Option<Uuid>,
    created_at: DateTime<Utc>,
}

/// Which violations one page holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct ViolationFilter {
    pub(crate) brand_id: Option<Uuid>,
    pub(crate) branch_id: Option<Uuid>,
    pub(crate) branch_rule_id: Option<Uuid>,
    pub(crate) kind: Option<String>,
    pub(crate) since: Option<DateTime<Utc>>,
    pub(crate) until: Option<DateTime<Utc>>,
    pub(crate) execution_id: Option<Uuid>,
    /// The last row of the previous page.
    pub(crate) after: Option<(DateTime<Utc>, Uuid)>,
}

/// Up to `limit` violations in scope matching `filter`, newest first, each with the
/// execution that recorded it.
pub(crate) async fn violations(
    pool: &PgPool,
    scope: Scope<'_>,
    filter: &ViolationFilter,
    limit: i64,
) -> Result<Vec<ViolationSummary>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    let rows: Vec<ViolationRow> = sqlx::query_as(
        "SELECT v.id AS violation_id, v.branch_rule_id, r.name AS rule_name, b.id AS branch_id, \
                b.name AS branch_name, COALESCE(b.timezone, bd.timezone) AS timezone, v.kind, \
                v.details, v.execution_id, v.created_at \
         FROM violations v \
         JOIN branch_rules br ON br.id = v.branch_rule_id \
         JOIN branches b ON b.id = br.branch_id \
         JOIN brands bd ON bd.id = b.brand_id \
         JOIN rules r ON r.id = br.rule_id \
         WHERE ($1 OR br.branch_id = ANY($2)) \
           AND ($3::uuid IS NULL OR b.brand_id = $3) \
           AND ($4::uuid IS NULL OR br.branch_id = $4) \
           AND ($5::uuid IS NULL OR v.branch_rule_id = $5) \
           AND ($6::text IS NULL OR v.kind = $6) \
           AND ($7::timestamptz IS NULL OR v.created_at >= $7) \
           AND ($8::timestamptz IS NULL OR v.created_at < $8) \
           AND ($9::uuid IS NULL OR v.execution_id = $9) \
           AND ($10::timestamptz IS NULL OR (v.created_at, v.id) < ($10, $11)) \
         ORDER BY v.created_at DESC, v.id DESC \
         LIMIT $12",
    )
    .bind(all)
    .bind(branches)
    .bind(filter.brand_id)
    .bind(filter.branch_id)
    .bind(filter.branch_rule_id)
    .bind(filter.kind.as_deref())
    .bind(filter.since)
    .bind(filter.until)
    .bind(filter.execution_id)
    .bind(filter.after.map(|(at, _)| at))
    .bind(filter.after.map(|(_, id)| id))
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| ViolationSummary {
            violation_id: row.violation_id,
            branch_rule_id: row.branch_rule_id,
            rule_name: row.rule_name,
            branch_id: row.branch_id,
            branch_name: row.branch_name,
            timezone: row.timezone,
            kind: row.kind,
            details: row.details,
            execution_id: row.execution_id,
            created_at: row.created_at,
        })
        .collect())
}
