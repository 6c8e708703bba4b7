//! Writing a brand document: the rows that differ from the stored brand, inside the
//! apply's transaction. What the document leaves out is archived (or deleted with
//! `prune`); every write fires the plan-change triggers, so waiting runners hear at once.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use res_config::{
    Branch, BranchHoursDoc, Brand, BrandHoursDoc, BrandRule, Catalogue, Diff, branch_hours,
    branch_plan_hours, branch_rule_timing, brand_calendars, brand_rule_timing,
};
use res_shared::schedule::{HoursSpec, TimingSpec};
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::types::Json;
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
    /// Archived objects the document brings back under their ids.
    pub(crate) archived: &'a res_config::Archived,
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

/// Writes the brand's own row and its rules, and collects its branches and branch rules
/// (new ones get their ids here) for [`Pending::flush`] to write a statement per kind
/// (`UNNEST`), not a statement per row: a brand of 40,000 branch rules is one document.
/// Answers them with the brand as it will be stored — the document with every id, as
/// export will read it back — so the caller records the revision before the branch rules
/// are written: their row locks, which hold a claim of the same rule until commit, are
/// taken last. Ids of rules and templates come from the catalogue (validation has made
/// sure every name resolves).
pub(crate) async fn prepare(
    conn: &mut PgConnection,
    apply: &Apply<'_>,
) -> Result<(Pending, Brand), sqlx::Error> {
    let (current, desired) = (apply.current, apply.desired);
    let hours = BrandHoursDoc::of(desired);
    if current.name != desired.name
        || current.zone != desired.zone
        || BrandHoursDoc::of(current) != hours
    {
        let calendars = brand_calendars(desired)
            .ok()
            .filter(|c| !c.is_empty())
            .map(Json);
        sqlx::query(
            "UPDATE brands SET name = $2, timezone = $3, hours = $4, calendars = $5 WHERE id = $1",
        )
        .bind(apply.brand_id)
        .bind(&desired.name)
        .bind(&desired.zone)
        .bind(hours.map(Json))
        .bind(calendars)
        .execute(&mut *conn)
        .await?;
    }
    let brand_rules = write_brand_rules(conn, apply).await?;
    let mut pending = Pending::default();
    for pair in res_config::pair_branches(&current.branches, &desired.branches) {
        match pair {
            (was, Some(branch)) => {
                let branch_id = pending.branch(apply, was, branch);
                pending.branch_rules(apply, &brand_rules, branch_id, was, branch);
            }
            (Some(gone), None) => {
                if let Some(id) = gone.id {
                    pending.gone_branches.push(id);
                }
            }
            (None, None) => {}
        }
    }
    let stored = pending.stored(apply, &brand_rules);
    Ok((pending, stored))
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
                                      overlap_policy, jitter_seconds, timing) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (brand_id, rule_id) DO UPDATE SET \
                 cron_expression = EXCLUDED.cron_expression, \
                 failure_threshold = EXCLUDED.failure_threshold, \
                 overlap_policy = EXCLUDED.overlap_policy, \
                 jitter_seconds = EXCLUDED.jitter_seconds, timing = EXCLUDED.timing, \
                 is_archived = false \
             RETURNING id",
        )
        .bind(apply.brand_id)
        .bind(rule_id)
        .bind(&rule.schedule)
        .bind(rule.failure_threshold.and_then(|n| i32::try_from(n).ok()))
        .bind(&rule.overlap_policy)
        .bind(rule.jitter_seconds.and_then(|n| i32::try_from(n).ok()))
        .bind(stored_timing(brand_rule_timing(rule)))
        .fetch_one(&mut *conn)
        .await?;
        ids.insert(name.clone(), id);
    }
    for (name, gone) in &apply.current.rules {
        if apply.desired.rules.contains_key(name) {
            continue;
        }
        let delete = "DELETE FROM brand_rules WHERE id = ANY($1)";
        let archive = "UPDATE brand_rules SET is_archived = true WHERE id = ANY($1)";
        let ids: Vec<Uuid> = gone.id.into_iter().collect();
        remove(conn, apply.prune, &ids, [delete, archive]).await?;
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
            &w.valid_from,
            &w.valid_until,
            &w.catch_up,
        ) == (
            &now.schedule,
            now.failure_threshold,
            &now.overlap_policy,
            now.jitter_seconds,
            &now.valid_from,
            &now.valid_until,
            &now.catch_up,
        )
    })
}

/// The branch and branch-rule rows an apply writes, collected so each kind is one
/// statement.
#[derive(Default)]
pub(crate) struct Pending {
    new_branches: BranchRows,
    changed_branches: BranchRows,
    gone_branches: Vec<Uuid>,
    new_rules: RuleRows,
    changed_rules: RuleRows,
    gone_rules: Vec<Uuid>,
    /// Branch rules whose action details are replaced, and the new details.
    replaced_actions: Vec<Uuid>,
    actions: (Vec<Uuid>, Vec<Uuid>, Vec<Value>),
    /// Every desired branch's id by name, and its rules' ids by rule name.
    ids: BTreeMap<String, (Uuid, BTreeMap<String, Uuid>)>,
}

/// A timing spec as a row stores it: none when it says nothing (validation refused any
/// spec that does not read).
fn stored_timing(spec: Result<TimingSpec, res_config::TimingProblem>) -> Option<Json<TimingSpec>> {
    spec.ok().filter(|s| !s.is_empty()).map(Json)
}

/// What a branch stores of its hours: as written, and resolved against its brand.
#[derive(PartialEq)]
struct StoredHours {
    written: Option<BranchHoursDoc>,
    resolved: Option<HoursSpec>,
    /// As a plan sends it (calendars by name).
    planned: Option<HoursSpec>,
}

impl StoredHours {
    fn of(brand: &Brand, branch: &Branch) -> StoredHours {
        StoredHours {
            written: BranchHoursDoc::of(branch),
            resolved: branch_hours(brand, branch).ok().flatten(),
            planned: branch_plan_hours(brand, branch).ok().flatten(),
        }
    }
}

#[derive(Default)]
struct BranchRows {
    id: Vec<Uuid>,
    name: Vec<String>,
    zone: Vec<Option<String>>,
    active: Vec<bool>,
    hours: Vec<Option<Json<BranchHoursDoc>>>,
    opening_hours: Vec<Option<Json<HoursSpec>>>,
    plan_hours: Vec<Option<Json<HoursSpec>>>,
}

impl BranchRows {
    fn push(&mut self, id: Uuid, branch: &Branch, hours: StoredHours) {
        self.id.push(id);
        self.name.push(branch.name.clone());
        self.zone.push(branch.zone.clone());
        self.active.push(branch.active);
        self.hours.push(hours.written.map(Json));
        self.opening_hours.push(hours.resolved.map(Json));
        self.plan_hours.push(hours.planned.map(Json));
    }
}

#[derive(Default)]
struct RuleRows {
    id: Vec<Uuid>,
    branch_id: Vec<Uuid>,
    rule_id: Vec<Uuid>,
    brand_rule_id: Vec<Uuid>,
    active: Vec<bool>,
    from: Vec<Option<String>>,
    to: Vec<Option<String>>,
    overlap: Vec<Option<String>>,
    jitter: Vec<Option<i32>>,
    timing: Vec<Option<Json<TimingSpec>>>,
    moved: Vec<bool>,
    next_run: Vec<Option<DateTime<Utc>>>,
}

impl Pending {
    /// Notes one branch to create, restore or update; answers its id (new ones get theirs
    /// here).
    fn branch(&mut self, apply: &Apply<'_>, was: Option<&Branch>, branch: &Branch) -> Uuid {
        // Back from the archive: its row is updated (and unarchived), not inserted.
        let restored = branch.id.filter(|id| apply.archived.branches.contains(id));
        let hours = StoredHours::of(apply.desired, branch);
        match (was.and_then(|w| w.id.map(|id| (w, id))), restored) {
            (Some((was, id)), _) => {
                if (&was.name, &was.zone, was.active) != (&branch.name, &branch.zone, branch.active)
                    || StoredHours::of(apply.current, was) != hours
                {
                    self.changed_branches.push(id, branch, hours);
                }
                self.ids.insert(branch.name.clone(), (id, BTreeMap::new()));
                id
            }
            (None, Some(id)) => {
                self.changed_branches.push(id, branch, hours);
                self.ids.insert(branch.name.clone(), (id, BTreeMap::new()));
                id
            }
            (None, None) => {
                let id = Uuid::new_v4();
                self.new_branches.push(id, branch, hours);
                self.ids.insert(branch.name.clone(), (id, BTreeMap::new()));
                id
            }
        }
    }

    /// The desired brand with the ids it is stored under, its branches in export's order.
    fn stored(&self, apply: &Apply<'_>, brand_rules: &BTreeMap<String, Uuid>) -> Brand {
        let mut stored = apply.desired.clone();
        stored.id = Some(apply.brand_id);
        for (name, rule) in &mut stored.rules {
            rule.id = brand_rules.get(name).copied();
        }
        for branch in &mut stored.branches {
            let ids = self.ids.get(&branch.name);
            branch.id = ids.map(|(id, _)| *id);
            for (name, rule) in &mut branch.rules {
                rule.id = ids.and_then(|(_, rules)| rules.get(name)).copied();
            }
        }
        stored.branches.sort_by(|a, b| a.name.cmp(&b.name));
        stored
    }

    /// Notes the rules of one branch to create, update and archive (or delete).
    fn branch_rules(
        &mut self,
        apply: &Apply<'_>,
        brand_rules: &BTreeMap<String, Uuid>,
        branch_id: Uuid,
        was: Option<&Branch>,
        branch: &Branch,
    ) {
        let none = BTreeMap::new();
        let before = was.map_or(&none, |w| &w.rules);
        for (name, rule) in &branch.rules {
            let (Some(rule_id), Some(&brand_rule_id)) =
                (apply.rule_id(name), brand_rules.get(name))
            else {
                continue;
            };
            let existing = before.get(name).and_then(|r| r.id.map(|id| (r, id)));
            // Back from the archive at its branch: updated (and unarchived) under its id,
            // scheduled afresh like a new one.
            let restored = rule
                .id
                .filter(|id| existing.is_none() && apply.archived.branch_rules.contains_key(id));
            let id = existing.map_or_else(|| restored.unwrap_or_else(Uuid::new_v4), |(_, id)| id);
            if let Some((_, rules)) = self.ids.get_mut(&branch.name) {
                rules.insert(name.clone(), id);
            }
            let moved = apply.timing_moved(&branch.name, name) || existing.is_none();
            if let Some((was, _)) = existing
                && was == rule
                && !moved
            {
                continue;
            }
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
            let stored = existing.is_some() || restored.is_some();
            let rows = if stored {
                &mut self.changed_rules
            } else {
                &mut self.new_rules
            };
            rows.id.push(id);
            rows.branch_id.push(branch_id);
            rows.rule_id.push(rule_id);
            rows.brand_rule_id.push(brand_rule_id);
            rows.active.push(rule.active);
            rows.from.push(rule.window.as_ref().map(|w| w.from.clone()));
            rows.to.push(rule.window.as_ref().map(|w| w.to.clone()));
            rows.overlap.push(rule.overlap_policy.clone());
            rows.jitter
                .push(rule.jitter_seconds.and_then(|n| i32::try_from(n).ok()));
            rows.timing.push(stored_timing(branch_rule_timing(rule)));
            rows.moved.push(moved);
            rows.next_run.push(next_run);
            if existing.map(|(was, _)| &was.actions) != Some(&rule.actions) {
                if stored {
                    self.replaced_actions.push(id);
                }
                for (template, config) in &rule.actions {
                    if let Some(template_id) = apply.template_id(template) {
                        self.actions.0.push(id);
                        self.actions.1.push(template_id);
                        self.actions.2.push(config.clone());
                    }
                }
            }
        }
        for (name, gone) in before {
            if !branch.rules.contains_key(name)
                && let Some(id) = gone.id
            {
                self.gone_rules.push(id);
            }
        }
    }

    /// Writes what [`prepare`] collected.
    pub(crate) async fn flush(
        self,
        conn: &mut PgConnection,
        apply: &Apply<'_>,
    ) -> Result<(), sqlx::Error> {
        let b = &self.new_branches;
        sqlx::query(
            "INSERT INTO branches (id, brand_id, name, timezone, is_active, hours, opening_hours, \
                                   plan_hours) \
             SELECT u.id, $1, u.name, u.zone, u.active, u.hours, u.opening, u.planned \
             FROM UNNEST($2::uuid[], $3::text[], $4::text[], $5::bool[], $6::jsonb[], \
                         $7::jsonb[], $8::jsonb[]) AS u(id, name, zone, active, hours, opening, planned)",
        )
        .bind(apply.brand_id)
        .bind(&b.id)
        .bind(&b.name)
        .bind(&b.zone)
        .bind(&b.active)
        .bind(&b.hours)
        .bind(&b.opening_hours)
        .bind(&b.plan_hours)
        .execute(&mut *conn)
        .await?;
        let b = &self.changed_branches;
        sqlx::query(
            "UPDATE branches x SET name = u.name, timezone = u.zone, is_active = u.active, \
                 hours = u.hours, opening_hours = u.opening, plan_hours = u.planned, \
                 is_archived = false \
             FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::bool[], $5::jsonb[], \
                         $6::jsonb[], $7::jsonb[]) AS u(id, name, zone, active, hours, opening, planned) \
             WHERE x.id = u.id",
        )
        .bind(&b.id)
        .bind(&b.name)
        .bind(&b.zone)
        .bind(&b.active)
        .bind(&b.hours)
        .bind(&b.opening_hours)
        .bind(&b.plan_hours)
        .execute(&mut *conn)
        .await?;
        let r = &self.new_rules;
        sqlx::query(
            "INSERT INTO branch_rules (id, branch_id, rule_id, brand_rule_id, is_active, \
                 operation_time_from, operation_time_to, overlap_policy, jitter_seconds, \
                 next_run_time, timing) \
             SELECT u.id, u.branch_id, u.rule_id, u.brand_rule_id, u.active, u.f::time, u.t::time, \
                    u.o, u.j, u.next, u.timing \
             FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::bool[], $6::text[], \
                         $7::text[], $8::text[], $9::int4[], $10::timestamptz[], $11::jsonb[]) \
                  AS u(id, branch_id, rule_id, brand_rule_id, active, f, t, o, j, next, timing)",
        )
        .bind(&r.id)
        .bind(&r.branch_id)
        .bind(&r.rule_id)
        .bind(&r.brand_rule_id)
        .bind(&r.active)
        .bind(&r.from)
        .bind(&r.to)
        .bind(&r.overlap)
        .bind(&r.jitter)
        .bind(&r.next_run)
        .bind(&r.timing)
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM action_details WHERE branch_rule_id = ANY($1)")
            .bind(&self.replaced_actions)
            .execute(&mut *conn)
            .await?;
        let (rules, templates, configs) = &self.actions;
        sqlx::query(
            "INSERT INTO action_details (branch_rule_id, action_template_id, config) \
             SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::jsonb[])",
        )
        .bind(rules)
        .bind(templates)
        .bind(configs)
        .execute(&mut *conn)
        .await?;
        let delete = "DELETE FROM branch_rules WHERE id = ANY($1)";
        let archive = "UPDATE branch_rules SET is_archived = true WHERE id = ANY($1)";
        remove(conn, apply.prune, &self.gone_rules, [delete, archive]).await?;
        // An archived branch takes its rules with it.
        let delete = "DELETE FROM branches WHERE id = ANY($1)";
        let archive = "WITH b AS (UPDATE branches SET is_archived = true, is_active = false \
                                  WHERE id = ANY($1) RETURNING id) \
                       UPDATE branch_rules SET is_archived = true \
                       WHERE branch_id IN (SELECT id FROM b) AND NOT is_archived";
        remove(conn, apply.prune, &self.gone_branches, [delete, archive]).await?;
        // Last: from here to the commit a claim of one of these rules waits for the apply.
        let r = &self.changed_rules;
        sqlx::query(
            "UPDATE branch_rules x SET brand_rule_id = u.brand_rule_id, is_active = u.active, \
                 operation_time_from = u.f::time, operation_time_to = u.t::time, \
                 overlap_policy = u.o, jitter_seconds = u.j, timing = u.timing, \
                 is_archived = false, \
                 next_run_time = CASE WHEN u.moved THEN u.next ELSE x.next_run_time END \
             FROM UNNEST($1::uuid[], $2::uuid[], $3::bool[], $4::text[], $5::text[], $6::text[], \
                         $7::int4[], $8::bool[], $9::timestamptz[], $10::jsonb[]) \
                  AS u(id, brand_rule_id, active, f, t, o, j, moved, next, timing) \
             WHERE x.id = u.id",
        )
        .bind(&r.id)
        .bind(&r.brand_rule_id)
        .bind(&r.active)
        .bind(&r.from)
        .bind(&r.to)
        .bind(&r.overlap)
        .bind(&r.jitter)
        .bind(&r.moved)
        .bind(&r.next_run)
        .bind(&r.timing)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// Deletes (`prune`) or archives the stored rows a document leaves out, with the statement
/// of each, which take the ids as an array.
pub(super) async fn remove(
    conn: &mut PgConnection,
    prune: bool,
    ids: &[Uuid],
    [delete, archive]: [&'static str; 2],
) -> Result<(), sqlx::Error> {
    if ids.is_empty() {
        return Ok(());
    }
    let statement = if prune { delete } else { archive };
    sqlx::query(statement).bind(ids).execute(&mut *conn).await?;
    Ok(())
}

/// Records an apply as the scope's next revision; answers its number.
pub(crate) async fn record_revision(
    conn: &mut PgConnection,
    brand_id: Option<Uuid>,
    key: (Uuid, &str),
    message: &str,
    document: &res_config::Document,
    diff: &Diff,
) -> Result<i64, sqlx::Error> {
    let (created, changed, removed) = diff.counts();
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    // Sent as text for a `json` column: checked, not parsed into `jsonb`.
    let text = |value: Result<String, serde_json::Error>| {
        value.map_err(|e| sqlx::Error::Encode(Box::new(e)))
    };
    let (document, diff) = (
        text(serde_json::to_string(document))?,
        text(serde_json::to_string(diff))?,
    );
    sqlx::query_scalar(
        "INSERT INTO config_revisions (brand_id, key_id, key_name, message, document, diff, \
                                       created, changed, removed) \
         VALUES ($1, $2, $3, $4, $5::json, $6::json, $7, $8, $9) RETURNING id",
    )
    .bind(brand_id)
    .bind(key.0)
    .bind(key.1)
    .bind(message)
    .bind(document)
    .bind(diff)
    .bind(count(created))
    .bind(count(changed))
    .bind(count(removed))
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
         FROM config_revisions r, json_array_elements(r.diff->'changes') c \
         WHERE r.brand_id IS NOT DISTINCT FROM $1 AND r.id > $2 ORDER BY r.id",
    )
    .bind(brand_id)
    .bind(base)
    .fetch_all(&mut *conn)
    .await
}
