//! A site's plan delta in one statement: what changed in its branches since its cursor, and
//! those workflows with everything they refer to. A single statement reads one snapshot, so
//! it needs no transaction of its own — a site that changes its own rules all day (every
//! claim and report) asks for such a delta after each, and each round trip counts at fleet
//! scale. (A full plan, or a caller that sees every branch, reads in a transaction instead:
//! `plan::full`, `plan::changed`.)

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use res_shared::wire::{
    ActionDetail, ActionTemplate, Branch, Brand, BrandRule, PlanEntry, PlanLookups, Rule,
};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use sqlx::PgPool;
use uuid::Uuid;

use super::plan::workflow_select;

/// The changes since a cursor, read in one statement.
#[derive(Debug)]
pub(crate) struct Delta {
    pub(crate) snapshot: String,
    pub(crate) now: DateTime<Utc>,
    /// A shared definition changed: a full plan is due, and the rest is not filled in.
    pub(crate) global: bool,
    pub(crate) workflows: Vec<PlanEntry>,
    pub(crate) lookups: PlanLookups,
    /// Branch rules that changed or whose lease ran out but are no longer in scope.
    pub(crate) removed: Vec<Uuid>,
}

#[derive(sqlx::FromRow)]
struct DeltaRow {
    snapshot: String,
    now: DateTime<Utc>,
    global: bool,
    touched: Vec<Uuid>,
    workflows: Option<String>,
    configs: Option<String>,
    details: Option<String>,
    branches: Option<String>,
    brands: Option<String>,
    rules: Option<String>,
    brand_rules: Option<String>,
    templates: Option<String>,
}

#[derive(serde::Deserialize)]
struct Config {
    rule_id: Uuid,
    workflow_config: Arc<RawValue>,
}

/// What changed in `branches` — a small scope (`changes::probes`) — since the cursor (its
/// snapshot text and time): the branch rules named by change records or whose live lease
/// ran out since then, and every rule of a branch changed as a whole. Each part is one JSON
/// array, decoded here.
pub(crate) async fn read(
    pool: &PgPool,
    cursor: (&str, DateTime<Utc>),
    branches: &[Uuid],
) -> Result<Delta, sqlx::Error> {
    // Each lookup takes its ids as an array (`= ANY(ARRAY(…))`), so the generic plan finds
    // them by index instead of joining whole tables.
    let mut tx = super::begin_generic(pool).await?;
    let row: DeltaRow = sqlx::query_as(concat!(
        // The changes as `changes_since` reads them (see there why in this form), and the
        // expired leases one probe per rule, as `changes::scoped_glance` finds them.
        "WITH changed AS (SELECT DISTINCT branch_id, branch_rule_id FROM (",
        super::changes::scoped_changes!("$1", "$3"),
        ") c), \
         expired AS ( \
             SELECT br.id FROM branch_rules br, LATERAL ( \
                 SELECT 1 FROM executions e \
                 WHERE e.branch_rule_id = br.id AND e.status IN ('scheduled', 'running') \
                   AND e.lease_expires_at > $2 AND e.lease_expires_at <= now() LIMIT 1) x \
             WHERE br.branch_id = ANY($3)), \
         touched AS ( \
             SELECT branch_rule_id AS id FROM changed WHERE branch_rule_id IS NOT NULL \
             UNION SELECT id FROM expired), \
         w AS (",
        workflow_select!(),
        " WHERE br.branch_id = ANY($3) \
            AND (br.id = ANY(ARRAY(SELECT id FROM touched)) \
                 OR br.branch_id = ANY(ARRAY(SELECT branch_id FROM changed \
                                     WHERE branch_id IS NOT NULL AND branch_rule_id IS NULL)))), \
         d AS (SELECT id, branch_rule_id, action_template_id, config FROM action_details \
               WHERE branch_rule_id = ANY(ARRAY(SELECT id FROM w))) \
         SELECT pg_current_snapshot()::text AS snapshot, now() AS now, \
                EXISTS (SELECT 1 FROM changed WHERE branch_id IS NULL) AS global, \
                ARRAY(SELECT id FROM touched) AS touched, \
                (SELECT json_agg(w)::text FROM w) AS workflows, \
                (SELECT json_agg(c)::text FROM ( \
                    SELECT rule_id, workflow_config FROM action_template_connections \
                    WHERE rule_id = ANY(ARRAY(SELECT rule_id FROM w))) c) AS configs, \
                (SELECT json_agg(d)::text FROM d) AS details, \
                (SELECT json_agg(b)::text FROM ( \
                    SELECT id, brand_id, name, is_active, timezone, plan_hours AS hours \
                    FROM branches \
                    WHERE id = ANY(ARRAY(SELECT branch_id FROM w))) b) AS branches, \
                (SELECT json_agg(b)::text FROM ( \
                    SELECT id, name, timezone, COALESCE(calendars, '{}') AS calendars FROM brands WHERE id = ANY(ARRAY( \
                        SELECT brand_id FROM branches \
                        WHERE id = ANY(ARRAY(SELECT branch_id FROM w))))) b) \
                    AS brands, \
                (SELECT json_agg(r)::text FROM ( \
                    SELECT id, name, status, cron_expression FROM rules \
                    WHERE id = ANY(ARRAY(SELECT rule_id FROM w))) r) AS rules, \
                (SELECT json_agg(r)::text FROM ( \
                    SELECT id, brand_id, rule_id, cron_expression, settings FROM brand_rules \
                    WHERE id = ANY(ARRAY(SELECT brand_rule_id FROM w))) r) AS brand_rules, \
                (SELECT json_agg(t)::text FROM ( \
                    SELECT id, name, kind, config FROM action_templates \
                    WHERE id = ANY(ARRAY(SELECT action_template_id FROM d)) \
                       OR id::text IN ( \
                           SELECT node.value ->> 'action_template_id' \
                           FROM action_template_connections atc \
                           CROSS JOIN LATERAL jsonb_each( \
                               CASE jsonb_typeof(atc.workflow_config -> 'nodes') \
                               WHEN 'object' THEN atc.workflow_config -> 'nodes' \
                               ELSE '{}' END) AS node \
                           WHERE atc.rule_id = ANY(ARRAY(SELECT rule_id FROM w)))) t) AS templates"
    ))
    .bind(cursor.0)
    .bind(cursor.1)
    .bind(branches)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let configs: HashMap<Uuid, Arc<RawValue>> = decode::<Config>(row.configs)?
        .into_iter()
        .map(|c| (c.rule_id, c.workflow_config))
        .collect();
    let mut workflows: Vec<PlanEntry> = decode(row.workflows)?;
    for workflow in &mut workflows {
        workflow.workflow_config = configs.get(&workflow.rule_id).cloned();
    }
    let present: BTreeSet<Uuid> = workflows.iter().map(|w| w.id).collect();
    let removed = row
        .touched
        .into_iter()
        .filter(|id| !present.contains(id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let lookups = PlanLookups {
        branches: keyed(decode::<Branch>(row.branches)?, |b| b.id),
        brands: keyed(decode::<Brand>(row.brands)?, |b| b.id),
        rules: keyed(decode::<Rule>(row.rules)?, |r| r.id),
        brand_rules: keyed(decode::<BrandRule>(row.brand_rules)?, |r| r.id),
        action_details: keyed(decode::<ActionDetail>(row.details)?, |d| d.id),
        action_templates: keyed(decode::<ActionTemplate>(row.templates)?, |t| t.id),
    };
    Ok(Delta {
        snapshot: row.snapshot,
        now: row.now,
        global: row.global,
        workflows,
        lookups,
        removed,
    })
}

/// A JSON array the statement built (`None`: no rows).
fn decode<T: DeserializeOwned>(json: Option<String>) -> Result<Vec<T>, sqlx::Error> {
    json.map_or(Ok(Vec::new()), |text| {
        serde_json::from_str(&text).map_err(|e| sqlx::Error::Decode(Box::new(e)))
    })
}

fn keyed<T>(items: Vec<T>, id: fn(&T) -> Uuid) -> std::collections::BTreeMap<Uuid, T> {
    items.into_iter().map(|item| (id(&item), item)).collect()
}
