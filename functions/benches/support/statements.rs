//! Where PostgreSQL's time goes during a benchmark's measured phase, statement by statement,
//! from `pg_stat_statements` when the server preloads it
//! (`RES_TEST_POSTGRES_OPTIONS="-c shared_preload_libraries=pg_stat_statements"`); without
//! it these say so once and do nothing, so a bench never depends on the extension.

use sqlx::PgPool;

/// Whether this server collects statement statistics.
async fn collected(pool: &PgPool) -> bool {
    let preloaded: String = sqlx::query_scalar("SHOW shared_preload_libraries")
        .fetch_one(pool)
        .await
        .unwrap_or_default();
    preloaded.contains("pg_stat_statements")
        && sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(pool)
            .await
            .is_ok()
}

/// Starts counting from zero: call when the measured phase starts.
pub async fn reset(pool: &PgPool) {
    if !collected(pool).await {
        println!("statement profile: pg_stat_statements is not preloaded; none taken");
        return;
    }
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(pool)
        .await
        .expect("reset the statement statistics");
}

#[derive(sqlx::FromRow)]
struct Row {
    calls: i64,
    total_ms: f64,
    /// Planning, when the server tracks it (`pg_stat_statements.track_planning`).
    plan_ms: f64,
    rows: i64,
    query: String,
}

/// Prints the statements that took the most time since [`reset`], with calls, total and
/// per-call time, and the share of all statements' time.
pub async fn report(pool: &PgPool, top: i64) {
    if !collected(pool).await {
        return;
    }
    let all: (i64, f64, f64) = sqlx::query_as(
        "SELECT sum(calls)::bigint, sum(total_exec_time), sum(total_plan_time) \
         FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(pool)
    .await
    .expect("statement totals");
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT calls, total_exec_time AS total_ms, total_plan_time AS plan_ms, rows, query \
         FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         ORDER BY total_exec_time DESC LIMIT $1",
    )
    .bind(top)
    .fetch_all(pool)
    .await
    .expect("statement statistics");
    println!(
        "statements: {} calls, {:.1} s executing and {:.1} s planning in all; the {top} dearest:",
        all.0,
        all.1 / 1_000.0,
        all.2 / 1_000.0
    );
    println!(
        "{:>8} {:>9} {:>9} {:>6} {:>9} {:>8}  statement",
        "calls", "total s", "ms/call", "share", "plan ms", "rows"
    );
    for row in rows {
        let text: String = row.query.split_whitespace().collect::<Vec<_>>().join(" ");
        let text: String = text.chars().take(110).collect();
        println!(
            "{:>8} {:>9.2} {:>9.3} {:>5.1}% {:>9.3} {:>8}  {text}",
            row.calls,
            row.total_ms / 1_000.0,
            row.total_ms / row.calls.max(1) as f64,
            100.0 * row.total_ms / all.1.max(f64::MIN_POSITIVE),
            row.plan_ms / row.calls.max(1) as f64,
            row.rows,
        );
    }
}

/// How the database's client connections spend the window, sampled every 200 ms until
/// `stop`: on average how many run a statement (`active`), wait for their client's next
/// statement inside a transaction (`idle in transaction`), or are free (`idle`). Printed
/// at the end; the sampler's own connection is left out.
pub async fn sample_activity(pool: PgPool, stop: tokio_util::sync::CancellationToken) {
    let mut sums: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    let mut samples = 0_i64;
    loop {
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
            () = stop.cancelled() => break,
        }
        let rows: Vec<(String, i64)> = sqlx::query_as(
            // What an active connection waits on, when it waits: a lock held by another
            // transaction shows as `Lock:…`, a client slow to send as `Client:ClientRead`.
            "SELECT CASE WHEN state = 'active' AND wait_event IS NOT NULL \
                         THEN 'active waiting on ' || wait_event_type || ':' || wait_event \
                         ELSE COALESCE(state, 'unknown') END, count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND backend_type = 'client backend' \
               AND pid <> pg_backend_pid() GROUP BY 1",
        )
        .fetch_all(&pool)
        .await
        .unwrap_or_default();
        samples += 1;
        for (state, count) in rows {
            *sums.entry(state).or_default() += count;
        }
    }
    let line: Vec<String> = sums
        .iter()
        .map(|(state, sum)| format!("{state} {:.2}", *sum as f64 / samples.max(1) as f64))
        .collect();
    println!(
        "database connections on average over {samples} samples: {}",
        line.join(", ")
    );
}
