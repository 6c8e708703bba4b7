//! SQL reading execution plans: the workflows in a caller's scope and the lookup tables
//! they refer to.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, NaiveTime, Utc};

use futures_util::TryStreamExt;
use res_shared::schedule::{DaySpec, HoursSpec, RuleStatus, TimingSpec};
use res_shared::wire::{
    ActionDetail, ActionTemplate, Branch, Brand, BrandRule, PlanEntry, PlanLookups, Rule,
};
use serde_json::value::RawValue;
use sqlx::types::Json;
use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use uuid::Uuid;

use super::Tx;
use super::branch_rules::Overlap;
use crate::access::Scope;

/// The workflow columns and joins both workflow queries share (a literal, so queries stay
/// `&'static str`). Each column is named as the [`EntryRow`] field it fills. The execution
/// that holds a rule (at most one, `executions_one_live_per_rule`) is joined by that index;
/// joining live and paused executions by their own conditions made the planner read every
/// live execution of the fleet for each site's plan.
macro_rules! workflow_select {
    () => {
        "SELECT br.id, br.branch_id, br.rule_id, br.brand_rule_id, br.is_active, br.is_archived, \
                br.is_force_stopped, br.paused_at IS NOT NULL AS is_paused, br.run_requested_at, \
                br.is_currently_running AND COALESCE(held.status IN ('scheduled', 'running') \
                    AND held.lease_expires_at > now(), false) AS is_currently_running, \
                br.next_run_time, br.last_run_time, br.operation_time_from, br.operation_time_to, \
                COALESCE(brr.cron_expression, r.cron_expression) AS cron_expression, \
                COALESCE(b.timezone, bd.timezone) AS timezone, \
                COALESCE(br.jitter_seconds, brr.jitter_seconds, 0) AS jitter_seconds, \
                COALESCE(br.overlap_policy, brr.overlap_policy, 'skip') AS overlap_policy, \
                NULLIF(COALESCE(brr.timing, '{}') || COALESCE(br.timing, '{}'), '{}') AS timing, \
                br.run_count, br.failure_count, br.is_last_run_failed, br.updated_at, br.revision, \
                CASE WHEN held.status = 'paused' THEN held.resume_at END AS resume_at \
         FROM branch_rules br \
         JOIN branches b ON b.id = br.branch_id \
         JOIN brands bd ON bd.id = b.brand_id \
         JOIN rules r ON r.id = br.rule_id \
         LEFT JOIN brand_rules brr ON brr.id = br.brand_rule_id \
         LEFT JOIN executions held ON held.branch_rule_id = br.id \
              AND held.status IN ('scheduled', 'running', 'paused')"
    };
}
pub(crate) use workflow_select;

/// Everything in scope, for a full plan. When the pool has a connection to spare, the
/// action details (half the work) are read on it at the same time, on the same snapshot:
/// the database and this process then work side by side instead of taking turns.
pub(crate) async fn full(
    pool: &PgPool,
    tx: &mut Tx,
    scope: Scope<'_>,
) -> Result<(Vec<PlanEntry>, PlanLookups), sqlx::Error> {
    // Only when it costs no waiting: an idle connection, or room to open one.
    let spare = pool.num_idle() > 0 || pool.size() < pool.options().get_max_connections();
    let helper = if spare {
        let helper = pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await?;
        Some(share_snapshot(tx, helper).await?)
    } else {
        None
    };
    let (workflows, details) = match helper {
        Some(mut helper) => {
            let (workflows, details) = tokio::join!(
                all_workflows(tx, scope),
                details_in_scope(&mut helper, scope)
            );
            helper.commit().await?;
            (workflows?, details?)
        }
        None => (
            all_workflows(tx, scope).await?,
            details_in_scope(tx, scope).await?,
        ),
    };
    let mut lookups = definitions(tx, &workflows).await?;
    lookups.action_templates = templates(tx, &details, &workflows).await?;
    lookups.action_details = details.into_iter().map(|d| (d.id, d)).collect();
    Ok((workflows, lookups))
}

/// The workflows in scope among the given branch rules and branches, and their lookups.
pub(crate) async fn changed(
    tx: &mut Tx,
    scope: Scope<'_>,
    branch_rules: &[Uuid],
    branches_changed: &[Uuid],
) -> Result<(Vec<PlanEntry>, PlanLookups), sqlx::Error> {
    let (all, branches) = scope.as_params();
    let rows = sqlx::query_as::<_, EntryRow>(concat!(
        workflow_select!(),
        " WHERE (br.id = ANY($3) OR br.branch_id = ANY($4)) AND ($1 OR br.branch_id = ANY($2))"
    ))
    .bind(all)
    .bind(branches)
    .bind(branch_rules)
    .bind(branches_changed)
    .fetch_all(&mut **tx)
    .await?;
    let workflows = with_workflow_configs(tx, rows).await?;
    if workflows.is_empty() {
        return Ok((workflows, PlanLookups::default()));
    }
    let ids: Vec<Uuid> = workflows.iter().map(|w| w.id).collect();
    let details: Vec<ActionDetail> = sqlx::query_as(
        "SELECT id, branch_rule_id, action_template_id, config FROM action_details \
         WHERE branch_rule_id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?
    .into_iter()
    .map(detail)
    .collect();
    let mut lookups = definitions(tx, &workflows).await?;
    lookups.action_templates = templates(tx, &details, &workflows).await?;
    lookups.action_details = details.into_iter().map(|d| (d.id, d)).collect();
    Ok((workflows, lookups))
}

/// Makes the fresh read-only transaction `helper` see exactly `tx`'s snapshot.
async fn share_snapshot(tx: &mut Tx, mut helper: Tx) -> Result<Tx, sqlx::Error> {
    let id: String = sqlx::query_scalar("SELECT pg_export_snapshot()")
        .fetch_one(&mut **tx)
        .await?;
    // The id comes from the database (e.g. 00000003-0000001B-1); check before splicing.
    if !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return Err(sqlx::Error::Protocol(format!(
            "unexpected snapshot id '{id}'"
        )));
    }
    sqlx::query(AssertSqlSafe(format!("SET TRANSACTION SNAPSHOT '{id}'")))
        .execute(&mut *helper)
        .await?;
    Ok(helper)
}

async fn all_workflows(
    connection: &mut PgConnection,
    scope: Scope<'_>,
) -> Result<Vec<PlanEntry>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    // Decoded as the rows arrive, so this process works while the database still sends.
    let mut rows = sqlx::query_as::<_, EntryRow>(concat!(
        workflow_select!(),
        " WHERE ($1 OR br.branch_id = ANY($2))"
    ))
    .bind(all)
    .bind(branches)
    .fetch(&mut *connection);
    let mut decoded = Vec::new();
    while let Some(row) = rows.try_next().await? {
        decoded.push(row);
    }
    drop(rows);
    with_workflow_configs(connection, decoded).await
}

/// Builds workflows from rows, attaching each rule's workflow config. Configs are read
/// once per rule and shared, not once per branch rule: a plan of 10,000 branch rules over
/// 100 rules would otherwise move and copy every config a hundred times.
async fn with_workflow_configs(
    connection: &mut PgConnection,
    rows: Vec<EntryRow>,
) -> Result<Vec<PlanEntry>, sqlx::Error> {
    let rule_ids: BTreeSet<Uuid> = rows.iter().map(|row| row.rule_id).collect();
    let configs: HashMap<Uuid, Arc<RawValue>> = sqlx::query_as::<_, (Uuid, Box<RawValue>)>(
        "SELECT rule_id, workflow_config FROM action_template_connections WHERE rule_id = ANY($1)",
    )
    .bind(rule_ids.into_iter().collect::<Vec<_>>())
    .fetch_all(connection)
    .await?
    .into_iter()
    .map(|(rule, config)| (rule, Arc::from(config)))
    .collect();
    Ok(rows
        .into_iter()
        .map(|row| row.into_entry(&configs))
        .collect())
}

/// One plan entry as the database returns it, before its rule's workflow config is attached.
#[derive(sqlx::FromRow)]
struct EntryRow {
    id: Uuid,
    branch_id: Uuid,
    rule_id: Uuid,
    brand_rule_id: Option<Uuid>,
    is_active: bool,
    is_archived: bool,
    is_force_stopped: bool,
    is_paused: bool,
    run_requested_at: Option<DateTime<Utc>>,
    is_currently_running: bool,
    next_run_time: Option<DateTime<Utc>>,
    resume_at: Option<DateTime<Utc>>,
    last_run_time: Option<DateTime<Utc>>,
    operation_time_from: Option<NaiveTime>,
    operation_time_to: Option<NaiveTime>,
    cron_expression: Option<String>,
    timezone: String,
    jitter_seconds: i32,
    #[sqlx(try_from = "String")]
    overlap_policy: Overlap,
    timing: Option<Json<TimingSpec>>,
    run_count: i64,
    failure_count: i64,
    is_last_run_failed: bool,
    updated_at: DateTime<Utc>,
    revision: i64,
}

impl EntryRow {
    fn into_entry(self, configs: &HashMap<Uuid, Arc<RawValue>>) -> PlanEntry {
        PlanEntry {
            workflow_config: configs.get(&self.rule_id).cloned(),
            id: self.id,
            branch_id: self.branch_id,
            rule_id: self.rule_id,
            brand_rule_id: self.brand_rule_id,
            is_active: self.is_active,
            is_archived: self.is_archived,
            is_force_stopped: self.is_force_stopped,
            is_paused: self.is_paused,
            run_requested_at: self.run_requested_at,
            is_currently_running: self.is_currently_running,
            next_run_time: self.next_run_time,
            resume_at: self.resume_at,
            last_run_time: self.last_run_time,
            operation_time_from: self.operation_time_from,
            operation_time_to: self.operation_time_to,
            cron_expression: self.cron_expression,
            timezone: self.timezone,
            // The column's check keeps it in 0..=3600.
            jitter_seconds: u32::try_from(self.jitter_seconds).unwrap_or(0),
            overlap_policy: self.overlap_policy.0,
            timing: self.timing.map(|t| t.0),
            run_count: self.run_count,
            failure_count: self.failure_count,
            is_last_run_failed: self.is_last_run_failed,
            updated_at: self.updated_at,
            revision: Some(self.revision),
        }
    }
}

type DetailRow = (Uuid, Uuid, Uuid, Box<RawValue>);

fn detail((id, branch_rule_id, action_template_id, config): DetailRow) -> ActionDetail {
    ActionDetail {
        id,
        branch_rule_id,
        action_template_id,
        config,
    }
}

async fn details_in_scope(
    connection: &mut PgConnection,
    scope: Scope<'_>,
) -> Result<Vec<ActionDetail>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    // Selecting by scope is far cheaper than binding ten thousand branch rule ids.
    let mut rows = sqlx::query_as::<_, DetailRow>(
        "SELECT ad.id, ad.branch_rule_id, ad.action_template_id, ad.config \
         FROM action_details ad JOIN branch_rules br ON br.id = ad.branch_rule_id \
         WHERE $1 OR br.branch_id = ANY($2)",
    )
    .bind(all)
    .bind(branches)
    .fetch(connection);
    let mut details = Vec::new();
    while let Some(row) = rows.try_next().await? {
        details.push(detail(row));
    }
    Ok(details)
}

/// Branches, brands, rules and brand rules of the workflows.
async fn definitions(
    connection: &mut PgConnection,
    workflows: &[PlanEntry],
) -> Result<PlanLookups, sqlx::Error> {
    let distinct = |f: fn(&PlanEntry) -> Option<Uuid>| -> Vec<Uuid> {
        workflows
            .iter()
            .filter_map(f)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    type BranchRow = (
        Uuid,
        Uuid,
        String,
        bool,
        Option<String>,
        Option<Json<HoursSpec>>,
    );
    let branches: BTreeMap<Uuid, Branch> = sqlx::query_as::<_, BranchRow>(
        "SELECT id, brand_id, name, is_active, timezone, plan_hours FROM branches \
             WHERE id = ANY($1)",
    )
    .bind(distinct(|w| Some(w.branch_id)))
    .fetch_all(&mut *connection)
    .await?
    .into_iter()
    .map(|(id, brand_id, name, is_active, timezone, hours)| {
        (
            id,
            Branch {
                id,
                brand_id,
                name,
                is_active,
                timezone,
                hours: hours.map(|h| h.0),
            },
        )
    })
    .collect();
    let brand_ids: BTreeSet<Uuid> = branches.values().map(|b| b.brand_id).collect();
    type BrandRow = (
        Uuid,
        String,
        String,
        Option<Json<BTreeMap<String, Vec<DaySpec>>>>,
    );
    let brands = sqlx::query_as::<_, BrandRow>(
        "SELECT id, name, timezone, calendars FROM brands WHERE id = ANY($1)",
    )
    .bind(brand_ids.into_iter().collect::<Vec<_>>())
    .fetch_all(&mut *connection)
    .await?
    .into_iter()
    .map(|(id, name, timezone, calendars)| {
        let calendars = calendars.map(|c| c.0).unwrap_or_default();
        (
            id,
            Brand {
                id,
                name,
                timezone,
                calendars,
            },
        )
    })
    .collect();
    let rules = sqlx::query_as::<_, (Uuid, String, String, Option<String>)>(
        "SELECT id, name, status, cron_expression FROM rules WHERE id = ANY($1)",
    )
    .bind(distinct(|w| Some(w.rule_id)))
    .fetch_all(&mut *connection)
    .await?
    .into_iter()
    .map(|(id, name, status, cron_expression)| {
        let status = RuleStatus::parse(&status).unwrap_or(RuleStatus::Inactive);
        (
            id,
            Rule {
                id,
                name,
                status,
                cron_expression,
            },
        )
    })
    .collect();
    let brand_rules = sqlx::query_as::<_, (Uuid, Uuid, Uuid, Option<String>, Box<RawValue>)>(
        "SELECT id, brand_id, rule_id, cron_expression, settings FROM brand_rules WHERE id = ANY($1)",
    )
    .bind(distinct(|w| w.brand_rule_id))
    .fetch_all(&mut *connection)
    .await?
    .into_iter()
    .map(|(id, brand_id, rule_id, cron_expression, settings)| {
        (id, BrandRule { id, brand_id, rule_id, cron_expression, settings })
    })
    .collect();
    Ok(PlanLookups {
        branches,
        brands,
        rules,
        brand_rules,
        ..PlanLookups::default()
    })
}

/// The templates the details use and the workflows' nodes name (business templates often
/// have no per-branch details, yet the runner must know their executor config).
async fn templates(
    connection: &mut PgConnection,
    details: &[ActionDetail],
    workflows: &[PlanEntry],
) -> Result<BTreeMap<Uuid, ActionTemplate>, sqlx::Error> {
    let ids: BTreeSet<Uuid> = details.iter().map(|d| d.action_template_id).collect();
    let rules: BTreeSet<Uuid> = workflows.iter().map(|w| w.rule_id).collect();
    // Configs are user data: nodes that are not objects, or ids that are not UUIDs, are
    // skipped here and reported by the runner when it loads the workflow.
    Ok(sqlx::query_as::<_, (Uuid, String, String, Box<RawValue>)>(
        "SELECT id, name, kind, config FROM action_templates WHERE id = ANY($1) \
         OR id::text IN ( \
             SELECT node.value ->> 'action_template_id' \
             FROM action_template_connections atc \
             CROSS JOIN LATERAL jsonb_each(CASE jsonb_typeof(atc.workflow_config -> 'nodes') \
                 WHEN 'object' THEN atc.workflow_config -> 'nodes' ELSE '{}' END) AS node \
             WHERE atc.rule_id = ANY($2))",
    )
    .bind(ids.into_iter().collect::<Vec<_>>())
    .bind(rules.into_iter().collect::<Vec<_>>())
    .fetch_all(connection)
    .await?
    .into_iter()
    .map(|(id, name, kind, config)| {
        (
            id,
            ActionTemplate {
                id,
                name,
                kind,
                config,
            },
        )
    })
    .collect())
}
