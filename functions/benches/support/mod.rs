//! What the functions' benchmarks share: a seeded database (100 branches × 100 rules due
//! every second), `res-functions serve` as a child process, the claim → heartbeat →
//! set_NextRunTime cycle over HTTP, and percentile reports.

#![allow(dead_code, reason = "each bench uses a different part")]

pub mod generators;
pub mod kernel;
pub mod server_metrics;
pub mod sites;
pub mod statements;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use res_shared::wire::{
    Call, ClaimBatchRequest, ClaimRequest, HeartbeatBatchRequest, HeartbeatRequest,
    SetNextRunTimeBatchRequest, SetNextRunTimeRequest,
};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

pub const BRANCHES: i32 = 100;
pub const RULES_PER_BRANCH: i32 = 100;
pub const CLIENTS: usize = 8;
pub const CYCLE_SECONDS: u64 = 10;

/// A bench binary's `main`: `cargo test --benches` runs it too, so it measures only when
/// started as a benchmark.
pub fn main_when_benchmarking<F: std::future::Future<Output = ()>>(run: impl FnOnce() -> F) {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(run());
}

/// `res-functions serve` on a free port over `database_url`, with `args`; its base URL.
pub fn serve(database_url: &str, args: &[&str]) -> (Service, String) {
    let port = res_tests::processes::free_port();
    (
        serve_at(port, database_url, args),
        format!("http://127.0.0.1:{port}/functions/v1"),
    )
}

/// `res-functions serve` on `port` (shared with others when `args` has `--reuse-port`).
pub fn serve_at(port: u16, database_url: &str, args: &[&str]) -> Service {
    Service(
        Command::new(env!("CARGO_BIN_EXE_res-functions"))
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("DATABASE_URL", database_url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("serve"),
    )
}

/// Kills the service when the benchmark ends, however it ends.
pub struct Service(Child);

impl Service {
    /// The process id, for its CPU time.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub async fn wait_until_up(client: &reqwest::Client, base: &str) {
    for _ in 0..200 {
        if client
            .get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service did not come up");
}

pub async fn seed(pool: &PgPool) {
    let workflow = json!({
        "start_node": "detect",
        "nodes": {
            "detect": {"type": "detection", "action_template_id": "00000000-0000-0000-0000-000000000001"},
            "cooldown": {"type": "delay", "seconds": 600},
            "violation": {"type": "business", "action": "create_violation", "action_template_id": "00000000-0000-0000-0000-000000000002"},
            "alert": {"type": "business", "action": "notify", "action_template_id": "00000000-0000-0000-0000-000000000003"}
        },
        "edges": [
            {"from": "detect", "to": "violation", "condition": "feature_result == 'detection_complete'"},
            {"from": "violation", "to": "alert", "condition": "is_success"}
        ],
        "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
    });
    let statements = [
        "INSERT INTO brands (name) VALUES ('Bench brand')",
        "INSERT INTO branches (brand_id, name) SELECT b.id, 'Branch ' || g FROM brands b, generate_series(1, 100) g",
        "INSERT INTO rules (name, status, cron_expression) SELECT 'Rule ' || g, 'active', '* * * * * *' FROM generate_series(1, 100) g",
        "INSERT INTO action_templates (name, kind, config) VALUES ('Queue detector', 'detection', '{\"executor\": \"http\", \"url\": \"http://127.0.0.1:8500/detect\", \"timeout_seconds\": 60}')",
        "INSERT INTO branch_rules (branch_id, rule_id, next_run_time, operation_time_from, operation_time_to) \
         SELECT b.id, r.id, now() - interval '1 minute', NULL, NULL FROM branches b CROSS JOIN rules r",
        "INSERT INTO action_details (branch_rule_id, action_template_id, config) \
         SELECT br.id, t.id, json_build_object('camera_ids', json_build_array('cam-' || left(br.id::text, 8), 'cam-2'), \
                'stream_url', 'rtsp://10.0.0.7:554/stream/' || left(br.id::text, 8), 'parameters', json_build_object('threshold', 8)) \
         FROM branch_rules br, action_templates t",
    ];
    for statement in statements {
        sqlx::query(statement).execute(pool).await.expect("seed");
    }
    sqlx::query("INSERT INTO action_template_connections (rule_id, workflow_config) SELECT id, $1 FROM rules")
        .bind(&workflow)
        .execute(pool)
        .await
        .expect("connections");
    // A fleet's database has a history of runs, analyzed. Without one, the first
    // statements plan against an empty executions table, and a connection's cached
    // generic plan (a sequential scan there) outlives the table's growth until autovacuum
    // analyzes it, a minute in: longer than the claim phases run.
    sqlx::query(
        "INSERT INTO executions (id, root_id, branch_rule_id, runner_id, status, claim_token, \
                                 lease_seconds, lease_expires_at, scheduled_at, started_at, \
                                 finished_at) \
         SELECT h.id, h.id, h.rule, 'bench-history', 'completed', 'history', 60, h.at, h.at, \
                h.at, h.at \
         FROM (SELECT gen_random_uuid() AS id, br.id AS rule, \
                      now() - make_interval(hours => g) AS at \
               FROM branch_rules br, generate_series(1, 3) g) h",
    )
    .execute(pool)
    .await
    .expect("history");
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
}

/// Runs the HTTP cycle with `CLIENTS` clients for `CYCLE_SECONDS`; each client owns a
/// slice of the rules, so claims never collide and each rule is due again (its cron fires
/// every second) by the time its client comes back to it. Returns the cycles done.
pub async fn cycle_load(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    pool: &PgPool,
) -> (u64, Vec<Duration>) {
    load_in(client, base, token, pool, None).await
}

/// The cycle through the batch functions with `batch` rules per request (1 included);
/// returns the rules that went through the whole cycle and each cycle's latency.
pub async fn batched_cycle_load(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    pool: &PgPool,
    batch: usize,
) -> (u64, Vec<Duration>) {
    load_in(client, base, token, pool, Some(batch)).await
}

/// The cycle through the single functions (`None`) or in batches of `n` (`Some(n)`).
async fn load_in(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    pool: &PgPool,
    batches: Option<usize>,
) -> (u64, Vec<Duration>) {
    let batch = batches.unwrap_or(1);
    let rules: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branch_rules ORDER BY id")
        .fetch_all(pool)
        .await
        .expect("rules");
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, slice) in rules
        .chunks(rules.len() / CLIENTS)
        .take(CLIENTS)
        .enumerate()
    {
        let (client, base, token) = (client.clone(), base.to_owned(), token.to_owned());
        let (stop, done, slice) = (stop.clone(), done.clone(), slice.to_vec());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut next = 0;
            while !stop.load(Ordering::Relaxed) {
                let picked: Vec<Uuid> = (next..next + batch)
                    .map(|i| slice[i % slice.len()])
                    .collect();
                next += batch;
                let started = Instant::now();
                let through = match batches {
                    None => u64::from(one_cycle(&client, &base, &token, picked[0], index).await),
                    Some(_) => one_batch_cycle(&client, &base, &token, &picked, index).await,
                };
                if through > 0 {
                    done.fetch_add(through, Ordering::Relaxed);
                    latencies.push(started.elapsed());
                }
            }
            latencies
        });
    }
    tokio::time::sleep(Duration::from_secs(CYCLE_SECONDS)).await;
    stop.store(true, Ordering::Relaxed);
    let latencies = tasks.join_all().await.into_iter().flatten().collect();
    (done.load(Ordering::Relaxed), latencies)
}

/// Claims `rules` in one batch, beats the claimed ones in one, reports them in one;
/// returns how many went through all three.
pub async fn one_batch_cycle(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    rules: &[Uuid],
    runner: usize,
) -> u64 {
    let post = |function: &str, body: Value| {
        let request = client
            .post(format!("{base}/{function}"))
            .bearer_auth(token)
            .json(&body)
            .send();
        async move {
            let response = request.await.ok().filter(|r| r.status() == 200)?;
            let answer: Value = response.json().await.ok()?;
            answer["items"].as_array().cloned()
        }
    };
    let Some(claims) = post(
        ClaimBatchRequest::NAME,
        json!({"branch_rule_ids": rules, "runner_id": format!("bench-{runner}")}),
    )
    .await
    else {
        return 0;
    };
    let claimed: Vec<(Uuid, Value, Value)> = rules
        .iter()
        .zip(&claims)
        .filter(|(_, item)| item["status"] == 200)
        .map(|(rule, item)| {
            let body = &item["body"];
            (
                *rule,
                body["execution_id"].clone(),
                body["claim_token"].clone(),
            )
        })
        .collect();
    if claimed.is_empty() {
        return 0;
    }
    let beats: Vec<Value> = claimed
        .iter()
        .map(|(_, execution, token)| json!({"execution_id": execution, "claim_token": token}))
        .collect();
    let Some(beaten) = post(HeartbeatBatchRequest::NAME, json!({"beats": beats})).await else {
        return 0;
    };
    let reports: Vec<Value> = claimed
        .iter()
        .zip(&beaten)
        .filter(|(_, item)| item["status"] == 200)
        .map(|((rule, execution, token), _)| {
            json!({"branch_rule_id": rule, "is_last_run_failed": false,
                   "execution_id": execution, "claim_token": token})
        })
        .collect();
    let Some(reported) = post(
        SetNextRunTimeBatchRequest::NAME,
        json!({"reports": reports}),
    )
    .await
    else {
        return 0;
    };
    reported.iter().filter(|item| item["status"] == 200).count() as u64
}

pub async fn one_cycle(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    rule: Uuid,
    runner: usize,
) -> bool {
    let post = |function: &str, body: Value| {
        client
            .post(format!("{base}/{function}"))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let Ok(claim) = post(
        ClaimRequest::NAME,
        json!({"branch_rule_id": rule, "runner_id": format!("bench-{runner}")}),
    )
    .await
    else {
        return false;
    };
    if claim.status() != 200 {
        return false;
    }
    let Ok(claim) = claim.json::<Value>().await else {
        return false;
    };
    let (execution, claim_token) = (claim["execution_id"].clone(), claim["claim_token"].clone());
    let beat = post(
        HeartbeatRequest::NAME,
        json!({"execution_id": execution, "claim_token": claim_token}),
    )
    .await;
    if !beat.is_ok_and(|r| r.status() == 200) {
        return false;
    }
    let report = post(
        SetNextRunTimeRequest::NAME,
        json!({"branch_rule_id": rule, "is_last_run_failed": false, "execution_id": execution, "claim_token": claim_token}),
    )
    .await;
    report.is_ok_and(|r| r.status() == 200)
}

pub fn report(label: &str, samples: &mut [Duration]) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "{label}: n={} p50={:.2?} p90={:.2?} p99={:.2?} max={:.2?}",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}
