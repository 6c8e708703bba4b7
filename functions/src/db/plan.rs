//! SQL for execution plans: the workflows in a caller's scope, their lookup tables, and
//! what changed since a snapshot.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use res_shared::schedule::RuleStatus;
use res_shared::wire::{ActionDetail, ActionTemplate, Branch, Brand, BrandRule, Rule, Workflow};
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::Tx;
use crate::auth::Scope;

/// Makes the transaction a consistent read: every query sees the same snapshot, the one
/// whose text becomes the cursor.
pub async fn begin_snapshot(tx: &mut Tx) -> Result<(String, DateTime<Utc>), sqlx::Error> {
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut **tx)
        .await?;
    sqlx::query_as("SELECT pg_current_snapshot()::text, now()")
        .fetch_one(&mut **tx)
        .await
}

/// Changes committed after `snapshot` and visible now, within a scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// A shared definition (rule, template, brand) changed: every plan must be rebuilt.
    pub global: bool,
    /// Branch rules that changed.
    pub branch_rules: BTreeSet<Uuid>,
    /// Branches whose every rule may have changed.
    pub branches: BTreeSet<Uuid>,
}

/// What changed since `snapshot` (text of a `pg_snapshot`), in the caller's scope.
pub async fn changes_since(
    tx: &mut Tx,
    snapshot: &str,
    scope: Scope<'_>,
) -> Result<Changes, sqlx::Error> {
    let (all, branches) = scope.as_params();
    let rows: Vec<(Option<Uuid>, Option<Uuid>)> = sqlx::query_as(
        "SELECT DISTINCT branch_id, branch_rule_id FROM plan_changes \
         WHERE txid >= pg_snapshot_xmin($1::text::pg_snapshot) \
           AND NOT pg_visible_in_snapshot(txid, $1::text::pg_snapshot) \
           AND (branch_id IS NULL OR $2 OR branch_id = ANY($3))",
    )
    .bind(snapshot)
    .bind(all)
    .bind(branches)
    .fetch_all(&mut **tx)
    .await?;
    let mut changes = Changes::default();
    for row in rows {
        match row {
            (None, _) => changes.global = true,
            (Some(_), Some(rule)) => {
                changes.branch_rules.insert(rule);
            }
            (Some(branch), None) => {
                changes.branches.insert(branch);
            }
        }
    }
    Ok(changes)
}

/// Branch rules whose live lease ran out in `(after, now]`: they stopped counting as
/// running without any write, so a delta must report them.
pub async fn leases_expired_since(
    tx: &mut Tx,
    after: DateTime<Utc>,
    scope: Scope<'_>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    sqlx::query_scalar(
        "SELECT e.branch_rule_id FROM executions e \
         JOIN branch_rules br ON br.id = e.branch_rule_id \
         WHERE e.status IN ('scheduled', 'running') \
           AND e.lease_expires_at > $1 AND e.lease_expires_at <= now() \
           AND ($2 OR br.branch_id = ANY($3))",
    )
    .bind(after)
    .bind(all)
    .bind(branches)
    .fetch_all(&mut **tx)
    .await
}

/// The workflow columns and joins both workflow queries share (a literal, so queries stay
/// `&'static str`).
macro_rules! workflow_select {
    () => {
        "SELECT br.id, br.branch_id, br.rule_id, br.brand_rule_id, br.is_active, br.is_archived, \
                br.is_force_stopped, \
                br.is_currently_running AND EXISTS (SELECT 1 FROM executions e \
                    WHERE e.branch_rule_id = br.id AND e.status IN ('scheduled', 'running') \
                      AND e.lease_expires_at > now()) AS is_currently_running, \
                br.next_run_time, br.last_run_time, br.operation_time_from, br.operation_time_to, \
                COALESCE(brr.cron_expression, r.cron_expression) AS cron_expression, \
                COALESCE(b.timezone, bd.timezone) AS timezone, atc.workflow_config, \
                br.run_count, br.failure_count, br.is_last_run_failed, br.updated_at \
         FROM branch_rules br \
         JOIN branches b ON b.id = br.branch_id \
         JOIN brands bd ON bd.id = b.brand_id \
         JOIN rules r ON r.id = br.rule_id \
         LEFT JOIN brand_rules brr ON brr.id = br.brand_rule_id \
         LEFT JOIN action_template_connections atc ON atc.rule_id = br.rule_id"
    };
}

/// Every workflow in scope.
pub async fn all_workflows(tx: &mut Tx, scope: Scope<'_>) -> Result<Vec<Workflow>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    let rows = sqlx::query(concat!(
        workflow_select!(),
        " WHERE ($1 OR br.branch_id = ANY($2)) ORDER BY br.id"
    ))
    .bind(all)
    .bind(branches)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(workflow).collect()
}

/// The workflows in scope among the given branch rules and branches.
pub async fn changed_workflows(
    tx: &mut Tx,
    scope: Scope<'_>,
    branch_rules: &[Uuid],
    branches_changed: &[Uuid],
) -> Result<Vec<Workflow>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    let rows = sqlx::query(concat!(
        workflow_select!(),
        " WHERE (br.id = ANY($3) OR br.branch_id = ANY($4)) AND ($1 OR br.branch_id = ANY($2)) \
             ORDER BY br.id"
    ))
    .bind(all)
    .bind(branches)
    .bind(branch_rules)
    .bind(branches_changed)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(workflow).collect()
}

fn workflow(row: &PgRow) -> Result<Workflow, sqlx::Error> {
    Ok(Workflow {
        id: row.try_get("id")?,
        branch_id: row.try_get("branch_id")?,
        rule_id: row.try_get("rule_id")?,
        brand_rule_id: row.try_get("brand_rule_id")?,
        is_active: row.try_get("is_active")?,
        is_archived: row.try_get("is_archived")?,
        is_force_stopped: row.try_get("is_force_stopped")?,
        is_currently_running: row.try_get("is_currently_running")?,
        next_run_time: row.try_get("next_run_time")?,
        last_run_time: row.try_get("last_run_time")?,
        operation_time_from: row.try_get("operation_time_from")?,
        operation_time_to: row.try_get("operation_time_to")?,
        cron_expression: row.try_get("cron_expression")?,
        timezone: row.try_get("timezone")?,
        workflow_config: row.try_get("workflow_config")?,
        run_count: row.try_get("run_count")?,
        failure_count: row.try_get("failure_count")?,
        is_last_run_failed: row.try_get("is_last_run_failed")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// The lookup tables a set of workflows refers to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lookups {
    /// Branches by id.
    pub branches: BTreeMap<Uuid, Branch>,
    /// Brands by id.
    pub brands: BTreeMap<Uuid, Brand>,
    /// Rules by id.
    pub rules: BTreeMap<Uuid, Rule>,
    /// Brand rules by id.
    pub brand_rules: BTreeMap<Uuid, BrandRule>,
    /// Action details by id.
    pub action_details: BTreeMap<Uuid, ActionDetail>,
    /// Action templates by id.
    pub action_templates: BTreeMap<Uuid, ActionTemplate>,
}

/// Reads the lookup tables `workflows` refer to.
pub async fn lookups(tx: &mut Tx, workflows: &[Workflow]) -> Result<Lookups, sqlx::Error> {
    if workflows.is_empty() {
        return Ok(Lookups::default());
    }
    let ids = |f: fn(&Workflow) -> Option<Uuid>| -> Vec<Uuid> {
        workflows
            .iter()
            .filter_map(f)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let workflow_ids = ids(|w| Some(w.id));
    let branches: Vec<Branch> = sqlx::query(
        "SELECT id, brand_id, name, is_active, timezone FROM branches WHERE id = ANY($1)",
    )
    .bind(ids(|w| Some(w.branch_id)))
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(|row| {
        Ok(Branch {
            id: row.try_get("id")?,
            brand_id: row.try_get("brand_id")?,
            name: row.try_get("name")?,
            is_active: row.try_get("is_active")?,
            timezone: row.try_get("timezone")?,
        })
    })
    .collect::<Result<_, sqlx::Error>>()?;
    let brand_ids: Vec<Uuid> = branches
        .iter()
        .map(|b| b.brand_id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let brands = sqlx::query("SELECT id, name, timezone FROM brands WHERE id = ANY($1)")
        .bind(brand_ids)
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(|row| {
            Ok(Brand {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                timezone: row.try_get("timezone")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let rules =
        sqlx::query("SELECT id, name, status, cron_expression FROM rules WHERE id = ANY($1)")
            .bind(ids(|w| Some(w.rule_id)))
            .fetch_all(&mut **tx)
            .await?
            .iter()
            .map(|row| {
                let status: String = row.try_get("status")?;
                Ok(Rule {
                    id: row.try_get("id")?,
                    name: row.try_get("name")?,
                    status: RuleStatus::parse(&status).unwrap_or(RuleStatus::Inactive),
                    cron_expression: row.try_get("cron_expression")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let brand_rules = sqlx::query(
        "SELECT id, brand_id, rule_id, cron_expression, settings FROM brand_rules WHERE id = ANY($1)",
    )
    .bind(ids(|w| w.brand_rule_id))
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(|row| {
        Ok(BrandRule {
            id: row.try_get("id")?,
            brand_id: row.try_get("brand_id")?,
            rule_id: row.try_get("rule_id")?,
            cron_expression: row.try_get("cron_expression")?,
            settings: row.try_get("settings")?,
        })
    })
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let action_details: Vec<ActionDetail> = sqlx::query(
        "SELECT id, branch_rule_id, action_template_id, config FROM action_details \
         WHERE branch_rule_id = ANY($1)",
    )
    .bind(&workflow_ids)
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(|row| {
        Ok(ActionDetail {
            id: row.try_get("id")?,
            branch_rule_id: row.try_get("branch_rule_id")?,
            action_template_id: row.try_get("action_template_id")?,
            config: row.try_get("config")?,
        })
    })
    .collect::<Result<_, sqlx::Error>>()?;
    let template_ids: Vec<Uuid> = action_details
        .iter()
        .map(|d| d.action_template_id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let action_templates =
        sqlx::query("SELECT id, name, kind, config FROM action_templates WHERE id = ANY($1)")
            .bind(template_ids)
            .fetch_all(&mut **tx)
            .await?
            .iter()
            .map(|row| {
                Ok(ActionTemplate {
                    id: row.try_get("id")?,
                    name: row.try_get("name")?,
                    kind: row.try_get("kind")?,
                    config: row.try_get("config")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
    Ok(Lookups {
        branches: branches.into_iter().map(|b| (b.id, b)).collect(),
        brands: brands.into_iter().map(|b| (b.id, b)).collect(),
        rules: rules.into_iter().map(|r| (r.id, r)).collect(),
        brand_rules: brand_rules.into_iter().map(|r| (r.id, r)).collect(),
        action_details: action_details.into_iter().map(|d| (d.id, d)).collect(),
        action_templates: action_templates.into_iter().map(|t| (t.id, t)).collect(),
    })
}

/// Deletes change records older than the retention (cursors that old get a full plan).
pub async fn prune_changes(pool: &sqlx::PgPool, keep_hours: i32) -> Result<u64, sqlx::Error> {
    sqlx::query("DELETE FROM plan_changes WHERE recorded_at < now() - make_interval(hours => $1)")
        .bind(keep_hours)
        .execute(pool)
        .await
        .map(|r| r.rows_affected())
}
