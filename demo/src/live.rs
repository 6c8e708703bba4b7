//! A line per finished execution, as it happens: when, where, which rule, how it ended,
//! how long it took, and when it runs next.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// finished, branch, rule, status, seconds, next run, error, offline, degenerate.
type Row = (
    DateTime<Utc>,
    String,
    String,
    String,
    Option<f64>,
    Option<DateTime<Utc>>,
    Option<String>,
    bool,
    bool,
);

/// Prints executions that finished after `since`; returns the new high-water mark.
pub async fn print_new(pool: &PgPool, since: DateTime<Utc>) -> anyhow::Result<DateTime<Utc>> {
    let rows: Vec<Row> =
        sqlx::query_as(
            "SELECT e.finished_at, b.name, r.name, e.status, \
                    EXTRACT(EPOCH FROM (e.finished_at - e.started_at))::float8, br.next_run_time, e.error, e.offline, \
                    COALESCE((e.report->>'degenerate')::boolean, false) \
             FROM executions e \
             JOIN branch_rules br ON br.id = e.branch_rule_id \
             JOIN branches b ON b.id = br.branch_id \
             JOIN rules r ON r.id = br.rule_id \
             WHERE e.finished_at > $1 ORDER BY e.finished_at",
        )
        .bind(since)
        .fetch_all(pool)
        .await?;
    let mut latest = since;
    for (finished, branch, rule, status, seconds, next, error, offline, degenerate) in rows {
        latest = latest.max(finished);
        let next = next.map_or_else(|| "—".to_owned(), |t| t.format("%H:%M:%S").to_string());
        let took = seconds.map_or_else(|| "—".to_owned(), |s| format!("{s:.1} s"));
        let mut line = format!(
            "{}  {:<36} {:<26} {:>7}  next {}",
            finished.format("%H:%M:%S"),
            format!("{branch} / {rule}"),
            status,
            took,
            next
        );
        if offline {
            line.push_str("  (offline)");
        }
        if degenerate {
            line.push_str("  (degenerate schedule: the cron never fires in the window)");
        }
        if let Some(error) = error {
            line.push_str(&format!("  {}", error.chars().take(80).collect::<String>()));
        }
        println!("{line}");
    }
    Ok(latest)
}
