//! SQL for what a run's programs printed (`execution_output`).

use res_shared::wire::{NodeOutput, OutputStream};
use sqlx::PgPool;
use uuid::Uuid;

use super::Tx;

#[derive(sqlx::FromRow)]
struct OutputRow {
    node_id: String,
    visit: i32,
    #[sqlx(try_from = "String")]
    stream: OutputStream,
    text: String,
    cut_bytes: i64,
}

impl From<OutputRow> for NodeOutput {
    // The table's checks keep visit ≥ 1 and cut_bytes ≥ 0.
    fn from(row: OutputRow) -> NodeOutput {
        NodeOutput {
            node_id: row.node_id,
            visit: u32::try_from(row.visit).unwrap_or(1),
            stream: row.stream,
            text: row.text,
            cut_bytes: u64::try_from(row.cut_bytes).unwrap_or(0),
        }
    }
}

/// Stores a report's output for execution `id`, in the order given, replacing any output
/// stored before (a late report of a crashed execution brings the whole of it).
pub(crate) async fn store(
    tx: &mut Tx,
    id: Uuid,
    outputs: &[NodeOutput],
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM execution_output WHERE execution_id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    if outputs.is_empty() {
        return Ok(());
    }
    let node_ids: Vec<&str> = outputs.iter().map(|o| o.node_id.as_str()).collect();
    let visits: Vec<i32> = outputs
        .iter()
        .map(|o| i32::try_from(o.visit).unwrap_or(i32::MAX))
        .collect();
    let streams: Vec<&str> = outputs.iter().map(|o| o.stream.as_str()).collect();
    let texts: Vec<&str> = outputs.iter().map(|o| o.text.as_str()).collect();
    let cuts: Vec<i64> = outputs
        .iter()
        .map(|o| i64::try_from(o.cut_bytes).unwrap_or(i64::MAX))
        .collect();
    sqlx::query(
        "INSERT INTO execution_output (execution_id, seq, node_id, visit, stream, text, cut_bytes) \
         SELECT $1, o.seq::integer, o.node_id, o.visit, o.stream, o.text, o.cut_bytes \
         FROM unnest($2::text[], $3::integer[], $4::text[], $5::text[], $6::bigint[]) \
              WITH ORDINALITY AS o(node_id, visit, stream, text, cut_bytes, seq)",
    )
    .bind(id)
    .bind(&node_ids)
    .bind(&visits)
    .bind(&streams)
    .bind(&texts)
    .bind(&cuts)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Execution `id`'s output in the order it was reported, only node `node_id`'s when given.
/// The caller has checked the execution is in scope.
pub(crate) async fn read(
    pool: &PgPool,
    id: Uuid,
    node_id: Option<&str>,
) -> Result<Vec<NodeOutput>, sqlx::Error> {
    let rows: Vec<OutputRow> = sqlx::query_as(
        "SELECT node_id, visit, stream, text, cut_bytes FROM execution_output \
         WHERE execution_id = $1 AND ($2::text IS NULL OR node_id = $2) ORDER BY seq",
    )
    .bind(id)
    .bind(node_id)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(NodeOutput::from).collect())
}
