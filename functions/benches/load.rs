//! Load benchmark of the functions over real HTTP, against a throwaway PostgreSQL:
//! the full plan and an unchanged delta for a runner scoped to 10,000 rules, and the
//! claim → heartbeat → set_NextRunTime cycle with 8 concurrent clients, beside the same
//! cycle as raw SQL through pgbench. Run with `cargo bench -p res-functions --bench load`;
//! results go to docs/benchmarks.md.

mod support;

use std::process::Command;
use std::time::Instant;

use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_shared::wire::{PLAN_FORMAT_COLUMNS, PLAN_FORMAT_SHARED, PlanResponse};
use res_tests::postgres::server;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use support::{
    BRANCHES, CLIENTS, CYCLE_SECONDS, RULES_PER_BRANCH, batched_cycle_load, cycle_load, report,
    seed, wait_until_up,
};

const FULL_PLAN_REQUESTS: usize = 40;
const DELTA_REQUESTS: usize = 500;
/// Rules per request in the batched cycle: one (a rule due alone, most of a fleet's), a
/// site's due rules at a storm's second, and more.
const BATCHES: [usize; 3] = [1, 10, 50];

fn main() {
    support::main_when_benchmarking(run);
}

async fn run() {
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    let seeding = Instant::now();
    seed(&pool).await;
    println!(
        "seeded {} branch rules in {:?}",
        BRANCHES * RULES_PER_BRANCH,
        seeding.elapsed()
    );
    let branches: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branches")
        .fetch_all(&pool)
        .await
        .expect("branches");
    let token = generate_token();
    let key_id = db::api_keys::insert(
        &pool,
        "bench runner",
        &hash_token(&token),
        Role::Runner,
        &res_functions::db::api_keys::KeyScope {
            branch_ids: branches.clone(),
            ..Default::default()
        },
    )
    .await
    .expect("key");

    let metrics_bind = format!("127.0.0.1:{}", res_tests::processes::free_port());
    let metrics_url = format!("http://{metrics_bind}/metrics");
    let (_service, base) = support::serve(&database.url, &["--metrics-bind", &metrics_bind]);
    res_tests::functions::install_tls();
    let client = reqwest::Client::builder()
        .no_gzip()
        .build()
        .expect("client");
    wait_until_up(&client, &base).await;

    // Full plan: both formats, plain and gzipped, side by side.
    let plan_url = format!("{base}/get-execution-plan-v2");
    let first_format = json!({"runner_id": "bench"});
    let shared_format = json!({"runner_id": "bench", "format": PLAN_FORMAT_SHARED});
    let (mut plain, plain_bytes, cursor) =
        full_plans(&client, &plan_url, &token, &first_format, false).await;
    let (mut gzipped, gzipped_bytes, _) =
        full_plans(&client, &plan_url, &token, &first_format, true).await;
    let (mut shared, shared_bytes, _) =
        full_plans(&client, &plan_url, &token, &shared_format, false).await;
    let (mut shared_gzipped, shared_gzipped_bytes, _) =
        full_plans(&client, &plan_url, &token, &shared_format, true).await;
    let columns_format = json!({"runner_id": "bench", "format": PLAN_FORMAT_COLUMNS});
    let (mut columns, columns_bytes, _) =
        full_plans(&client, &plan_url, &token, &columns_format, false).await;
    let (mut columns_gzipped, columns_gzipped_bytes, _) =
        full_plans(&client, &plan_url, &token, &columns_format, true).await;
    // Unchanged delta.
    let delta_body = json!({"runner_id": "bench", "since": cursor});
    let mut deltas = Vec::new();
    for _ in 0..DELTA_REQUESTS {
        let started = Instant::now();
        let response = client
            .post(&plan_url)
            .bearer_auth(&token)
            .json(&delta_body)
            .send()
            .await
            .expect("delta");
        let plan: Value = response.json().await.expect("JSON");
        deltas.push(started.elapsed());
        assert_eq!(plan["full"], false);
        assert_eq!(plan["workflows"].as_array().map(Vec::len), Some(0));
    }
    report("full plan (10,000 rules), identity", &mut plain.latencies);
    report("full plan (10,000 rules), gzip", &mut gzipped.latencies);
    report(
        "full plan (10,000 rules), format 2, identity",
        &mut shared.latencies,
    );
    report(
        "full plan (10,000 rules), format 2, gzip",
        &mut shared_gzipped.latencies,
    );
    report(
        "full plan (10,000 rules), format 3, identity",
        &mut columns.latencies,
    );
    report(
        "full plan (10,000 rules), format 3, gzip",
        &mut columns_gzipped.latencies,
    );
    for (format, decodes) in [
        (1, &mut plain.decodes),
        (2, &mut shared.decodes),
        (3, &mut columns.decodes),
    ] {
        report(&format!("reading the full plan, format {format}"), decodes);
    }
    report("unchanged delta", &mut deltas);
    println!("full plan payload: {plain_bytes} bytes, {gzipped_bytes} bytes gzipped");
    println!(
        "full plan payload, format 2: {shared_bytes} bytes ({:.2} of format 1), {shared_gzipped_bytes} bytes gzipped ({:.2})",
        shared_bytes as f64 / plain_bytes as f64,
        shared_gzipped_bytes as f64 / gzipped_bytes as f64
    );
    println!(
        "full plan payload, format 3: {columns_bytes} bytes ({:.2} of format 1), {columns_gzipped_bytes} bytes gzipped ({:.2})",
        columns_bytes as f64 / plain_bytes as f64,
        columns_gzipped_bytes as f64 / gzipped_bytes as f64
    );

    let (cycles, mut latencies) = cycle_load(&client, &base, &token, &pool).await;
    let rate = cycles as f64 / CYCLE_SECONDS as f64;
    println!(
        "claim→heartbeat→set_NextRunTime over HTTP, {CLIENTS} clients: {cycles} cycles in {CYCLE_SECONDS} s = {rate:.0}/s"
    );
    report("one cycle (3 requests)", &mut latencies);
    let mut batched = Vec::new();
    for batch in BATCHES {
        // Each function's time inside serve, and each statement's, tell a slow batch's
        // part from the generator's.
        support::statements::reset(&pool).await;
        let inside_before = support::server_metrics::scrape(&metrics_url).await;
        let (rules, mut latencies) = batched_cycle_load(&client, &base, &token, &pool, batch).await;
        let inside_after = support::server_metrics::scrape(&metrics_url).await;
        println!("batches of {batch}, inside serve:");
        support::server_metrics::report(&inside_before, &inside_after);
        support::statements::report(&pool, 8).await;
        let rate = rules as f64 / CYCLE_SECONDS as f64;
        println!(
            "the cycle in batches of {batch} rules over HTTP, {CLIENTS} clients: {rules} rules in {CYCLE_SECONDS} s = {rate:.0} rules/s"
        );
        report(
            &format!("one batch cycle of {batch} (3 requests)"),
            &mut latencies,
        );
        batched.push((batch, rate));
    }
    // The comparator is the point of the figure: if it cannot run, the benchmark fails.
    let tps = pgbench_cycle(database.name(), key_id, &branches)
        .unwrap_or_else(|error| panic!("the raw-SQL comparator failed: {error}"));
    println!(
        "same cycle as raw SQL through pgbench, {CLIENTS} clients: {tps:.0}/s (HTTP/SQL = {:.2})",
        rate / tps
    );
    if let Some((_, one)) = batched.iter().find(|(batch, _)| *batch == 1) {
        println!(
            "a rule alone, batch of one / single calls: {one:.0} / {rate:.0} = {:.2}",
            one / rate
        );
    }
    for (batch, rate) in batched {
        println!(
            "batches of {batch} over HTTP / per-rule raw SQL: {rate:.0} / {tps:.0} = {:.2}",
            rate / tps
        );
    }
}

/// A series of full plan requests: how long each took to answer and, read as a runner reads
/// it (identity only), to decode.
struct PlanTimes {
    latencies: Vec<std::time::Duration>,
    decodes: Vec<std::time::Duration>,
}

/// `FULL_PLAN_REQUESTS` full plans asked with `body` (gzip or identity): their times, the
/// body's size as sent and a cursor.
async fn full_plans(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: &Value,
    gzip: bool,
) -> (PlanTimes, usize, String) {
    let mut times = PlanTimes {
        latencies: Vec::new(),
        decodes: Vec::new(),
    };
    let (mut size, mut cursor) = (0, String::new());
    for _ in 0..FULL_PLAN_REQUESTS {
        let started = Instant::now();
        let mut request = client.post(url).bearer_auth(token).json(body);
        if gzip {
            request = request.header("Accept-Encoding", "gzip");
        }
        let response = request.send().await.expect("plan");
        let bytes = response.bytes().await.expect("body");
        times.latencies.push(started.elapsed());
        size = bytes.len();
        if !gzip {
            // The format asked for, not a fallback.
            if let Some(format) = body["format"].as_u64() {
                let head = format!("{{\"format\":{format},");
                assert!(bytes.starts_with(head.as_bytes()), "not format {format}");
            }
            // Read as a runner reads it: the entries are all there.
            let decoding = Instant::now();
            let plan: PlanResponse = serde_json::from_slice(&bytes).expect("a plan");
            times.decodes.push(decoding.elapsed());
            assert_eq!(plan.workflows.len(), (BRANCHES * RULES_PER_BRANCH) as usize);
            assert!(plan.workflows.iter().all(|w| w.workflow_config.is_some()));
            cursor = plan.cursor;
        }
    }
    (times, size, cursor)
}

/// The same three steps as SQL in one pgbench script (`cycle.sql`), as the runner key
/// `key_id` scoped to `branches`; returns transactions per second.
fn pgbench_cycle(database: &str, key_id: Uuid, branches: &[Uuid]) -> Result<f64, String> {
    let (socket, port) = server()
        .socket()
        .ok_or("pgbench needs the throwaway server's socket (unset DATABASE_URL)")?;
    let script = std::env::temp_dir().join(format!("res-cycle-{}.sql", std::process::id()));
    std::fs::write(&script, include_str!("cycle.sql"))
        .map_err(|e| format!("cannot write the pgbench script: {e}"))?;
    let url = server().url(database);
    let setup = Command::new("psql")
        .arg(&url)
        .args(["-q", "-c", "CREATE TABLE bench_rules AS SELECT row_number() OVER (ORDER BY id) AS n, id FROM branch_rules; \
                       CREATE UNIQUE INDEX ON bench_rules (n); \
                       UPDATE executions SET status = 'completed' WHERE status IN ('scheduled', 'running');"])
        .status()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if !setup.success() {
        return Err("psql could not prepare the pgbench tables".into());
    }
    let output = Command::new("pgbench")
        .args([
            "-n",
            "-M",
            "prepared",
            "-c",
            &CLIENTS.to_string(),
            "-j",
            "2",
            "-T",
            &CYCLE_SECONDS.to_string(),
            "-U",
            "postgres",
            "-D",
        ])
        .arg(format!("key_id={key_id}"))
        .arg("-D")
        .arg(format!(
            "branches={{{}}}",
            branches
                .iter()
                .map(Uuid::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ))
        .arg("-h")
        .arg(socket)
        .args(["-p", &port.to_string(), "-f"])
        .arg(&script)
        .arg(database)
        .output()
        .map_err(|e| format!("cannot run pgbench: {e}"))?;
    let _ = std::fs::remove_file(&script);
    let text = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // pgbench exits 0 even when every transaction of a client aborted; a failed transaction
    // count is a broken comparator too.
    let failed = text
        .lines()
        .find(|line| line.starts_with("number of failed transactions"))
        .and_then(|line| line.split(':').nth(1))
        .and_then(|n| n.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    if !output.status.success() || failed > 0 || stderr.contains("ERROR") {
        return Err(format!(
            "pgbench failed ({failed} failed transactions): {text}{stderr}"
        ));
    }
    text.lines()
        .find(|line| line.starts_with("tps = "))
        .and_then(|line| line.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no tps in pgbench's output: {text}"))
}
