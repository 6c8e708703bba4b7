//! `res-runner run` with a 10,000-rule plan against real functions: memory, idle CPU, and
//! dispatch lag (due → claimed) for 200 rules falling due over 20 s, beside what a fixed
//! 60 s poll would give for the same due times.
//!
//! `cargo bench -p res-runner --bench daemon` (about 2 minutes).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use res_tests::functions::TestApp;
use serde_json::json;
use uuid::Uuid;

const BRANCHES: usize = 100;
const RULES_PER_BRANCH: usize = 100;
const LAG_RULES: usize = 200;
const IDLE_SECONDS: u64 = 30;

fn main() {
    // `cargo test --benches` runs this binary too; only measure when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    res_tests::functions::install_tls();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(run());
}

async fn seed(app: &TestApp) -> Vec<Uuid> {
    let pool = &app.pool;
    let template: Uuid = sqlx::query_scalar(
        "INSERT INTO action_templates (name, kind, config) VALUES ('Instant detector', 'detection', $1) RETURNING id",
    )
    .bind(json!({"executor": "command", "program": "sh", "args": ["-c", "cat >/dev/null; echo '{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 0}'"]}))
    .fetch_one(pool)
    .await
    .expect("template");
    let workflow = json!({
        "start_node": "detect",
        "nodes": {"detect": {"type": "detection", "action_template_id": template}},
        "edges": [],
        "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
    });
    for statement in [
        "INSERT INTO brands (name, timezone) VALUES ('Bench brand', 'Asia/Riyadh')",
        "INSERT INTO branches (brand_id, name) SELECT b.id, 'Branch ' || g FROM brands b, generate_series(1, 100) g",
        "INSERT INTO rules (name, status, cron_expression) SELECT 'Rule ' || g, 'active', '0 3 * * *' FROM generate_series(1, 100) g",
        "INSERT INTO branch_rules (branch_id, rule_id, next_run_time, operation_time_from, operation_time_to) \
         SELECT b.id, r.id, now() + interval '1 day', NULL, NULL FROM branches b CROSS JOIN rules r",
        "INSERT INTO action_details (branch_rule_id, action_template_id, config) \
         SELECT br.id, t.id, json_build_object('camera_ids', json_build_array('cam-' || left(br.id::text, 8), 'cam-2'), \
                'stream_url', 'rtsp://10.0.0.7:554/stream/' || left(br.id::text, 8)) \
         FROM branch_rules br, action_templates t",
    ] {
        sqlx::query(statement).execute(pool).await.expect("seed");
    }
    sqlx::query("INSERT INTO action_template_connections (rule_id, workflow_config) SELECT id, $1 FROM rules")
        .bind(&workflow)
        .execute(pool)
        .await
        .expect("connections");
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
    sqlx::query_scalar("SELECT id FROM branches")
        .fetch_all(pool)
        .await
        .expect("branches")
}

fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU ticks of a process (1/100 s on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of stat; after the name, state is index 0, so utime is 11.
    fields
        .get(11)
        .and_then(|u| u.parse::<u64>().ok())
        .unwrap_or(0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
}

async fn status(port: u16) -> Option<serde_json::Value> {
    reqwest::get(format!("http://127.0.0.1:{port}/status"))
        .await
        .ok()?
        .json()
        .await
        .ok()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn run() {
    let app = TestApp::start().await;
    let started = Instant::now();
    let branches = seed(&app).await;
    println!(
        "seeded {} branch rules in {:?}",
        BRANCHES * RULES_PER_BRANCH,
        started.elapsed()
    );
    let token = app.runner_token(&branches).await;
    let dir = std::env::temp_dir().join(format!("res-daemon-bench-{}", Uuid::new_v4()));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_res-runner"))
        .arg("run")
        .env(
            "RES_RUNNER_FUNCTIONS_URL",
            format!("{}/functions/v1", app.base),
        )
        .env("RES_RUNNER_TOKEN", &token)
        .env("RES_RUNNER_RUNNER_ID", "bench")
        .env("RES_RUNNER_STATE_DIR", &dir)
        .env("RES_RUNNER_STATUS_LISTEN", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("res-runner starts");
    let pid = child.id();
    let loading = Instant::now();
    loop {
        if status(port).await.is_some_and(|s| s["workflows"] == 10_000) {
            break;
        }
        assert!(
            loading.elapsed() < Duration::from_secs(120),
            "the plan never loaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "plan of 10,000 rules loaded {:?} after start",
        loading.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;

    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(IDLE_SECONDS)).await;
    let idle_ticks = cpu_ticks(pid) - before;
    println!(
        "idle: {:.2}% of one core over {IDLE_SECONDS} s ({idle_ticks} ticks; includes plan deltas every 20 s)",
        idle_ticks as f64 / (IDLE_SECONDS as f64 * 100.0) * 100.0
    );
    println!(
        "memory: VmRSS {} KiB, VmHWM (peak) {} KiB",
        proc_status(pid, "VmRSS:"),
        proc_status(pid, "VmHWM:")
    );

    // Dispatch lag: 200 rules fall due over 20 s, after the next plan refresh has them.
    let lag_rules: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "WITH picked AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM branch_rules LIMIT $1) \
         UPDATE branch_rules br SET next_run_time = now() + interval '25 seconds' + picked.n * interval '100 milliseconds' \
         FROM picked WHERE br.id = picked.id RETURNING br.id, br.next_run_time",
    )
    .bind(LAG_RULES as i64)
    .fetch_all(&app.pool)
    .await
    .expect("due rules");
    let last_due = lag_rules.iter().map(|r| r.1).max().expect("rules");
    let wait_until = last_due + TimeDelta::seconds(15);
    while Utc::now() < wait_until {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let claimed: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT branch_rule_id, scheduled_at FROM executions WHERE runner_id = 'bench'",
    )
    .fetch_all(&app.pool)
    .await
    .expect("executions");
    let mut lags: Vec<f64> = lag_rules
        .iter()
        .filter_map(|(id, due)| {
            claimed
                .iter()
                .find(|(rule, _)| rule == id)
                .map(|(_, at)| (*at - *due).num_milliseconds() as f64 / 1000.0)
        })
        .collect();
    lags.sort_by(f64::total_cmp);
    println!(
        "dispatch lag (due → claimed, database clock), {} of {LAG_RULES} rules claimed:",
        lags.len()
    );
    if !lags.is_empty() {
        println!(
            "  p50 {:.3} s, p99 {:.3} s, max {:.3} s",
            percentile(&lags, 0.5),
            percentile(&lags, 0.99),
            lags[lags.len() - 1]
        );
    }
    // The same due times under a fixed 60 s poll whose phase is the runner's start.
    let poll_origin = Utc::now() - TimeDelta::from_std(loading.elapsed()).unwrap_or_default();
    let mut polled: Vec<f64> = lag_rules
        .iter()
        .map(|(_, due)| {
            let since = (*due - poll_origin).num_milliseconds() as f64 / 1000.0;
            60.0 - since.rem_euclid(60.0)
        })
        .collect();
    polled.sort_by(f64::total_cmp);
    println!(
        "  fixed 60 s poll, same due times (model): p50 {:.1} s, p99 {:.1} s, max {:.1} s",
        percentile(&polled, 0.5),
        percentile(&polled, 0.99),
        polled[polled.len() - 1]
    );
    println!(
        "memory after the runs: VmRSS {} KiB, VmHWM {} KiB",
        proc_status(pid, "VmRSS:"),
        proc_status(pid, "VmHWM:")
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
}
