//! SQL for claiming rules, one or many per transaction: each step is one statement for the
//! whole set, so a batch of a hundred claims costs the round trips of one.

use chrono::{DateTime, Utc};
use res_shared::wire::Trigger;
use uuid::Uuid;

use super::Tx;
use super::branch_rules::{LockedRule, counted, plan_changed, rule_from};
use super::executions::{ExecutionRow, execution_row_columns};

/// Locks the rules among `ids` (in id order, so two claimers never wait on each other in a
/// circle) and reads their settings. `skip_locked`: rules another transaction holds are
/// left out instead of waited for.
pub(crate) async fn lock_rules(
    tx: &mut Tx,
    ids: &[Uuid],
    skip_locked: bool,
) -> Result<Vec<LockedRule>, sqlx::Error> {
    let statement = if skip_locked {
        concat!(
            rule_from!("", ""),
            " WHERE br.id = ANY($1) ORDER BY br.id FOR NO KEY UPDATE OF br SKIP LOCKED"
        )
    } else {
        concat!(
            rule_from!("", ""),
            " WHERE br.id = ANY($1) ORDER BY br.id FOR NO KEY UPDATE OF br"
        )
    };
    sqlx::query_as(statement)
        .bind(ids)
        .fetch_all(&mut **tx)
        .await
}

/// The branch of each rule among `ids` that exists, without locking: tells a rule another
/// request holds from one that does not exist.
pub(crate) async fn branches_of(
    tx: &mut Tx,
    ids: &[Uuid],
) -> Result<Vec<(Uuid, Uuid)>, sqlx::Error> {
    sqlx::query_as("SELECT id, branch_id FROM branch_rules WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(&mut **tx)
        .await
}

/// The most recent execution of each rule among `ids`, locked (a live one is always the
/// most recent).
pub(crate) async fn latest_executions(
    tx: &mut Tx,
    ids: &[Uuid],
) -> Result<Vec<ExecutionRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT e.* FROM unnest($1::uuid[]) AS r(id) \
         CROSS JOIN LATERAL (SELECT ",
        execution_row_columns!(),
        " FROM executions x WHERE x.branch_rule_id = r.id \
           ORDER BY x.scheduled_at DESC LIMIT 1 FOR NO KEY UPDATE) e"
    ))
    .bind(ids)
    .fetch_all(&mut **tx)
    .await
}

/// Declares the live executions among `ids` whose leases have expired `crashed`.
pub(crate) async fn mark_crashed(tx: &mut Tx, ids: &[Uuid]) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE executions SET status = 'crashed', finished_at = now(), \
                error = COALESCE(error, 'lease expired at ' || lease_expires_at || ' without a report') \
         WHERE id = ANY($1) AND status IN ('scheduled', 'running') AND lease_expires_at <= now()",
    )
    .bind(ids)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected())
}

/// A new scheduled execution of one rule.
pub(crate) struct NewClaim<'a> {
    /// Chosen here, so the answer can be matched to the request without a lookup.
    pub(crate) id: Uuid,
    pub(crate) branch_rule_id: Uuid,
    pub(crate) attempt: i32,
    /// The crashed or failed attempt this retries.
    pub(crate) retry_of: Option<Uuid>,
    /// The retry chain's first attempt; `None` for a fresh run (it is its own root).
    pub(crate) root_id: Option<Uuid>,
    /// Ownership proof.
    pub(crate) claim_token: String,
    pub(crate) trigger: Trigger,
    /// For a manual run: the key name that asked, and why (the request is then cleared).
    pub(crate) triggered_by: Option<&'a str>,
    pub(crate) trigger_reason: Option<&'a str>,
    /// Who claims it: claims of several requests may be written together.
    pub(crate) claimant: &'a Claimant<'a>,
}

/// Who claims, for how long: the same for every claim of one request.
pub(crate) struct Claimant<'a> {
    pub(crate) runner_id: &'a str,
    pub(crate) lease_seconds: i32,
    pub(crate) boot_id: Option<&'a str>,
}

/// A claim written: the new execution and its rule's revision afterwards.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Inserted {
    pub(crate) id: Uuid,
    pub(crate) branch_rule_id: Uuid,
    pub(crate) lease_expires_at: DateTime<Utc>,
    pub(crate) root_id: Uuid,
    pub(crate) revision: Option<i64>,
}

/// Inserts the executions, running from now (with the configuration revisions in force),
/// marks their rules running and clears the manual runs' requests, in one round trip. A
/// runner claims a rule as it starts it, so the claim is the run's start: a run that ends
/// before its first heartbeat is due costs a claim and a report, and shows as running
/// from its claim (runners before 0.3.0 beat at once, which changes nothing more). A rule
/// that already has a live execution gets none (`executions_one_live_per_rule`, the last
/// line of defence) and is missing from the answer.
pub(crate) async fn insert(
    tx: &mut Tx,
    claims: &[NewClaim<'_>],
) -> Result<Vec<Inserted>, sqlx::Error> {
    let column = |f: &dyn Fn(&NewClaim<'_>) -> Option<String>| -> Vec<Option<String>> {
        claims.iter().map(f).collect()
    };
    sqlx::query_as(concat!(
        "WITH input AS ( \
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::uuid[], $5::uuid[], \
                                  $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
                                  $11::int[], $12::text[]) \
                 AS i(id, branch_rule_id, attempt, retry_of, root_id, claim_token, trigger, \
                      triggered_by, trigger_reason, runner_id, lease_seconds, boot_id)), \
         inserted AS ( \
             INSERT INTO executions (id, root_id, branch_rule_id, runner_id, status, started_at, \
                                     attempt, retry_of, claim_token, lease_seconds, \
                                     lease_expires_at, boot_id, trigger, triggered_by, \
                                     trigger_reason, config_revision, catalogue_revision) \
             SELECT i.id, COALESCE(i.root_id, i.id), i.branch_rule_id, i.runner_id, 'running', \
                    now(), i.attempt, i.retry_of, i.claim_token, i.lease_seconds, \
                    now() + make_interval(secs => i.lease_seconds), i.boot_id, i.trigger, \
                    i.triggered_by, \
                    i.trigger_reason, \
                    (SELECT max(c.id) FROM branch_rules x JOIN branches b ON b.id = x.branch_id \
                     JOIN config_revisions c ON c.brand_id = b.brand_id \
                     WHERE x.id = i.branch_rule_id), \
                    (SELECT max(id) FROM config_revisions WHERE brand_id IS NULL) \
             FROM input i \
             ON CONFLICT (branch_rule_id) WHERE status IN ('scheduled', 'running', 'paused') \
             DO NOTHING \
             RETURNING id, branch_rule_id, lease_expires_at, root_id, trigger), \
         running AS ( \
             UPDATE branch_rules br SET is_currently_running = true, \
                    run_requested_at = CASE WHEN n.trigger = 'manual' THEN NULL \
                                            ELSE br.run_requested_at END, \
                    run_requested_by = CASE WHEN n.trigger = 'manual' THEN NULL \
                                            ELSE br.run_requested_by END, \
                    run_request_reason = CASE WHEN n.trigger = 'manual' THEN NULL \
                                              ELSE br.run_request_reason END, ",
        counted!("br"),
        " FROM inserted n WHERE br.id = n.branch_rule_id \
             RETURNING br.id, br.branch_id, br.revision), \
         changed AS (",
        plan_changed!("running"),
        ") SELECT n.id, n.branch_rule_id, n.lease_expires_at, n.root_id, r.revision \
         FROM inserted n LEFT JOIN running r ON r.id = n.branch_rule_id"
    ))
    .bind(claims.iter().map(|c| c.id).collect::<Vec<_>>())
    .bind(claims.iter().map(|c| c.branch_rule_id).collect::<Vec<_>>())
    .bind(claims.iter().map(|c| c.attempt).collect::<Vec<_>>())
    .bind(claims.iter().map(|c| c.retry_of).collect::<Vec<_>>())
    .bind(claims.iter().map(|c| c.root_id).collect::<Vec<_>>())
    .bind(column(&|c| Some(c.claim_token.clone())))
    .bind(column(&|c| Some(c.trigger.as_str().to_owned())))
    .bind(column(&|c| c.triggered_by.map(str::to_owned)))
    .bind(column(&|c| c.trigger_reason.map(str::to_owned)))
    .bind(column(&|c| Some(c.claimant.runner_id.to_owned())))
    .bind(
        claims
            .iter()
            .map(|c| c.claimant.lease_seconds)
            .collect::<Vec<_>>(),
    )
    .bind(column(&|c| c.claimant.boot_id.map(str::to_owned)))
    .fetch_all(&mut **tx)
    .await
}

/// Moves rules to the times given, in one statement (missed runs `catch_up` does not make).
pub(crate) async fn move_next_runs(
    tx: &mut Tx,
    ids: &[Uuid],
    times: &[DateTime<Utc>],
) -> Result<(), sqlx::Error> {
    sqlx::query(concat!(
        "WITH moved AS ( \
             UPDATE branch_rules x SET next_run_time = u.next, ",
        counted!("x"),
        " FROM UNNEST($1::uuid[], $2::timestamptz[]) AS u(id, next) WHERE x.id = u.id \
             RETURNING x.id, x.branch_id) ",
        plan_changed!("moved")
    ))
    .bind(ids)
    .bind(times)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
