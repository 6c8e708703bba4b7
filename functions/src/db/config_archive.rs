//! Archived configuration a document names by id: an apply brings each object back under
//! its id, with its history, instead of refusing the id (rolling back past an archive,
//! docs/configure.md). Only the scope's own archived rows are read, so another brand's id
//! stays as unknown as an id nobody has.

use res_config::Archived;
use sqlx::PgConnection;
use uuid::Uuid;

/// `brand_id`'s archived branches, branch rules and brand rules among `ids`.
pub(crate) async fn of_brand(
    conn: &mut PgConnection,
    brand_id: Uuid,
    ids: &[Uuid],
) -> Result<Archived, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Archived::default());
    }
    let branches: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM branches WHERE brand_id = $1 AND is_archived AND id = ANY($2)",
    )
    .bind(brand_id)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let branch_rules: Vec<(Uuid, Uuid, String)> = sqlx::query_as(
        "SELECT x.id, x.branch_id, r.name FROM branch_rules x \
         JOIN branches b ON b.id = x.branch_id JOIN rules r ON r.id = x.rule_id \
         WHERE b.brand_id = $1 AND x.is_archived AND x.id = ANY($2)",
    )
    .bind(brand_id)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let brand_rules: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT br.id, r.name FROM brand_rules br JOIN rules r ON r.id = br.rule_id \
         WHERE br.brand_id = $1 AND br.is_archived AND br.id = ANY($2)",
    )
    .bind(brand_id)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Archived {
        branches: branches.into_iter().collect(),
        branch_rules: branch_rules
            .into_iter()
            .map(|(id, branch, rule)| (id, (branch, rule)))
            .collect(),
        brand_rules: brand_rules.into_iter().collect(),
        ..Archived::default()
    })
}

/// The catalogue's archived action templates and rules among `ids`.
pub(crate) async fn of_catalogue(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Archived, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Archived::default());
    }
    let templates: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM action_templates WHERE is_archived AND id = ANY($1)")
            .bind(ids)
            .fetch_all(&mut *conn)
            .await?;
    let rules: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM rules WHERE is_archived AND id = ANY($1)")
            .bind(ids)
            .fetch_all(&mut *conn)
            .await?;
    Ok(Archived {
        templates: templates.into_iter().collect(),
        rules: rules.into_iter().collect(),
        ..Archived::default()
    })
}
