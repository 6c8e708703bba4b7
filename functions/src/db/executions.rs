//! SQL for `executions`: one row per attempt, changed only by the holder of its claim
//! token, except that anyone may declare an expired lease `crashed`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::types::Json;
use uuid::Uuid;

use res_shared::wire::{ExecutionStatus, HeartbeatRequest};

use super::Tx;
use super::branch_rules::{counted, plan_changed};
use crate::access::{Caller, Scope};

/// An execution as the claim and finish logic needs it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ExecutionRow {
    pub(crate) id: Uuid,
    pub(crate) branch_rule_id: Uuid,
    /// Where it stands.
    #[sqlx(try_from = "String")]
    pub(crate) status: ExecutionStatus,
    /// 1 for a fresh run.
    pub(crate) attempt: i32,
    /// Ownership proof.
    pub(crate) claim_token: String,
    pub(crate) lease_expires_at: DateTime<Utc>,
    /// The answer given to its finishing report, if it was finished by one.
    pub(crate) report: Option<Value>,
    /// When a paused execution may resume.
    pub(crate) resume_at: Option<DateTime<Utc>>,
    /// The first attempt of its retry chain.
    pub(crate) root_id: Uuid,
    /// The runner holding (or last holding) it.
    pub(crate) runner_id: String,
    /// Recorded from an offline run's report.
    pub(crate) offline: bool,
    /// When it was claimed: the run is live from then.
    pub(crate) scheduled_at: DateTime<Utc>,
}

/// The columns an [`ExecutionRow`] is read from.
macro_rules! execution_row_columns {
    () => {
        "id, branch_rule_id, status, attempt, claim_token, lease_expires_at, report, resume_at, \
         root_id, runner_id, offline, scheduled_at"
    };
}
pub(crate) use execution_row_columns;

/// The most recent execution of a rule, locked (a live one is always the most recent:
/// a new attempt can only start once none is live).
pub(crate) async fn latest_for_rule(
    tx: &mut Tx,
    branch_rule_id: Uuid,
) -> Result<Option<ExecutionRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        execution_row_columns!(),
        " FROM executions WHERE branch_rule_id = $1 ORDER BY scheduled_at DESC LIMIT 1 \
         FOR NO KEY UPDATE"
    ))
    .bind(branch_rule_id)
    .fetch_optional(&mut **tx)
    .await
}

/// An execution by id, locked.
pub(crate) async fn lock(tx: &mut Tx, id: Uuid) -> Result<Option<ExecutionRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        execution_row_columns!(),
        " FROM executions WHERE id = $1 FOR NO KEY UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await
}

/// The executions among `ids` that exist, locked in id order, in one statement.
pub(crate) async fn lock_all(tx: &mut Tx, ids: &[Uuid]) -> Result<Vec<ExecutionRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        execution_row_columns!(),
        " FROM executions WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE"
    ))
    .bind(ids)
    .fetch_all(&mut **tx)
    .await
}

/// Declares a live execution whose lease has expired `crashed`.
pub(crate) async fn mark_crashed(
    executor: impl sqlx::PgExecutor<'_>,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let result = sqlx::query(
        "UPDATE executions SET status = 'crashed', finished_at = now(), \
                error = COALESCE(error, 'lease expired at ' || lease_expires_at || ' without a report') \
         WHERE id = $1 AND status IN ('scheduled', 'running') AND lease_expires_at <= now()",
    )
    .bind(id)
    .execute(executor)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// Parks a live execution until `delay_seconds` from now; returns when it may resume.
pub(crate) async fn pause(
    tx: &mut Tx,
    id: Uuid,
    context: &serde_json::value::RawValue,
    delay_seconds: i32,
) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE executions SET status = 'paused', context = $2::jsonb, \
                resume_at = now() + make_interval(secs => $3), \
                lease_expires_at = now() + make_interval(secs => $3) \
         WHERE id = $1 RETURNING resume_at",
    )
    .bind(id)
    .bind(context.get())
    .bind(delay_seconds)
    .fetch_one(&mut **tx)
    .await
}

/// Hands a paused execution to a new claimant (new token, new lease, same id) and marks
/// its rule running. Returns the lease end, the saved context and the rule's new revision.
pub(crate) async fn resume(
    tx: &mut Tx,
    id: Uuid,
    runner_id: &str,
    claim_token: &str,
    lease_seconds: i32,
    boot_id: Option<&str>,
) -> Result<
    (
        DateTime<Utc>,
        Option<Box<serde_json::value::RawValue>>,
        Option<i64>,
    ),
    sqlx::Error,
> {
    sqlx::query_as(concat!(
        "WITH resumed AS ( \
             UPDATE executions SET status = 'running', runner_id = $2, claim_token = $3, \
                    earlier_runner_ids = earlier_runner_ids || runner_id, \
                    lease_seconds = $4, lease_expires_at = now() + make_interval(secs => $4), \
                    boot_id = $5, \
                    resume_at = NULL, resumed_count = resumed_count + 1 \
             WHERE id = $1 AND status = 'paused' \
             RETURNING branch_rule_id, lease_expires_at, context), \
         running AS ( \
             UPDATE branch_rules br SET is_currently_running = true, ",
        counted!("br"),
        " WHERE id = (SELECT branch_rule_id FROM resumed) \
             RETURNING id, branch_id, revision), \
         changed AS (",
        plan_changed!("running"),
        ") SELECT lease_expires_at, context, (SELECT revision FROM running) FROM resumed"
    ))
    .bind(id)
    .bind(runner_id)
    .bind(claim_token)
    .bind(lease_seconds)
    .bind(boot_id)
    .fetch_one(&mut **tx)
    .await
}

/// Declares live executions that `runner_id` claimed in boots other than `boot_id`
/// crashed and frees their rules; returns their ids. Only rules in the caller's branches.
pub(crate) async fn crash_earlier_boots(
    tx: &mut Tx,
    runner_id: &str,
    boot_id: &str,
    scope: Scope<'_>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    let crashed: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "UPDATE executions e \
         SET status = 'crashed', finished_at = now(), \
             error = COALESCE(e.error, 'runner ' || e.runner_id || ' restarted (boot ' || \
                              COALESCE(e.boot_id, 'unknown') || ' ended without a report)') \
         FROM branch_rules br \
         WHERE e.runner_id = $1 AND e.status IN ('scheduled', 'running') \
           AND e.boot_id IS DISTINCT FROM $2 AND br.id = e.branch_rule_id \
           AND ($3 OR br.branch_id = ANY($4)) \
         RETURNING e.id, e.branch_rule_id",
    )
    .bind(runner_id)
    .bind(boot_id)
    .bind(all)
    .bind(branches)
    .fetch_all(&mut **tx)
    .await?;
    let rules: Vec<Uuid> = crashed.iter().map(|(_, rule)| *rule).collect();
    sqlx::query("UPDATE branch_rules SET is_currently_running = false WHERE id = ANY($1)")
        .bind(&rules)
        .execute(&mut **tx)
        .await?;
    Ok(crashed.into_iter().map(|(id, _)| id).collect())
}

/// Records a run made without a claim, already finished with `status`; `false` when an
/// execution with that id exists.
pub(crate) async fn insert_offline(
    tx: &mut Tx,
    run: &OfflineRecord<'_>,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query(
        "INSERT INTO executions (id, root_id, branch_rule_id, runner_id, status, attempt, \
                                 retry_of, claim_token, lease_seconds, lease_expires_at, \
                                 scheduled_at, started_at, finished_at, offline, trigger) \
         VALUES ($1, COALESCE($9, $1), $2, $3, $5, $8, $10, $4, 0, $7, $6, $6, $7, true, 'offline') \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(run.id)
    .bind(run.branch_rule_id)
    .bind(run.runner_id)
    .bind(run.claim_token)
    .bind(run.status)
    .bind(run.started_at)
    .bind(run.finished_at)
    .bind(run.retries.map_or(1, |e| e.attempt.saturating_add(1)))
    .bind(run.retries.map(|e| e.root_id))
    .bind(run.retries.map(|e| e.id))
    .execute(&mut **tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Takes the offline runs recorded as retries of `crashed` out of its chain, now that its
/// own report arrived (it did not crash): each becomes the first attempt of a chain of its
/// own, with the runs that retried it, and their violations are keyed by it again; what
/// either side found that the other had recorded first (withheld as a repeat) becomes its
/// own violation. Only offline runs: the functions took them for retries when they were
/// recorded, while a claimed retry was handed the crashed run's occurrence and stays its
/// retry.
pub(crate) async fn unlink_offline_retries(
    tx: &mut Tx,
    crashed: &ExecutionRow,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let heads: Vec<(Uuid, i32)> =
        sqlx::query_as("SELECT id, attempt FROM executions WHERE retry_of = $1 AND offline")
            .bind(crashed.id)
            .fetch_all(&mut **tx)
            .await?;
    for (head, attempt) in &heads {
        sqlx::query(
            "WITH RECURSIVE chain AS ( \
                 SELECT id FROM executions WHERE id = $1 \
                 UNION SELECT e.id FROM executions e JOIN chain c ON e.retry_of = c.id), \
             moved AS ( \
                 UPDATE executions e SET root_id = $1, attempt = e.attempt - $2 + 1, \
                     retry_of = CASE WHEN e.id = $1 THEN NULL ELSE e.retry_of END \
                 FROM chain c WHERE e.id = c.id RETURNING e.id) \
             UPDATE violations v \
             SET idempotency_key = $1::text || substr(v.idempotency_key, 37) \
             FROM moved m \
             WHERE v.execution_id = m.id AND starts_with(v.idempotency_key, $3::text || ':')",
        )
        .bind(head)
        .bind(attempt)
        .bind(crashed.root_id)
        .execute(&mut **tx)
        .await?;
        // Repeats withheld in either chain, keyed by their execution's chain now: a key
        // still taken is a repeat within one chain, and stays none.
        sqlx::query(
            "WITH promoted AS ( \
                 DELETE FROM violations_withheld w USING executions e \
                 WHERE e.id = w.execution_id AND e.root_id IN ($1, $2) \
                 RETURNING w.branch_rule_id, w.execution_id, w.kind, w.details, \
                           CASE WHEN w.idempotency_key ~ '^[0-9a-f-]{36}:' \
                                THEN e.root_id::text || substr(w.idempotency_key, 37) \
                                ELSE w.idempotency_key END AS idempotency_key) \
             INSERT INTO violations (branch_rule_id, execution_id, kind, details, idempotency_key) \
             SELECT branch_rule_id, execution_id, kind, details, idempotency_key FROM promoted \
             ON CONFLICT (branch_rule_id, idempotency_key) DO NOTHING",
        )
        .bind(head)
        .bind(crashed.root_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(heads.into_iter().map(|(id, _)| id).collect())
}

/// An offline run recorded from its report.
pub(crate) struct OfflineRecord<'a> {
    pub(crate) id: Uuid,
    pub(crate) branch_rule_id: Uuid,
    pub(crate) runner_id: &'a str,
    /// The runner-chosen token that identifies the report when it repeats.
    pub(crate) claim_token: &'a str,
    pub(crate) status: &'a str,
    pub(crate) started_at: DateTime<Utc>,
    pub(crate) finished_at: DateTime<Utc>,
    /// The crashed execution this run retries (its chain continues).
    pub(crate) retries: Option<&'a ExecutionRow>,
}

/// Extends the leases of the beats' executions (each only with its own claim token and in
/// the caller's scope), moves them to `running`, notes where each run stands and when its
/// runner was last seen, in one statement; returns each landed beat's execution, lease end
/// and whether to stop. A beat missing from the answer did not land.
pub(crate) async fn heartbeat(
    pool: &PgPool,
    beats: &[&HeartbeatRequest],
    caller: &Caller,
    stale_after_seconds: u32,
) -> Result<Vec<(Uuid, DateTime<Utc>, bool)>, sqlx::Error> {
    let (all, branches) = caller.scope().as_params();
    let text = |f: &dyn Fn(&HeartbeatRequest) -> Option<&str>| -> Vec<Option<String>> {
        beats.iter().map(|b| f(b).map(str::to_owned)).collect()
    };
    sqlx::query_as(
        "WITH input AS ( \
             SELECT * FROM unnest($1::uuid[], $2::text[], $7::text[], $8::timestamptz[], \
                                  $9::text[]) AS i(id, claim_token, waiting_node, waiting_until, node)), \
         beat AS ( \
             UPDATE executions e \
             SET lease_expires_at = now() + make_interval(secs => e.lease_seconds), \
                 status = 'running', started_at = COALESCE(e.started_at, now()), \
                 waiting_node = i.waiting_node, waiting_until = i.waiting_until, \
                 heartbeat_at = now(), current_node = i.node \
             FROM input i, branch_rules br \
             WHERE e.id = ANY($1) AND e.id = i.id AND e.claim_token = i.claim_token \
               AND e.status IN ('scheduled', 'running') \
               AND e.lease_expires_at > now() AND br.id = e.branch_rule_id \
               AND ($3 OR br.branch_id = ANY($4)) \
             RETURNING e.id, e.lease_expires_at, (e.cancel_requested OR br.is_force_stopped) AS stop, \
                       e.runner_id), \
         seen AS ( \
             UPDATE runners r SET last_seen_at = now(), \
                 online_since = CASE WHEN r.last_seen_at < now() - make_interval(secs => $6) \
                                     THEN now() ELSE r.online_since END \
             FROM (SELECT DISTINCT runner_id FROM beat) b \
             WHERE r.key_id = $5 AND r.runner_id = b.runner_id \
               AND r.last_seen_at < now() - interval '5 seconds') \
         SELECT id, lease_expires_at, stop FROM beat",
    )
    .bind(beats.iter().map(|b| b.execution_id).collect::<Vec<_>>())
    .bind(beats.iter().map(|b| b.claim_token.clone()).collect::<Vec<_>>())
    .bind(all)
    .bind(branches)
    .bind(caller.key_id)
    .bind(f64::from(stale_after_seconds))
    .bind(text(&|b| b.waiting.as_ref().map(|w| w.node_id.as_str())))
    .bind(beats.iter().map(|b| b.waiting.as_ref().map(|w| w.until)).collect::<Vec<_>>())
    .bind(text(&|b| b.node_id.as_deref()))
    .fetch_all(pool)
    .await
}

/// Why a heartbeat did not land: the execution, its branch, and whether its lease ran out.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct HeartbeatMiss {
    /// Where it stands.
    #[sqlx(try_from = "String")]
    pub(crate) status: ExecutionStatus,
    pub(crate) claim_token: String,
    pub(crate) lease_expires_at: DateTime<Utc>,
    /// The lease has run out.
    pub(crate) expired: bool,
    /// The rule's branch, for scoping.
    pub(crate) branch_id: Uuid,
}

/// Reads what a failed heartbeat needs to explain itself.
pub(crate) async fn heartbeat_miss(
    pool: &PgPool,
    id: Uuid,
) -> Result<Option<HeartbeatMiss>, sqlx::Error> {
    sqlx::query_as(
        "SELECT e.status, e.claim_token, e.lease_expires_at, e.lease_expires_at <= now() AS expired, \
                br.branch_id \
         FROM executions e JOIN branch_rules br ON br.id = e.branch_rule_id WHERE e.id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// What a finishing report writes.
pub(crate) struct Finish<'a> {
    pub(crate) id: Uuid,
    /// Final status name.
    pub(crate) status: &'a str,
    /// Execution report.
    pub(crate) result: Option<&'a Value>,
    /// Failure message.
    pub(crate) error: Option<&'a str>,
    pub(crate) metrics: Option<&'a Value>,
    /// The answer, replayed if the report repeats.
    pub(crate) report: &'a Value,
    /// When it started and ended, as its runner reported them (else: the first heartbeat,
    /// and now).
    pub(crate) times: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
}

/// Finishes executions in one statement, whatever their number.
pub(crate) async fn finish(tx: &mut Tx, finishes: &[Finish<'_>]) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE executions e SET status = i.status, finished_at = COALESCE(i.finished_at, now()), \
                started_at = COALESCE(i.started_at, e.started_at, now()), result = i.result, \
                error = i.error, metrics = i.metrics, report = i.report \
         FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::text[], $5::jsonb[], $6::jsonb[], \
                     $7::timestamptz[], $8::timestamptz[]) \
             AS i(id, status, result, error, metrics, report, finished_at, started_at) \
         WHERE e.id = i.id",
    )
    .bind(finishes.iter().map(|f| f.id).collect::<Vec<_>>())
    .bind(finishes.iter().map(|f| f.status).collect::<Vec<_>>())
    .bind(
        finishes
            .iter()
            .map(|f| f.result.map(Json))
            .collect::<Vec<_>>(),
    )
    .bind(finishes.iter().map(|f| f.error).collect::<Vec<_>>())
    .bind(
        finishes
            .iter()
            .map(|f| f.metrics.map(Json))
            .collect::<Vec<_>>(),
    )
    .bind(finishes.iter().map(|f| Json(f.report)).collect::<Vec<_>>())
    .bind(finishes.iter().map(|f| f.times.1).collect::<Vec<_>>())
    .bind(finishes.iter().map(|f| f.times.0).collect::<Vec<_>>())
    .execute(&mut **tx)
    .await
    .map(drop)
}

/// The execution's branch rule and branch, and its token, for violation records.
pub(crate) async fn owner(
    tx: &mut Tx,
    id: Uuid,
) -> Result<Option<(Uuid, Uuid, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT e.branch_rule_id, br.branch_id, e.claim_token \
         FROM executions e JOIN branch_rules br ON br.id = e.branch_rule_id WHERE e.id = $1",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await
}
