//! SQL for `branch_rules`, read with the settings that decide its schedule.

use std::collections::HashMap;

use chrono::{DateTime, NaiveTime, Utc};
use res_shared::schedule::{
    DEFAULT_FAILURE_THRESHOLD, HoursSpec, OpeningHours, OperationWindow, OverlapPolicy,
    RuleSchedule, RuleState, RuleStatus, RuleTiming, Timetable, TimingSpec, Zone, rule_timetable,
};
use res_shared::wire::{Acknowledgement, ExecutionStatus, RuleCondition};
use sqlx::types::Json;
use uuid::Uuid;

use super::Tx;
use super::nullable_word::NullableWord;
use crate::access::Scope;

/// A branch rule locked for a state change, with its effective schedule settings and
/// the database time of the transaction.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct LockedRule {
    pub(crate) id: Uuid,
    pub(crate) branch_id: Uuid,
    pub(crate) is_active: bool,
    pub(crate) is_archived: bool,
    pub(crate) is_force_stopped: bool,
    pub(crate) paused_at: Option<DateTime<Utc>>,
    pub(crate) run_requested_at: Option<DateTime<Utc>>,
    /// The key name that asked for the run now, and why.
    pub(crate) run_requested_by: Option<String>,
    pub(crate) run_request_reason: Option<String>,
    pub(crate) next_run_time: Option<DateTime<Utc>>,
    pub(crate) consecutive_failures: i32,
    /// The brand rule's threshold, when it sets one.
    pub(crate) failure_threshold: Option<i32>,
    pub(crate) needs_attention_at: Option<DateTime<Utc>>,
    /// Window start.
    pub(crate) operation_time_from: Option<NaiveTime>,
    /// Window end.
    pub(crate) operation_time_to: Option<NaiveTime>,
    pub(crate) branch_is_active: bool,
    #[sqlx(try_from = "String")]
    pub(crate) rule_status: RuleStatus,
    /// Brand rule's expression, else the rule's.
    pub(crate) cron_expression: Option<String>,
    /// Branch's zone, else the brand's.
    pub(crate) timezone: String,
    /// `now()` of this transaction: every decision uses database time.
    pub(crate) db_now: DateTime<Utc>,
    /// When the branch rule was created.
    pub(crate) created_at: DateTime<Utc>,
    /// The branch rule's jitter, else the brand rule's, else 0.
    pub(crate) jitter_seconds: i32,
    /// The branch rule's overlap policy, else the brand rule's, else skip.
    #[sqlx(try_from = "String")]
    pub(crate) overlap_policy: Overlap,
    /// The branch rule's timing keys over its brand rule's.
    pub(crate) timing: Option<Json<TimingSpec>>,
    /// The branch's opening hours, resolved.
    pub(crate) opening_hours: Option<Json<HoursSpec>>,
}

/// An overlap policy read from the database (a CHECK constraint keeps it valid); the
/// rule and plan rows decode it alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overlap(pub(crate) OverlapPolicy);

impl TryFrom<String> for Overlap {
    type Error = String;

    fn try_from(text: String) -> Result<Overlap, String> {
        text.parse().map(Overlap)
    }
}

impl LockedRule {
    /// The rule's whole schedule (cron, window, zone, jitter, overlap policy), built as
    /// the runner builds it from a plan entry.
    pub(crate) fn schedule(&self) -> RuleSchedule {
        let hours = OpeningHours::from_stored(self.opening_hours.as_deref());
        RuleSchedule::new(RuleTiming {
            id: self.id,
            cron: self.cron_expression.as_deref(),
            from: self.operation_time_from,
            to: self.operation_time_to,
            zone: Some(&self.timezone),
            jitter_seconds: u32::try_from(self.jitter_seconds).unwrap_or(0),
            overlap: self.overlap_policy.0,
            hours: hours.as_ref(),
            spec: self.timing.as_deref(),
        })
    }

    /// When the rule may run (window, hours, dates), without parsing its cron: readiness
    /// reads it on every claim.
    pub(crate) fn timetable(&self) -> Option<Timetable> {
        let hours = OpeningHours::from_stored(self.opening_hours.as_deref());
        let none = TimingSpec::default();
        rule_timetable(
            self.cron_expression.as_deref(),
            OperationWindow::from_ends(self.operation_time_from, self.operation_time_to),
            self.timing.as_deref().unwrap_or(&none),
            hours.as_ref(),
        )
        .0
    }

    /// The branch rule, its branch and its rule definition are active and it is not
    /// archived (whether it is paused or force-stopped aside).
    pub(crate) fn is_enabled(&self) -> bool {
        self.is_active
            && !self.is_archived
            && self.branch_is_active
            && self.rule_status == RuleStatus::Active
    }

    /// The failures in a row that flag the rule: its brand rule's threshold, else the
    /// default.
    pub(crate) fn threshold(&self) -> u32 {
        self.failure_threshold
            .and_then(|t| u32::try_from(t).ok())
            .unwrap_or(DEFAULT_FAILURE_THRESHOLD)
    }

    /// Its failures in a row so far.
    pub(crate) fn failures_in_a_row(&self) -> u32 {
        u32::try_from(self.consecutive_failures).unwrap_or(0)
    }

    /// The zone, falling back to Asia/Riyadh when the stored name is unknown.
    pub(crate) fn zone(&self) -> Zone {
        Zone::parse(&self.timezone).unwrap_or_else(|error| {
            tracing::warn!(branch_rule_id = %self.id, %error, "using Asia/Riyadh instead");
            Zone::DEFAULT
        })
    }

    /// The readiness inputs, taking "currently running" and the pause from the caller
    /// (who knows the rule's executions).
    pub(crate) fn state(
        &self,
        currently_running: bool,
        paused_until: Option<DateTime<Utc>>,
    ) -> RuleState {
        RuleState {
            is_active: self.is_active,
            is_archived: self.is_archived,
            is_force_stopped: self.is_force_stopped,
            is_paused: self.paused_at.is_some(),
            run_requested: self.run_requested_at.is_some(),
            is_currently_running: currently_running,
            branch_is_active: self.branch_is_active,
            rule_status: self.rule_status,
            next_run_time: self.next_run_time,
            paused_until,
            window: self.timetable(),
            zone: self.zone(),
        }
    }
}

/// The columns and joins of a [`LockedRule`] (a literal, so queries stay `&'static str`);
/// the describe and list queries read more columns over more joins.
macro_rules! rule_from {
    ($columns:expr, $joins:literal) => {
        concat!(
            "SELECT br.id, br.branch_id, br.is_active, br.is_archived, br.is_force_stopped, \
                br.paused_at, br.run_requested_at, br.run_requested_by, br.run_request_reason, \
                br.consecutive_failures, brr.failure_threshold, br.needs_attention_at, \
                br.next_run_time, br.operation_time_from, br.operation_time_to, \
                b.is_active AS branch_is_active, r.status AS rule_status, \
                COALESCE(brr.cron_expression, r.cron_expression) AS cron_expression, \
                COALESCE(b.timezone, bd.timezone) AS timezone, now() AS db_now, \
                br.created_at, COALESCE(br.jitter_seconds, brr.jitter_seconds, 0) AS jitter_seconds, \
                COALESCE(br.overlap_policy, brr.overlap_policy, 'skip') AS overlap_policy, \
                NULLIF(COALESCE(brr.timing, '{}') || COALESCE(br.timing, '{}'), '{}') AS timing, \
                b.opening_hours",
            $columns,
            " FROM branch_rules br \
         JOIN branches b ON b.id = br.branch_id \
         JOIN brands bd ON bd.id = b.brand_id \
         JOIN rules r ON r.id = br.rule_id \
         LEFT JOIN brand_rules brr ON brr.id = br.brand_rule_id ",
            $joins
        )
    };
}

pub(crate) use rule_from;

/// One rule by id (`$1`).
macro_rules! rule_select {
    () => {
        concat!(rule_from!("", ""), " WHERE br.id = $1")
    };
}

/// Whether a rule is overdue: it could run (enabled, neither paused nor force-stopped, held
/// by no execution; a live one whose lease ran out holds nothing) and its next run is more
/// than `OVERDUE_AFTER_SECONDS` (300) past. The one definition: rule pages, lists, the fleet
/// and the `rules_overdue` gauge all read it. Reads `br`, `b`, `r` and the rule's holding
/// (or latest) execution as `latest`.
macro_rules! overdue {
    () => {
        concat!(
            "(",
            $crate::db::branch_rules::enabled!(),
            " AND NOT br.is_force_stopped AND br.paused_at IS NULL \
              AND COALESCE(br.next_run_time < now() - make_interval(secs => 300), false) \
              AND NOT ",
            $crate::db::branch_rules::held!(),
            ")"
        )
    };
}
pub(crate) use overdue;

/// Whether rule `br` may run at all: it, its branch `b` and its rule `r` are active and it
/// is not archived (`LockedRule::is_enabled` in SQL).
macro_rules! enabled {
    () => {
        "(br.is_active AND NOT br.is_archived AND b.is_active AND r.status = 'active')"
    };
}

/// Whether the execution joined as `latest` holds its rule: paused, or live with a lease
/// that has not run out (`decide::holder` in SQL).
macro_rules! held {
    () => {
        "COALESCE(latest.status = 'paused' \
                  OR (latest.status IN ('scheduled', 'running') \
                      AND latest.lease_expires_at > now()), false)"
    };
}
pub(crate) use {enabled, held};

/// What a run-bookkeeping update of branch rules (aliased as given) sets besides its own
/// columns: the touch trigger's work, which it skips (migration
/// `run_bookkeeping_records_itself`).
macro_rules! counted {
    ($alias:literal) => {
        concat!("updated_at = now(), revision = ", $alias, ".revision + 1")
    };
}

/// Records the plan change of the branch rules a run-bookkeeping update returned (as the
/// CTE named, with their `id` and `branch_id`): the statement trigger's work, which it skips.
macro_rules! plan_changed {
    ($updated:literal) => {
        concat!(
            "INSERT INTO plan_changes (branch_id, branch_rule_id) SELECT branch_id, id FROM ",
            $updated
        )
    };
}
pub(crate) use {counted, plan_changed};

/// When a runner of rule `br`'s branch (or that of the rule aliased as given) last called,
/// any runner whose live key serves it: its branch keys through the `branch_ids` index,
/// service keys once per query.
macro_rules! branch_runner_seen {
    () => {
        $crate::db::branch_rules::runner_seen_sql!("br")
    };
    ($rule:literal) => {
        concat!(
            "GREATEST( \
               (SELECT max(rn.last_seen_at) FROM api_keys k JOIN runners rn ON rn.key_id = k.id \
                 WHERE k.branch_ids @> ARRAY[",
            $rule,
            ".branch_id] AND k.revoked_at IS NULL), \
               (SELECT max(rn.last_seen_at) FROM api_keys k JOIN runners rn ON rn.key_id = k.id \
                 WHERE k.role = 'service' AND k.revoked_at IS NULL))"
        )
    };
}

// The macro under a name of its own: `branch_runner_seen` is also the function below.
pub(crate) use branch_runner_seen as runner_seen_sql;

/// When a runner of the rule's branch last called; `None` when none ever has.
pub(crate) async fn branch_runner_seen(
    pool: &sqlx::PgPool,
    id: Uuid,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar(concat!(
        "SELECT ",
        branch_runner_seen!(),
        " FROM branch_rules br WHERE br.id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await
    .map(Option::flatten)
}

/// A [`DescribedRule`]'s query, without its WHERE clause.
macro_rules! described_from {
    () => {
        $crate::db::branch_rules::described_from!(
            "LEFT JOIN LATERAL (SELECT e.id, e.status, e.lease_expires_at, e.resume_at, \
                                       e.scheduled_at \
                                FROM executions e WHERE e.branch_rule_id = br.id \
                                ORDER BY e.scheduled_at DESC LIMIT 1) latest ON true",
            concat!(
                "CASE WHEN ",
                $crate::db::branch_rules::overdue!(),
                " THEN ",
                $crate::db::branch_rules::runner_seen_sql!(),
                " END"
            )
        )
    };
    // `$latest` joins the execution judged as `latest`; `$seen` is the overdue rule's
    // `branch_runner_seen_at`.
    ($latest:literal, $seen:expr) => {
        $crate::db::branch_rules::rule_from!(
            concat!(", br.rule_id, r.name AS rule_name, b.name AS branch_name, b.brand_id, bd.name AS brand_name, \
               br.paused_by, \
               br.pause_reason, br.force_stopped_at, br.force_stopped_by, br.force_stop_reason, \
               br.needs_attention_reason, latest.id AS latest_id, latest.status AS latest_status, \
               latest.lease_expires_at AS latest_lease_expires_at, \
               latest.resume_at AS latest_resume_at, latest.scheduled_at AS latest_scheduled_at, ",
            $crate::db::branch_rules::overdue!(),
            " AS overdue, ",
            $seen,
            " AS branch_runner_seen_at"),
            $latest
        )
    };
}
pub(crate) use described_from;

/// Locks a branch rule row (serialising claims and reports on it) and reads its settings.
pub(crate) async fn lock(tx: &mut Tx, id: Uuid) -> Result<Option<LockedRule>, sqlx::Error> {
    sqlx::query_as(concat!(rule_select!(), " FOR NO KEY UPDATE OF br"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await
}

/// A rule as `rules_describe` shows it: its settings, names and operator marks.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct DescribedRule {
    #[sqlx(flatten)]
    pub(crate) rule: LockedRule,
    /// The brand rule it is a branch's copy of.
    pub(crate) rule_id: Uuid,
    pub(crate) rule_name: String,
    pub(crate) branch_name: String,
    pub(crate) brand_id: Uuid,
    pub(crate) brand_name: String,
    pub(crate) paused_by: Option<String>,
    pub(crate) pause_reason: Option<String>,
    pub(crate) force_stopped_at: Option<DateTime<Utc>>,
    pub(crate) force_stopped_by: Option<String>,
    pub(crate) force_stop_reason: Option<String>,
    pub(crate) needs_attention_reason: Option<String>,
    /// The latest execution: its id, status, lease end and (paused) resume time.
    pub(crate) latest_id: Option<Uuid>,
    #[sqlx(try_from = "Option<String>")]
    pub(crate) latest_status: NullableWord<ExecutionStatus>,
    pub(crate) latest_lease_expires_at: Option<DateTime<Utc>>,
    pub(crate) latest_resume_at: Option<DateTime<Utc>>,
    pub(crate) latest_scheduled_at: Option<DateTime<Utc>>,
    /// By the one definition, `overdue!`.
    pub(crate) overdue: bool,
    /// When an overdue rule's branch last heard from a runner (none: no runner ever).
    pub(crate) branch_runner_seen_at: Option<DateTime<Utc>>,
}

/// Reads a rule for `rules_describe` without locking anything.
pub(crate) async fn describe(
    pool: &sqlx::PgPool,
    id: Uuid,
) -> Result<Option<DescribedRule>, sqlx::Error> {
    sqlx::query_as(concat!(described_from!(), " WHERE br.id = $1"))
        .bind(id)
        .fetch_optional(pool)
        .await
}

/// Which rules one `rules_list` page holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuleFilter {
    pub(crate) brand_id: Option<Uuid>,
    pub(crate) branch_id: Option<Uuid>,
    pub(crate) rule_name: Option<String>,
    pub(crate) branch_name: Option<String>,
    /// Only rules that may be in this condition: a necessary condition read from the rule's
    /// own columns (the condition itself is judged by `rules_describe`'s rule, in Rust).
    pub(crate) may_be: Option<RuleCondition>,
    /// The last row of the previous page: branch name, rule name, id.
    pub(crate) after: Option<(String, String, Uuid)>,
}

/// Up to `limit` rules in scope, by branch name, rule name and id. The page is chosen
/// first, so only its rules have their latest execution looked up.
pub(crate) async fn list(
    pool: &sqlx::PgPool,
    scope: Scope<'_>,
    filter: &RuleFilter,
    limit: i64,
) -> Result<Vec<DescribedRule>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    let after = filter.after.as_ref();
    sqlx::query_as(concat!(
        "WITH page AS ( \
             SELECT br.id FROM branch_rules br \
             JOIN branches b ON b.id = br.branch_id JOIN rules r ON r.id = br.rule_id \
             WHERE ($1 OR br.branch_id = ANY($2)) \
               AND ($3::uuid IS NULL OR b.brand_id = $3) \
               AND ($4::uuid IS NULL OR br.branch_id = $4) \
               AND ($5::text IS NULL OR lower(r.name) = lower($5)) \
               AND ($6::text IS NULL OR lower(b.name) = lower($6)) \
               AND ($7::text IS NULL OR (b.name, r.name, br.id) > ($7, $8, $9)) \
               AND ($11::text IS NULL OR $11 IN ('running', 'idle') \
                    OR ($11 = 'needs_attention' AND br.needs_attention_at IS NOT NULL) \
                    OR ($11 = 'paused' AND br.paused_at IS NOT NULL) \
                    OR ($11 = 'stopped' AND (br.is_force_stopped OR NOT br.is_active \
                        OR br.is_archived OR NOT b.is_active OR r.status <> 'active'))) \
             ORDER BY b.name, r.name, br.id LIMIT $10) ",
        described_from!(),
        " WHERE br.id IN (SELECT id FROM page) ORDER BY b.name, r.name, br.id"
    ))
    .bind(all)
    .bind(branches)
    .bind(filter.brand_id)
    .bind(filter.branch_id)
    .bind(filter.rule_name.as_deref())
    .bind(filter.branch_name.as_deref())
    .bind(after.map(|(branch, _, _)| branch.as_str()))
    .bind(after.map(|(_, rule, _)| rule.as_str()))
    .bind(after.map(|(_, _, id)| *id))
    .bind(limit)
    .bind(filter.may_be.map(RuleCondition::as_str))
    .fetch_all(pool)
    .await
}

/// The latest acknowledgement of rule `$rule` (an alias with `id` and `needs_attention_at`)
/// that has not run out and, for a flagged rule, came after the flag.
macro_rules! live_ack {
    ($rule:literal) => {
        concat!(
            "SELECT a.key_name, a.reason, a.at, a.until FROM attention_acks a \
             WHERE a.branch_rule_id = ",
            $rule,
            ".id AND a.until > now() \
               AND (",
            $rule,
            ".needs_attention_at IS NULL OR a.at >= ",
            $rule,
            ".needs_attention_at) \
             ORDER BY a.at DESC LIMIT 1"
        )
    };
}

pub(crate) use live_ack;

/// Rule `id`'s live acknowledgement, if any.
pub(crate) async fn acknowledgement(
    pool: &sqlx::PgPool,
    id: Uuid,
) -> Result<Option<Acknowledgement>, sqlx::Error> {
    Ok(acknowledgements(pool, &[id]).await?.remove(&id))
}

/// A rule's live acknowledgement, as read.
#[derive(sqlx::FromRow)]
struct AckRow {
    branch_rule_id: Uuid,
    key_name: String,
    reason: String,
    at: DateTime<Utc>,
    until: DateTime<Utc>,
}

/// The live acknowledgements of these rules, by rule (rules without one are left out).
pub(crate) async fn acknowledgements(
    pool: &sqlx::PgPool,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Acknowledgement>, sqlx::Error> {
    let rows: Vec<AckRow> = sqlx::query_as(concat!(
        "SELECT f.id AS branch_rule_id, ack.* FROM branch_rules f, LATERAL (",
        live_ack!("f"),
        ") ack WHERE f.id = ANY($1)"
    ))
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let ack = Acknowledgement {
                by: row.key_name,
                reason: row.reason,
                at: row.at,
                until: row.until,
            };
            (row.branch_rule_id, ack)
        })
        .collect())
}

/// Sets whether the rule is running (a claim or resume took it; a pause released it).
pub(crate) async fn set_running(tx: &mut Tx, id: Uuid, running: bool) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE branch_rules SET is_currently_running = $2 WHERE id = $1")
        .bind(id)
        .bind(running)
        .execute(&mut **tx)
        .await
        .map(drop)
}

/// A finished run's effect on its rule.
pub(crate) struct RunRecord<'a> {
    pub(crate) branch_rule_id: Uuid,
    pub(crate) failed: bool,
    pub(crate) next_run_time: DateTime<Utc>,
    pub(crate) consecutive_failures: i32,
    /// Why the rule needs attention now; `None` clears the mark.
    pub(crate) attention: Option<&'a str>,
    /// When the run ended (its runner's report, else now): the rule's `last_run_time`.
    pub(crate) finished_at: DateTime<Utc>,
}

/// A rule's counters as a report leaves them.
#[derive(sqlx::FromRow)]
pub(crate) struct RunCounters {
    pub(crate) last_run_time: Option<DateTime<Utc>>,
    pub(crate) run_count: i64,
    pub(crate) revision: i64,
}

/// A rule's counters after [`record_runs`].
#[derive(sqlx::FromRow)]
pub(crate) struct RecordedRun {
    pub(crate) id: Uuid,
    #[sqlx(flatten)]
    pub(crate) counters: RunCounters,
}

/// Records finished runs (of distinct rules) and their next run times in one statement,
/// whatever their number: a group of reports costs the statement of one. Returns the
/// counters each rule was left with (its `last_run_time` is the run's `finished_at`).
pub(crate) async fn record_runs(
    tx: &mut Tx,
    runs: &[RunRecord<'_>],
) -> Result<Vec<RecordedRun>, sqlx::Error> {
    sqlx::query_as(concat!(
        "WITH input AS ( \
             SELECT * FROM unnest($1::uuid[], $2::bool[], $3::timestamptz[], $4::int[], \
                                  $5::text[], $6::timestamptz[]) \
                 AS i(id, failed, next_run_time, consecutive_failures, attention, finished_at)), \
         recorded AS ( \
             UPDATE branch_rules br SET is_currently_running = false, \
                    last_run_time = i.finished_at, run_count = br.run_count + 1, \
                    failure_count = br.failure_count + CASE WHEN i.failed THEN 1 ELSE 0 END, \
                    is_last_run_failed = i.failed, next_run_time = i.next_run_time, \
                    consecutive_failures = i.consecutive_failures, \
                    needs_attention_at = CASE WHEN i.attention IS NULL THEN NULL \
                                              ELSE COALESCE(br.needs_attention_at, now()) END, \
                    needs_attention_reason = i.attention, ",
        counted!("br"),
        " FROM input i WHERE br.id = i.id \
             RETURNING br.id, br.branch_id, br.last_run_time, br.run_count, br.revision), \
         changed AS (",
        plan_changed!("recorded"),
        ") SELECT id, last_run_time, run_count, revision FROM recorded"
    ))
    .bind(runs.iter().map(|r| r.branch_rule_id).collect::<Vec<_>>())
    .bind(runs.iter().map(|r| r.failed).collect::<Vec<_>>())
    .bind(runs.iter().map(|r| r.next_run_time).collect::<Vec<_>>())
    .bind(
        runs.iter()
            .map(|r| r.consecutive_failures)
            .collect::<Vec<_>>(),
    )
    .bind(runs.iter().map(|r| r.attention).collect::<Vec<_>>())
    .bind(runs.iter().map(|r| r.finished_at).collect::<Vec<_>>())
    .fetch_all(&mut **tx)
    .await
}

/// A rule's counters, unchanged (a crashed offline run counts as no run).
pub(crate) async fn run_counters(tx: &mut Tx, id: Uuid) -> Result<RunCounters, sqlx::Error> {
    sqlx::query_as("SELECT last_run_time, run_count, revision FROM branch_rules WHERE id = $1")
        .bind(id)
        .fetch_one(&mut **tx)
        .await
}
