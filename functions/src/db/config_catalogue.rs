//! Writing a catalogue document: action templates and rules (with their workflows) that
//! differ from the stored catalogue, inside the apply's transaction. What the document
//! leaves out is archived (or deleted with `prune`) only when nothing still uses it; rules
//! whose default schedule moved have their users' next runs recomputed at once.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use res_config::{ActionTemplate, Catalogue, Rule};
use sqlx::PgConnection;
use uuid::Uuid;

/// What one catalogue apply writes with.
pub(crate) struct CatalogueApply<'a> {
    pub(crate) current: &'a Catalogue,
    pub(crate) desired: &'a Catalogue,
    /// Archived templates and rules the document brings back under their ids.
    pub(crate) archived: &'a res_config::Archived,
    pub(crate) prune: bool,
}

impl CatalogueApply<'_> {
    fn templates(&self) -> Vec<(Option<&ActionTemplate>, Option<&ActionTemplate>)> {
        res_config::pair_templates(
            &self.current.action_templates,
            &self.desired.action_templates,
        )
    }

    fn rules(&self) -> Vec<(Option<&Rule>, Option<&Rule>)> {
        res_config::pair_rules(&self.current.rules, &self.desired.rules)
    }
}

/// Why objects the document leaves out cannot go: each still used by a brand, named with
/// how many uses (the brands' names are not the catalogue author's to see).
pub(crate) async fn still_used(
    conn: &mut PgConnection,
    apply: &CatalogueApply<'_>,
) -> Result<Vec<String>, sqlx::Error> {
    let mut used = Vec::new();
    // Archiving leaves archived users alone; deleting would take their history with it.
    let live = !apply.prune;
    for gone in apply
        .rules()
        .into_iter()
        .filter_map(|(was, now)| was.filter(|_| now.is_none()))
    {
        let Some(id) = gone.id else { continue };
        let name = &gone.name;
        let (brands, branch_rules): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM brand_rules WHERE rule_id = $1 AND NOT ($2 AND is_archived)), \
                    (SELECT count(*) FROM branch_rules WHERE rule_id = $1 AND NOT ($2 AND is_archived))",
        )
        .bind(id)
        .bind(live)
        .fetch_one(&mut *conn)
        .await?;
        if brands + branch_rules > 0 {
            used.push(format!(
                "rule '{name}' is used by {brands} brand rule(s) and {branch_rules} branch rule(s)"
            ));
        }
    }
    for gone in apply
        .templates()
        .into_iter()
        .filter_map(|(was, now)| was.filter(|_| now.is_none()))
    {
        let Some(id) = gone.id else { continue };
        let name = &gone.name;
        let details: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM action_details d JOIN branch_rules x ON x.id = d.branch_rule_id \
             WHERE d.action_template_id = $1 AND NOT ($2 AND x.is_archived)",
        )
        .bind(id)
        .bind(live)
        .fetch_one(&mut *conn)
        .await?;
        if details > 0 {
            used.push(format!(
                "action template '{name}' has settings at {details} branch rule(s)"
            ));
        }
    }
    Ok(used)
}

/// Writes the catalogue; answers the ids of the rules whose default schedule changed.
pub(crate) async fn write(
    conn: &mut PgConnection,
    apply: &CatalogueApply<'_>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut template_ids: BTreeMap<&str, Uuid> = BTreeMap::new();
    for pair in apply.templates() {
        match pair {
            (was, Some(template)) => {
                let restored = template
                    .id
                    .filter(|id| apply.archived.templates.contains(id));
                let id = write_template(conn, was, template, restored).await?;
                template_ids.insert(&template.name, id);
            }
            (Some(gone), None) => {
                let delete = "DELETE FROM action_templates WHERE id = ANY($1)";
                let archive = "UPDATE action_templates SET is_archived = true WHERE id = ANY($1)";
                let ids: Vec<Uuid> = gone.id.into_iter().collect();
                super::config_apply::remove(conn, apply.prune, &ids, [delete, archive]).await?;
            }
            (None, None) => {}
        }
    }
    let mut moved = Vec::new();
    for pair in apply.rules() {
        match pair {
            (was, Some(rule)) => {
                let restored = rule.id.filter(|id| apply.archived.rules.contains(id));
                let id = write_rule(conn, (was, restored), rule, &template_ids).await?;
                if was.is_some_and(|w| w.schedule != rule.schedule) {
                    moved.push(id);
                }
            }
            (Some(gone), None) => {
                let delete = "DELETE FROM rules WHERE id = ANY($1)";
                let archive = "UPDATE rules SET is_archived = true WHERE id = ANY($1)";
                let ids: Vec<Uuid> = gone.id.into_iter().collect();
                super::config_apply::remove(conn, apply.prune, &ids, [delete, archive]).await?;
            }
            (None, None) => {}
        }
    }
    Ok(moved)
}

/// Writes one template: updates the stored one (`was`), brings an archived one back
/// (`restored`, its id), or inserts a new one; answers its id.
async fn write_template(
    conn: &mut PgConnection,
    was: Option<&ActionTemplate>,
    template: &ActionTemplate,
    restored: Option<Uuid>,
) -> Result<Uuid, sqlx::Error> {
    let kind = template.kind.as_str();
    match was.and_then(|w| w.id.map(|id| (w, id))) {
        Some((was, id)) => {
            if (&was.name, was.kind, &was.config)
                != (&template.name, template.kind, &template.config)
            {
                sqlx::query(
                    "UPDATE action_templates SET name = $2, kind = $3, config = $4 WHERE id = $1",
                )
                .bind(id)
                .bind(&template.name)
                .bind(kind)
                .bind(&template.config)
                .execute(&mut *conn)
                .await?;
            }
            Ok(id)
        }
        None => {
            sqlx::query_scalar(match restored {
                Some(_) => {
                    "UPDATE action_templates SET name = $2, kind = $3, config = $4, \
                 is_archived = false WHERE id = $1 RETURNING id"
                }
                None => {
                    "INSERT INTO action_templates (name, kind, config) VALUES ($2, $3, $4) \
                 RETURNING id"
                }
            })
            .bind(restored)
            .bind(&template.name)
            .bind(kind)
            .bind(&template.config)
            .fetch_one(&mut *conn)
            .await
        }
    }
}

/// Writes one rule and its workflow, as [`write_template`] writes a template.
async fn write_rule(
    conn: &mut PgConnection,
    (was, restored): (Option<&Rule>, Option<Uuid>),
    rule: &Rule,
    template_ids: &BTreeMap<&str, Uuid>,
) -> Result<Uuid, sqlx::Error> {
    let workflow =
        res_config::stored_workflow(&rule.workflow, |name| template_ids.get(name).copied());
    let existing = was.and_then(|w| w.id.map(|id| (w, id)));
    let id = match existing {
        Some((was, id)) => {
            if (&was.name, was.status, &was.schedule) != (&rule.name, rule.status, &rule.schedule) {
                sqlx::query(
                    "UPDATE rules SET name = $2, status = $3, cron_expression = $4 WHERE id = $1",
                )
                .bind(id)
                .bind(&rule.name)
                .bind(rule.status.as_str())
                .bind(&rule.schedule)
                .execute(&mut *conn)
                .await?;
            }
            // A renamed template changes the document's workflow but not the stored one.
            if was.workflow == rule.workflow {
                return Ok(id);
            }
            id
        }
        None => {
            sqlx::query_scalar(match restored {
                Some(_) => {
                    "UPDATE rules SET name = $2, status = $3, cron_expression = $4, \
                 is_archived = false WHERE id = $1 RETURNING id"
                }
                None => {
                    "INSERT INTO rules (name, status, cron_expression) VALUES ($2, $3, $4) \
                 RETURNING id"
                }
            })
            .bind(restored)
            .bind(&rule.name)
            .bind(rule.status.as_str())
            .bind(&rule.schedule)
            .fetch_one(&mut *conn)
            .await?
        }
    };
    sqlx::query(
        "INSERT INTO action_template_connections (rule_id, workflow_config) VALUES ($1, $2) \
         ON CONFLICT (rule_id) DO UPDATE SET workflow_config = EXCLUDED.workflow_config",
    )
    .bind(id)
    .bind(&workflow)
    .execute(&mut *conn)
    .await?;
    Ok(id)
}

/// The brands whose branch rules follow one of `rules`' default schedule (no schedule of
/// their own in the brand): their next runs are recomputed from the new catalogue.
pub(crate) async fn brands_following(
    conn: &mut PgConnection,
    rules: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT DISTINCT brand_id FROM brand_rules \
         WHERE rule_id = ANY($1) AND cron_expression IS NULL AND NOT is_archived",
    )
    .bind(rules)
    .fetch_all(&mut *conn)
    .await
}

/// Sets the next run of each of `brand`'s branch rules that follows one of `rules` (by
/// name) without a schedule of its own, from the catalogue as applied.
pub(crate) async fn reschedule_followers(
    conn: &mut PgConnection,
    brand: &res_config::Brand,
    rules: &[&str],
    catalogue: &Catalogue,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    for branch in &brand.branches {
        for (name, rule) in &branch.rules {
            let follows = rules.contains(&name.as_str())
                && brand.rules.get(name).is_some_and(|r| r.schedule.is_none());
            let Some(id) = rule.id.filter(|_| follows) else {
                continue;
            };
            let next = res_config::next_run_at(brand, branch, name, rule, Some(catalogue), id, now);
            sqlx::query("UPDATE branch_rules SET next_run_time = $2 WHERE id = $1")
                .bind(id)
                .bind(next)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}
