//! Writing a brand document: the rows that differ from the stored brand, inside the
//! apply's transaction. What the document leaves out is archived (or deleted with
//! `prune`); every write fires the plan-change triggers, so waiting runners hear at once.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use res_config::{Branch, Brand, BrandRule, Catalogue, Diff};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// What one apply writes with.
pub(crate) struct Apply<'a> {
    pub(crate) brand_id: Uuid,
    pub(crate) current: &'a Brand,
    pub(crate) desired: &'a Brand,
    /// The stored catalogue (with ids): rules and templates by name.
    pub(crate) catalogue: &'a Catalogue,
    /// Branch rules (`Branch / Rule`) whose timing the diff moved.
    pub(crate) moved: HashSet<String>,
    pub(crate) prune: bool,
    pub(crate) now: DateTime<Utc>,
}

/// The branch rules a diff moved, looked up once per branch rule while writing.
pub(crate) fn moved_branch_rules(diff: &Diff) -> HashSet<String> {
    diff.changes
        .iter()
        .filter(|c| c.kind == "branch rule" && c.runs.is_some())
        .map(|c| c.name.clone())
        .collect()
}

impl Apply<'_> {
    fn rule_id(&self, name: &str) -> Option<Uuid> {
        self.catalogue
            .rules
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| r.id)
    }

    fn template_id(&self, name: &str) -> Option<Uuid> {
        self.catalogue
            .action_templates
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.id)
    }

    /// Whether the diff moved when this branch rule runs (or it is new).
    fn timing_moved(&self, branch: &str, rule: &str) -> bool {
        self.moved.contains(&format!("{branch} / {rule}"))
    }
}

/// Writes the brand; ids of rules and templates come from the catalogue (validation has
/// made sure every name resolves).
pub(crate) async fn write(conn: &mut PgConnection, apply: &Apply<'_>) -> Result<(), sqlx::Error> {
    let (current, desired) = (apply.current, apply.desired);
    if current.name != desired.name || current.zone != desired.zone {
        sqlx::query("UPDATE brands SET name = $2, timezone = $3 WHERE id = $1")
            .bind(apply.brand_id)
            .bind(&desired.name)
            .bind(&desired.zone)
            .execute(&mut *conn)
            .await?;
    }
    let brand_rules = write_brand_rules(conn, apply).await?;
    for pair in res_config::pair_branches(&current.branches, &desired.branches) {
        match pair {
            (was, Some(branch)) => {
                let branch_id = write_branch(conn, apply, was, branch).await?;
                write_branch_rules(conn, apply, &brand_rules, branch_id, was, branch).await?;
            }
            (Some(gone), None) => {
                // An archived branch takes its rules with it.
                let archive = "WITH b AS (UPDATE branches SET is_archived = true, is_active = false \
                                          WHERE id = $1 RETURNING id) \
                               UPDATE branch_rules SET is_archived = true \
                               WHERE branch_id = (SELECT id FROM b) AND NOT is_archived";
                let delete = "DELETE FROM branches WHERE id = $1";
                remove(conn, apply.prune, gone.id, [delete, archive]).await?;
            }
            (None, None) => {}
        }
    }
    Ok(())
}

/// Upserts the brand's rules that changed, archives (or deletes) those left out; answers
/// every brand rule's id by rule name.
async fn write_brand_rules(
    conn: &mut PgConnection,
    apply: &Apply<'_>,
) -> Result<BTreeMap<String, Uuid>, sqlx::Error> {
    let mut ids = BTreeMap::new();
    for (name, rule) in &apply.desired.rules {
        let was = apply.current.rules.get(name);
        if let Some(id) = was.and_then(|w| w.id)
            && same_brand_rule(was, rule)
        {
            ids.insert(name.clone(), id);
            continue;
        }
        let Some(rule_id) = apply.rule_id(name) else {
            continue;
        };
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO brand_rules (brand_id, rule_id, cron_expression, failure_threshold, \
                                      overlap_policy, jitter_seconds) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (brand_id, rule_id) DO UPDATE SET \
                 cron_expression = EXCLUDED.cron_expression, \
                 failure_threshold = EXCLUDED.failure_threshold, \
                 overlap_policy = EXCLUDED.overlap_policy, \
                 jitter_seconds = EXCLUDED.jitter_seconds, is_archived = false \
             RETURNING id",
        )
        .bind(apply.brand_id)
        .bind(rule_id)
        .bind(&rule.schedule)
        .bind(rule.failure_threshold.and_then(|n| i32::try_from(n).ok()))
        .bind(&rule.overlap_policy)
        .bind(rule.jitter_seconds.and_then(|n| i32::try_from(n).ok()))
        .fetch_one(&mut *conn)
        .await?;
        ids.insert(name.clone(), id);
    }
    for (name, gone) in &apply.current.rules {
        if apply.desired.rules.contains_key(name) {
            continue;
        }
        let delete = "DELETE FROM brand_rules WHERE id = $1";
        let archive = "UPDATE brand_rules SET is_archived = true WHERE id = $1";
        remove(conn, apply.prune, gone.id, [delete, archive]).await?;
    }
    Ok(ids)
}

fn same_brand_rule(was: Option<&BrandRule>, now: &BrandRule) -> bool {
    was.is_some_and(|w| {
        (
            &w.schedule,
            w.failure_threshold,
            &w.overlap_policy,
            w.jitter_seconds,
        ) == (
            &now.schedule,
            now.failure_threshold,
            &now.overlap_policy,
            now.jitter_seconds,
        )
    })
}

/// Creates or updates one branch; answers its id.
async fn write_branch(
    conn: &mut PgConnection,
    apply: &Apply<'_>,
    was: Option<&Branch>,
    branch: &Branch,
) -> Result<Uuid, sqlx::Error> {
    match was.and_then(|w| w.id.map(|id| (w, id))) {
        Some((was, id)) => {
            if (&was.name, &was.zone, was.active) != (&branch.name, &branch.zone, branch.active) {
                sqlx::query(
                    "UPDATE branches SET name = $2, timezone = $3, is_active = $4 WHERE id = $1",
                )
                .bind(id)
                .bind(&branch.name)
                .bind(&branch.zone)
                .bind(branch.active)
                .execute(&mut *conn)
                .await?;
            }
            Ok(id)
        }
        None => {
            sqlx::query_scalar(
                "INSERT INTO branches (brand_id, name, timezone, is_active) \
                 VALUES ($1, $2, $3, $4) RETURNING id",
            )
            .bind(apply.brand_id)
            .bind(&branch.name)
            .bind(&branch.zone)
            .bind(branch.active)
            .fetch_one(&mut *conn)
            .await
        }
    }
}

/// Creates, updates and archives (or deletes) the rules of one branch.
async fn write_branch_rules(
    conn: &mut PgConnection,
    apply: &Apply<'_>,
    brand_rules: &BTreeMap<String, Uuid>,
    branch_id: Uuid,
    was: Option<&Branch>,
    branch: &Branch,
) -> Result<(), sqlx::Error> {
    let none = BTreeMap::new();
    let before = was.map_or(&none, |w| &w.rules);
    for (name, rule) in &branch.rules {
        let (Some(rule_id), Some(brand_rule_id)) = (apply.rule_id(name), brand_rules.get(name))
        else {
            continue;
        };
        let existing = before.get(name).and_then(|r| r.id.map(|id| (r, id)));
        let id = existing.map_or_else(Uuid::new_v4, |(_, id)| id);
        let moved = apply.timing_moved(&branch.name, name) || existing.is_none();
        let next_run = moved
            .then(|| {
                res_config::next_run_at(
                    apply.desired,
                    branch,
                    name,
                    rule,
                    Some(apply.catalogue),
                    id,
                    apply.now,
                )
            })
            .flatten();
        let (from, to) = rule
            .window
            .as_ref()
            .map(|w| (w.from.clone(), w.to.clone()))
            .unzip();
        let jitter = rule.jitter_seconds.and_then(|n| i32::try_from(n).ok());
        match existing {
            None => {
                sqlx::query(
                    "INSERT INTO branch_rules (id, branch_id, rule_id, brand_rule_id, is_active, \
                         operation_time_from, operation_time_to, overlap_policy, jitter_seconds, \
                         next_run_time) \
                     VALUES ($1, $2, $3, $4, $5, $6::time, $7::time, $8, $9, $10)",
                )
                .bind(id)
                .bind(branch_id)
                .bind(rule_id)
                .bind(brand_rule_id)
                .bind(rule.active)
                .bind(&from)
                .bind(&to)
                .bind(&rule.overlap_policy)
                .bind(jitter)
                .bind(next_run)
                .execute(&mut *conn)
                .await?;
            }
            Some((was, _)) if was == rule && !moved => continue,
            Some(_) => {
                sqlx::query(
                    "UPDATE branch_rules SET brand_rule_id = $2, is_active = $3, \
                         operation_time_from = $4::time, operation_time_to = $5::time, \
                         overlap_policy = $6, jitter_seconds = $7, \
                         next_run_time = CASE WHEN $8 THEN $9 ELSE next_run_time END \
                     WHERE id = $1",
                )
                .bind(id)
                .bind(brand_rule_id)
                .bind(rule.active)
                .bind(&from)
                .bind(&to)
                .bind(&rule.overlap_policy)
                .bind(jitter)
                .bind(moved)
                .bind(next_run)
                .execute(&mut *conn)
                .await?;
            }
        }
        if existing.map(|(was, _)| &was.actions) != Some(&rule.actions) {
            write_actions(conn, apply, id, &rule.actions).await?;
        }
    }
    for (name, gone) in before {
        if branch.rules.contains_key(name) {
            continue;
        }
        let delete = "DELETE FROM branch_rules WHERE id = $1";
        let archive = "UPDATE branch_rules SET is_archived = true WHERE id = $1";
        remove(conn, apply.prune, gone.id, [delete, archive]).await?;
    }
    Ok(())
}

/// Deletes (`prune`) or archives a stored row the document leaves out, with the statement
/// of each, which take its id.
pub(super) async fn remove(
    conn: &mut PgConnection,
    prune: bool,
    id: Option<Uuid>,
    [delete, archive]: [&'static str; 2],
) -> Result<(), sqlx::Error> {
    let Some(id) = id else { return Ok(()) };
    let statement = if prune { delete } else { archive };
    sqlx::query(statement).bind(id).execute(&mut *conn).await?;
    Ok(())
}

/// Replaces a branch rule's action details.
async fn write_actions(
    conn: &mut PgConnection,
    apply: &Apply<'_>,
    branch_rule: Uuid,
    actions: &BTreeMap<String, Value>,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM action_details WHERE branch_rule_id = $1")
        .bind(branch_rule)
        .execute(&mut *conn)
        .await?;
    for (template, config) in actions {
        if let Some(template_id) = apply.template_id(template) {
            sqlx::query(
                "INSERT INTO action_details (branch_rule_id, action_template_id, config) \
                 VALUES ($1, $2, $3)",
            )
            .bind(branch_rule)
            .bind(template_id)
            .bind(config)
            .execute(&mut *conn)
            .await?;
        }
    }
    Ok(())
}

/// Records an apply as the scope's next revision; answers its number.
pub(crate) async fn record_revision(
    conn: &mut PgConnection,
    brand_id: Option<Uuid>,
    key: (Uuid, &str),
    message: &str,
    document: &Value,
    diff: &Value,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO config_revisions (brand_id, key_id, key_name, message, document, diff) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(brand_id)
    .bind(key.0)
    .bind(key.1)
    .bind(message)
    .bind(document)
    .bind(diff)
    .fetch_one(&mut *conn)
    .await
}

/// The objects later revisions than `base` changed, as (kind, name) with the revision and
/// who applied it.
pub(crate) async fn changed_since(
    conn: &mut PgConnection,
    brand_id: Option<Uuid>,
    base: i64,
) -> Result<Vec<(String, String, i64, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT c->>'kind', c->>'name', r.id, r.key_name \
         FROM config_revisions r, jsonb_array_elements(r.diff->'changes') c \
         WHERE r.brand_id IS NOT DISTINCT FROM $1 AND r.id > $2 ORDER BY r.id",
    )
    .bind(brand_id)
    .bind(base)
    .fetch_all(&mut *conn)
    .await
}
