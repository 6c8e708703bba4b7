//! Load benchmark of the functions over real HTTP, against a throwaway PostgreSQL:
//! the full plan and an unchanged delta for a runner scoped to 10,000 rules, and the
//! claim → heartbeat → set_NextRunTime cycle with 8 concurrent clients, beside the same
//! cycle as raw SQL through pgbench. Run with `cargo bench -p res-functions --bench load`;
//! results go to docs/benchmarks.md.

use res_shared::wire::{Call, ClaimRequest, HeartbeatRequest, SetNextRunTimeRequest};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_tests::postgres::server;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

const BRANCHES: i32 = 100;
const RULES_PER_BRANCH: i32 = 100;
const FULL_PLAN_REQUESTS: usize = 40;
const DELTA_REQUESTS: usize = 500;
const CLIENTS: usize = 8;
const CYCLE_SECONDS: u64 = 10;

fn main() {
    // `cargo test --benches` runs this binary too; only measure when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(run());
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
    db::api_keys::insert(
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

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let _service = Service(
        Command::new(env!("CARGO_BIN_EXE_res-functions"))
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .env("DATABASE_URL", &database.url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("serve"),
    );
    let base = format!("http://127.0.0.1:{port}/functions/v1");
    res_tests::functions::install_tls();
    let client = reqwest::Client::builder()
        .no_gzip()
        .build()
        .expect("client");
    wait_until_up(&client, &base).await;

    // Full plan, plain and gzipped.
    let plan_url = format!("{base}/get-execution-plan-v2");
    let body = json!({"runner_id": "bench"});
    let mut plain = Vec::new();
    let mut sizes = (0, 0);
    let mut cursor = String::new();
    for _ in 0..FULL_PLAN_REQUESTS {
        let started = Instant::now();
        let response = client
            .post(&plan_url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .expect("plan");
        let bytes = response.bytes().await.expect("body");
        plain.push(started.elapsed());
        sizes.0 = bytes.len();
        let plan: Value = serde_json::from_slice(&bytes).expect("JSON");
        assert_eq!(
            plan["workflows"].as_array().map(Vec::len),
            Some((BRANCHES * RULES_PER_BRANCH) as usize)
        );
        cursor = plan["cursor"].as_str().expect("cursor").to_owned();
    }
    let mut gzipped = Vec::new();
    for _ in 0..FULL_PLAN_REQUESTS {
        let started = Instant::now();
        let response = client
            .post(&plan_url)
            .bearer_auth(&token)
            .header("accept-encoding", "gzip")
            .json(&body)
            .send()
            .await
            .expect("plan");
        let bytes = response.bytes().await.expect("body");
        gzipped.push(started.elapsed());
        sizes.1 = bytes.len();
    }
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
    report("full plan (10,000 rules), identity", &mut plain);
    report("full plan (10,000 rules), gzip", &mut gzipped);
    report("unchanged delta", &mut deltas);
    println!(
        "full plan payload: {} bytes, {} bytes gzipped",
        sizes.0, sizes.1
    );

    let (cycles, mut latencies) = cycle_load(&client, &base, &token, &pool).await;
    let rate = cycles as f64 / CYCLE_SECONDS as f64;
    println!(
        "claim→heartbeat→set_NextRunTime over HTTP, {CLIENTS} clients: {cycles} cycles in {CYCLE_SECONDS} s = {rate:.0}/s"
    );
    report("one cycle (3 requests)", &mut latencies);
    // The comparator is the point of the figure: if it cannot run, the benchmark fails.
    let tps = pgbench_cycle(database.name())
        .unwrap_or_else(|error| panic!("the raw-SQL comparator failed: {error}"));
    println!(
        "same cycle as raw SQL through pgbench, {CLIENTS} clients: {tps:.0}/s (HTTP/SQL = {:.2})",
        rate / tps
    );
}

/// Kills the service when the benchmark ends, however it ends.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_until_up(client: &reqwest::Client, base: &str) {
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

async fn seed(pool: &PgPool) {
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
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
}

/// Runs the HTTP cycle with `CLIENTS` clients for `CYCLE_SECONDS`; each client owns a
/// slice of the rules, so claims never collide and each rule is due again (its cron fires
/// every second) by the time its client comes back to it.
async fn cycle_load(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    pool: &PgPool,
) -> (u64, Vec<Duration>) {
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
                let rule = slice[next % slice.len()];
                next += 1;
                let started = Instant::now();
                if one_cycle(&client, &base, &token, rule, index).await {
                    done.fetch_add(1, Ordering::Relaxed);
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

async fn one_cycle(
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

/// The same three steps as SQL in one pgbench script; returns transactions per second.
fn pgbench_cycle(database: &str) -> Result<f64, String> {
    let (socket, port) = server()
        .socket()
        .ok_or("pgbench needs the throwaway server's socket (unset DATABASE_URL)")?;
    let script = std::env::temp_dir().join(format!("res-cycle-{}.sql", std::process::id()));
    std::fs::write(
        &script,
        "\\set n random(1, 1250) + :client_id * 1250\n\
         BEGIN;\n\
         SELECT id AS rule FROM bench_rules WHERE n = :n \\gset\n\
         SELECT br.id FROM branch_rules br JOIN branches b ON b.id = br.branch_id JOIN brands bd ON bd.id = b.brand_id \
           JOIN rules r ON r.id = br.rule_id WHERE br.id = :rule FOR NO KEY UPDATE OF br;\n\
         SELECT id FROM executions WHERE branch_rule_id = :rule ORDER BY scheduled_at DESC LIMIT 1 FOR NO KEY UPDATE;\n\
         INSERT INTO executions (id, root_id, branch_rule_id, runner_id, status, claim_token, lease_seconds, lease_expires_at) \
           SELECT g, g, :rule, 'pgbench', 'scheduled', md5(random()::text), 60, now() + interval '60 seconds' \
           FROM gen_random_uuid() g RETURNING id AS execution \\gset\n\
         UPDATE branch_rules SET is_currently_running = true WHERE id = :rule;\n\
         COMMIT;\n\
         UPDATE executions SET lease_expires_at = now() + interval '60 seconds', status = 'running', started_at = now() WHERE id = :execution;\n\
         BEGIN;\n\
         SELECT id FROM branch_rules WHERE id = :rule FOR NO KEY UPDATE;\n\
         SELECT id FROM executions WHERE id = :execution FOR NO KEY UPDATE;\n\
         UPDATE branch_rules SET is_currently_running = false, last_run_time = now(), run_count = run_count + 1, \
           next_run_time = now() + interval '1 second' WHERE id = :rule;\n\
         UPDATE executions SET status = 'completed', finished_at = now(), report = '{}' WHERE id = :execution;\n\
         COMMIT;\n",
    )
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
        ])
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

fn report(label: &str, samples: &mut [Duration]) {
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
