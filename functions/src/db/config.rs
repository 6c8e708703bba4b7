//! The stored configuration read as documents (res-config): the catalogue, and one brand
//! with its rules, branches and branch rules. Archived branch rules are not part of it.

use std::collections::BTreeMap;

use res_config::{
    ActionTemplate, Branch, BranchHoursDoc, BranchRule, Brand, BrandHoursDoc, BrandRule, Catalogue,
    Rule, RuleSettings, TemplateKind, Window, restore_branch_rule_timing,
    restore_brand_rule_timing, workflow_from_stored,
};
use res_shared::schedule::{RuleStatus, TimingSpec};
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

/// Why stored configuration cannot be shown as a document.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExportError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// Two objects a document names alike (the document refers to them by name).
    #[error("{0}")]
    Ambiguous(String),
}

#[derive(sqlx::FromRow)]
struct TemplateRow {
    id: Uuid,
    name: String,
    kind: String,
    config: Value,
}

#[derive(sqlx::FromRow)]
struct RuleRow {
    id: Uuid,
    name: String,
    status: String,
    cron_expression: Option<String>,
    workflow_config: Option<Value>,
}

/// The catalogue: every action template and rule, by name.
pub(crate) async fn catalogue(conn: &mut PgConnection) -> Result<Catalogue, sqlx::Error> {
    let templates: Vec<TemplateRow> = sqlx::query_as(
        "SELECT id, name, kind, config FROM action_templates WHERE NOT is_archived \
             ORDER BY name, id",
    )
    .fetch_all(&mut *conn)
    .await?;
    let rules: Vec<RuleRow> = sqlx::query_as(
        "SELECT r.id, r.name, r.status, r.cron_expression, c.workflow_config \
         FROM rules r LEFT JOIN action_template_connections c ON c.rule_id = r.id \
         WHERE NOT r.is_archived ORDER BY r.name, r.id",
    )
    .fetch_all(&mut *conn)
    .await?;
    let names: BTreeMap<Uuid, String> = templates.iter().map(|t| (t.id, t.name.clone())).collect();
    let empty = Value::Object(serde_json::Map::new());
    Ok(Catalogue {
        action_templates: templates
            .into_iter()
            .map(|t| ActionTemplate {
                name: t.name,
                id: Some(t.id),
                kind: if t.kind == "business" {
                    TemplateKind::Business
                } else {
                    TemplateKind::Detection
                },
                config: t.config,
            })
            .collect(),
        rules: rules
            .into_iter()
            .map(|r| {
                let stored = r.workflow_config.as_ref().unwrap_or(&empty);
                // Unreadable: shown empty, and validation says what it lacks.
                let workflow =
                    workflow_from_stored(stored, |id| names.get(&id).cloned()).unwrap_or_default();
                Rule {
                    name: r.name,
                    id: Some(r.id),
                    // The column's check allows only these; anything else is shown as a
                    // draft, which never runs.
                    status: RuleStatus::parse(&r.status).unwrap_or(RuleStatus::Draft),
                    schedule: r.cron_expression,
                    workflow,
                }
            })
            .collect(),
    })
}

#[derive(sqlx::FromRow)]
struct BrandRow {
    id: Uuid,
    name: String,
    timezone: String,
    hours: Option<Json<BrandHoursDoc>>,
}

#[derive(sqlx::FromRow)]
struct BrandRuleRow {
    id: Uuid,
    rule_name: String,
    cron_expression: Option<String>,
    failure_threshold: Option<i32>,
    overlap_policy: Option<String>,
    jitter_seconds: Option<i32>,
    timing: Option<Json<TimingSpec>>,
}

#[derive(sqlx::FromRow)]
struct BranchRow {
    id: Uuid,
    name: String,
    timezone: Option<String>,
    is_active: bool,
    hours: Option<Json<BranchHoursDoc>>,
}

#[derive(sqlx::FromRow)]
struct BranchRuleRow {
    id: Uuid,
    branch_id: Uuid,
    rule_name: String,
    is_active: bool,
    window_from: Option<String>,
    window_to: Option<String>,
    overlap_policy: Option<String>,
    jitter_seconds: Option<i32>,
    timing: Option<Json<TimingSpec>>,
}

#[derive(sqlx::FromRow)]
struct DetailRow {
    branch_rule_id: Uuid,
    template_name: String,
    config: Value,
}

/// One brand as a document, or `None` when there is no such brand.
pub(crate) async fn brand(
    conn: &mut PgConnection,
    brand_id: Uuid,
) -> Result<Option<Brand>, ExportError> {
    let Some(brand): Option<BrandRow> =
        sqlx::query_as("SELECT id, name, timezone, hours FROM brands WHERE id = $1")
            .bind(brand_id)
            .fetch_optional(&mut *conn)
            .await?
    else {
        return Ok(None);
    };
    let brand_rules: Vec<BrandRuleRow> = sqlx::query_as(
        "SELECT br.id, r.name AS rule_name, br.cron_expression, br.failure_threshold, \
                br.overlap_policy, br.jitter_seconds, br.timing \
         FROM brand_rules br JOIN rules r ON r.id = br.rule_id \
         WHERE br.brand_id = $1 AND NOT br.is_archived ORDER BY r.name, br.id",
    )
    .bind(brand_id)
    .fetch_all(&mut *conn)
    .await?;
    let branches: Vec<BranchRow> = sqlx::query_as(
        "SELECT id, name, timezone, is_active, hours FROM branches \
         WHERE brand_id = $1 AND NOT is_archived ORDER BY name, id",
    )
    .bind(brand_id)
    .fetch_all(&mut *conn)
    .await?;
    let branch_rules: Vec<BranchRuleRow> = sqlx::query_as(
        "SELECT x.id, x.branch_id, r.name AS rule_name, x.is_active, \
                x.operation_time_from::text AS window_from, x.operation_time_to::text AS window_to, \
                x.overlap_policy, x.jitter_seconds, x.timing \
         FROM branch_rules x JOIN rules r ON r.id = x.rule_id \
              JOIN branches b ON b.id = x.branch_id \
         WHERE b.brand_id = $1 AND NOT x.is_archived ORDER BY r.name, x.id",
    )
    .bind(brand_id)
    .fetch_all(&mut *conn)
    .await?;
    let details: Vec<DetailRow> = sqlx::query_as(
        "SELECT d.branch_rule_id, t.name AS template_name, d.config \
         FROM action_details d JOIN action_templates t ON t.id = d.action_template_id \
              JOIN branch_rules x ON x.id = d.branch_rule_id \
              JOIN branches b ON b.id = x.branch_id \
         WHERE b.brand_id = $1 AND NOT x.is_archived ORDER BY t.name, d.id",
    )
    .bind(brand_id)
    .fetch_all(&mut *conn)
    .await?;
    assemble(brand, brand_rules, branches, branch_rules, details).map(Some)
}

fn assemble(
    brand: BrandRow,
    brand_rules: Vec<BrandRuleRow>,
    branches: Vec<BranchRow>,
    branch_rules: Vec<BranchRuleRow>,
    details: Vec<DetailRow>,
) -> Result<Brand, ExportError> {
    let mut rules: BTreeMap<String, BrandRule> = BTreeMap::new();
    for row in brand_rules {
        let mut rule = BrandRule {
            id: Some(row.id),
            schedule: row.cron_expression,
            failure_threshold: row.failure_threshold.and_then(|n| u32::try_from(n).ok()),
            overlap_policy: row.overlap_policy,
            jitter_seconds: row.jitter_seconds.and_then(|n| u32::try_from(n).ok()),
            ..BrandRule::default()
        };
        if let Some(Json(timing)) = row.timing {
            restore_brand_rule_timing(timing, &mut rule);
        }
        if rules.insert(row.rule_name.clone(), rule).is_some() {
            return Err(ambiguous(&format!(
                "the brand uses two rules called '{}'",
                row.rule_name
            )));
        }
    }
    let mut actions: BTreeMap<Uuid, BTreeMap<String, Value>> = BTreeMap::new();
    for row in details {
        let entry = actions.entry(row.branch_rule_id).or_default();
        if entry
            .insert(row.template_name.clone(), row.config)
            .is_some()
        {
            return Err(ambiguous(&format!(
                "a branch rule has two action details for templates called '{}'",
                row.template_name
            )));
        }
    }
    let mut documented: Vec<Branch> = branches
        .into_iter()
        .map(|b| {
            let mut branch = Branch {
                name: b.name,
                id: Some(b.id),
                zone: b.timezone,
                active: b.is_active,
                hours: None,
                calendars: Vec::new(),
                days: Vec::new(),
                rules: BTreeMap::new(),
            };
            if let Some(Json(hours)) = b.hours {
                hours.restore(&mut branch);
            }
            branch
        })
        .collect();
    for row in branch_rules {
        let Some(branch) = documented.iter_mut().find(|b| b.id == Some(row.branch_id)) else {
            continue;
        };
        // A branch rule made without a brand rule still belongs to one in a document.
        rules.entry(row.rule_name.clone()).or_default();
        let window = match (row.window_from, row.window_to) {
            (Some(from), Some(to)) => Some(Window {
                from: wall_time(&from),
                to: wall_time(&to),
            }),
            _ => None,
        };
        let mut rule = BranchRule {
            id: Some(row.id),
            active: row.is_active,
            window,
            while_open: None,
            week: BTreeMap::new(),
            valid_from: None,
            valid_until: None,
            catch_up: None,
            overlap_policy: row.overlap_policy,
            jitter_seconds: row.jitter_seconds.and_then(|n| u32::try_from(n).ok()),
            actions: actions.remove(&row.id).unwrap_or_default(),
        };
        if let Some(Json(timing)) = row.timing {
            restore_branch_rule_timing(timing, &mut rule);
        }
        if branch.rules.insert(row.rule_name.clone(), rule).is_some() {
            return Err(ambiguous(&format!(
                "branch '{}' runs two rules called '{}'",
                branch.name, row.rule_name
            )));
        }
    }
    let mut documented = Brand {
        name: brand.name,
        id: Some(brand.id),
        zone: brand.timezone,
        defaults: RuleSettings::default(),
        hours: BTreeMap::new(),
        calendars: BTreeMap::new(),
        rules,
        branches: documented,
    };
    if let Some(Json(hours)) = brand.hours {
        hours.restore(&mut documented);
    }
    Ok(documented)
}

fn ambiguous(what: &str) -> ExportError {
    ExportError::Ambiguous(format!(
        "{what}; a document names objects, so rename one before exporting"
    ))
}

/// A stored `time` as a document writes it: `08:00`, `08:00:30`, `24:00`.
fn wall_time(stored: &str) -> String {
    match stored.strip_suffix(":00") {
        Some(minutes) if minutes.len() == 5 => minutes.to_owned(),
        _ => stored.to_owned(),
    }
}

/// The latest configuration revision of a brand, or of the catalogue (`None`); 0 before
/// the first apply.
pub(crate) async fn latest_revision(
    conn: &mut PgConnection,
    brand_id: Option<Uuid>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COALESCE(max(id), 0) FROM config_revisions WHERE brand_id IS NOT DISTINCT FROM $1",
    )
    .bind(brand_id)
    .fetch_one(&mut *conn)
    .await
}

/// Locks a brand for an apply; `None` when there is no such brand.
pub(crate) async fn lock_brand(
    conn: &mut PgConnection,
    brand_id: Uuid,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM brands WHERE id = $1 FOR UPDATE")
        .bind(brand_id)
        .fetch_optional(&mut *conn)
        .await
}

/// Whether the brand exists.
pub(crate) async fn brand_exists(pool: &sqlx::PgPool, brand_id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM brands WHERE id = $1)")
        .bind(brand_id)
        .fetch_one(pool)
        .await
}

/// Takes the catalogue's apply lock until the transaction ends: one catalogue apply at a
/// time, the second then sees the first's revision.
pub(crate) async fn lock_catalogue(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('res.config.catalogue'))")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Brands already called `name` (ignoring case), with their ids.
pub(crate) async fn brands_named(
    conn: &mut PgConnection,
    name: &str,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM brands WHERE lower(name) = lower($1) ORDER BY id")
        .bind(name)
        .fetch_all(&mut *conn)
        .await
}

/// Creates an empty brand; answers its id.
pub(crate) async fn create_brand(
    conn: &mut PgConnection,
    name: &str,
    zone: &str,
) -> Result<Uuid, sqlx::Error> {
    sqlx::query_scalar("INSERT INTO brands (name, timezone) VALUES ($1, $2) RETURNING id")
        .bind(name)
        .bind(zone)
        .fetch_one(&mut *conn)
        .await
}
