//! Changes reach the site: N sites hold plan requests open (`wait_seconds` 20) against one
//! `res-functions serve`. The bench commits a change to one site's rule at a time and
//! measures from just before the commit to that site's answer; measures what an idle site
//! costs polling every 20 s and waiting 20, 50 (serve's default) and 240 s (res-runner's
//! ask), side by side — requests and CPU-ms (PostgreSQL + functions) per site per hour; and,
//! with a real `res-runner`, measures Run now (the operator's call) → its detector started.
//!
//! `cargo build --release -p res-runner && cargo bench -p res-functions --bench wake`
//! (`-- --sites N`, default 1,000).

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::{Call, PlanRequest, RunNowRequest};
use res_tests::functions::{RuleSpec, Seed};
use res_tests::postgres::server;
use res_tests::processes::{Runner, RunnerSpec, binary};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use support::sites::cpu_split;

const WAIT_SECONDS: u32 = 20;
const CHANGES: usize = 200;
const RUNS: usize = 30;
/// Each idle mode is measured this long, after its sites' first requests.
const IDLE: Duration = Duration::from_secs(90);
/// Idle modes, as (wait, keep-alive): a wait of 0 polls every 20 s (Lambda, or a runner
/// with waiting off); keep-alive asks the waiting answer for a space every 10 s, as
/// res-runner 0.3.0 does (`res-keepalive: 1`), side by side with the same wait without.
const IDLE_MODES: [(u32, bool); 5] = [
    (0, false),
    (20, false),
    (50, false),
    (240, false),
    (240, true),
];
/// What res-runner says about itself with every plan request.
fn health() -> Value {
    json!({"version": "bench", "outbox_depth": 0, "runs_offline": true})
}

fn main() {
    support::main_when_benchmarking(run);
}

/// One simulated site: its key, branch and rule.
#[derive(Clone)]
struct Site {
    token: String,
    rule: Uuid,
}

/// When each site last received an answer naming its rule.
type Heard = Arc<Mutex<HashMap<Uuid, Instant>>>;

async fn run() {
    res_tests::functions::install_tls();
    let count: usize = std::env::args()
        .skip_while(|a| a != "--sites")
        .nth(1)
        .map(|n| n.parse().expect("--sites takes a number"))
        .unwrap_or(1_000);
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    let sites = seed(&pool, count).await;
    let (service, base) = support::serve(&database.url, &["--plan-wait-max-seconds", "240"]);
    // res-runner's connection settings: reqwest's own (a 30 s TCP user timeout) end an idle
    // wait at its first keep-alive probe lost on loopback (benchmarks.md, "Lost waits").
    let client = res_client::with_keepalive(reqwest::Client::builder())
        .build()
        .expect("an HTTP client");
    support::wait_until_up(&client, &base).await;
    println!("== {count} sites, each with its own key, branch and rule ==");

    // Idle: the same sites polling every 20 s, then waiting ever longer; first the
    // process's own background (sweeper, notification outbox) with no site asking, which
    // every mode pays and a site's cost is counted without.
    println!(
        "idle sites, {} s each (cores busy: PostgreSQL + res-functions; per site per hour, net of the baseline):",
        IDLE.as_secs()
    );
    println!(
        "{:<26} {:>10} {:>12} {:>11} {:>9}",
        "mode", "answers/s", "cores", "requests/h", "CPU-ms/h"
    );
    let baseline = idle_cost(&client, &base, &[], (0, false), service.pid()).await;
    println!(
        "{:<26} {:>10} {:>6.3}+{:.3} {:>11} {:>9}",
        "nobody asking (baseline)", "-", baseline.postgres, baseline.functions, "-", "-"
    );
    for (wait, keepalive) in IDLE_MODES {
        let idle = idle_cost(&client, &base, &sites, (wait, keepalive), service.pid()).await;
        let per_hour = 3_600.0 / count as f64;
        let net = idle.postgres + idle.functions - baseline.postgres - baseline.functions;
        println!(
            "{:<26} {:>10.1} {:>6.3}+{:.3} {:>11.1} {:>9.1}",
            match (wait, keepalive) {
                (0, _) => "polling every 20 s".to_owned(),
                (_, false) => format!("waiting {wait} s"),
                (_, true) => format!("waiting {wait} s, keep-alive"),
            },
            idle.answers_per_second,
            idle.postgres,
            idle.functions,
            idle.answers_per_second * per_hour,
            net * 1_000.0 * per_hour,
        );
    }

    // Changes: every site waits; one site's rule changes at a time.
    let heard: Heard = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    for site in &sites {
        tokio::spawn(wait_loop(
            client.clone(),
            base.clone(),
            site.clone(),
            heard.clone(),
            stop.clone(),
        ));
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut latencies = Vec::with_capacity(CHANGES);
    let mut missed = 0;
    for n in 0..CHANGES {
        let site = &sites[(n * 7919) % sites.len()];
        let before = Instant::now();
        sqlx::query("UPDATE branch_rules SET run_requested_at = now() WHERE id = $1")
            .bind(site.rule)
            .execute(&pool)
            .await
            .expect("change");
        let deadline = before + Duration::from_secs(5);
        loop {
            let at = heard.lock().expect("heard").get(&site.rule).copied();
            if let Some(at) = at.filter(|at| *at >= before) {
                latencies.push(at - before);
                break;
            }
            if Instant::now() > deadline {
                missed += 1;
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    assert_eq!(
        missed, 0,
        "{missed} of {CHANGES} changes did not reach their site in 5 s"
    );
    support::report("change committed → in the site's plan", &mut latencies);

    run_now_to_detector(&pool, &base).await;
    drop(service);
}

/// Brands of 100 branches, one daily rule (due tomorrow) and one runner key per branch.
async fn seed(pool: &PgPool, count: usize) -> Vec<Site> {
    sqlx::query(
        "INSERT INTO brands (name) SELECT 'Brand ' || g FROM generate_series(1, $1::int) g",
    )
    .bind(count.div_ceil(100) as i32)
    .execute(pool)
    .await
    .expect("brands");
    sqlx::query(
        "INSERT INTO branches (brand_id, name) \
         SELECT id, 'Site ' || g FROM brands, generate_series(1, 100) g",
    )
    .execute(pool)
    .await
    .expect("branches");
    sqlx::query(
        "INSERT INTO rules (name, status, cron_expression) VALUES ('Queue', 'active', '0 3 * * *')",
    )
    .execute(pool)
    .await
    .expect("rule");
    let rules: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "INSERT INTO branch_rules (branch_id, rule_id, next_run_time) \
         SELECT b.id, r.id, now() + interval '1 day' FROM branches b, rules r \
         RETURNING branch_id, id",
    )
    .fetch_all(pool)
    .await
    .expect("branch rules");
    let mut sites = Vec::with_capacity(count);
    for (branch, rule) in rules.into_iter().take(count) {
        let token = generate_token();
        let scope = KeyScope {
            branch_ids: vec![branch],
            ..KeyScope::default()
        };
        db::api_keys::insert(pool, "site", &hash_token(&token), Role::Runner, &scope)
            .await
            .expect("key");
        sites.push(Site { token, rule });
    }
    sqlx::query("VACUUM ANALYZE")
        .execute(pool)
        .await
        .expect("analyze");
    sites
}

async fn plan(client: &reqwest::Client, base: &str, token: &str, body: Value) -> Value {
    plan_kept_alive(client, base, token, body, false).await.0
}

/// [`plan`], asking a waiting answer to show it is alive when `keepalive`; and whether the
/// answer said it did (`res-keepalive-seconds`).
async fn plan_kept_alive(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    body: Value,
    keepalive: bool,
) -> (Value, bool) {
    let mut request = client
        .post(format!("{base}/{}", PlanRequest::NAME))
        .bearer_auth(token)
        .json(&body);
    if keepalive {
        request = request.header("res-keepalive", "1");
    }
    let answer = request.send().await.expect("a plan answer");
    let kept = answer.headers().contains_key("res-keepalive-seconds");
    (answer.json().await.expect("a plan"), kept)
}

/// What idle sites cost: answers per second and the cores PostgreSQL and the functions
/// kept busy.
struct IdleCost {
    answers_per_second: f64,
    postgres: f64,
    functions: f64,
}

/// Every site fetches its plan, then asks for deltas as res-runner does: every 20 s when
/// `wait` is 0, else waiting `wait` seconds each time. Sites are spread over the period, as
/// a fleet's are (a waiting site's first wait is a random part of it), and measured for
/// `IDLE` after that first round has begun.
async fn idle_cost(
    client: &reqwest::Client,
    base: &str,
    sites: &[Site],
    (wait, keepalive): (u32, bool),
    pid: u32,
) -> IdleCost {
    let mut cursors = Vec::with_capacity(sites.len());
    for site in sites {
        let full = plan(
            client,
            base,
            &site.token,
            json!({"runner_id": "site", "health": health()}),
        )
        .await;
        cursors.push(full["cursor"].as_str().expect("cursor").to_owned());
    }
    let answers = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let kept_alive = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    for (site, cursor) in sites.iter().zip(cursors) {
        let (client, base, token) = (client.clone(), base.to_owned(), site.token.clone());
        let (answers, kept_alive, stop) = (answers.clone(), kept_alive.clone(), stop.clone());
        tasks.spawn(async move {
            let period = if wait == 0 { 20 } else { wait };
            let mut next = rand::random_range(1..=period);
            if wait == 0 {
                tokio::time::sleep(Duration::from_secs(u64::from(next))).await;
            }
            let mut cursor = cursor;
            loop {
                let asked = if wait == 0 { 0 } else { next };
                let body = json!({"runner_id": "site", "since": cursor,
                                  "wait_seconds": asked, "health": health()});
                let (answer, kept) = tokio::select! {
                    answer = plan_kept_alive(&client, &base, &token, body, keepalive) => answer,
                    () = stop.cancelled() => return,
                };
                answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                kept_alive.fetch_add(u64::from(kept), std::sync::atomic::Ordering::Relaxed);
                assert_eq!(
                    answer["wait_seconds"], asked,
                    "the server waits as asked: {answer}"
                );
                cursor = answer["cursor"].as_str().expect("cursor").to_owned();
                next = wait;
                if wait == 0 {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(20)) => {}
                        () = stop.cancelled() => return,
                    }
                }
            }
        });
    }
    // Every site has asked (or waits to ask) by now; then the steady state is measured.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = cpu_split(&[], &[pid]);
    let answered_before = answers.load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(IDLE).await;
    let after = cpu_split(&[], &[pid]);
    let answered = answers.load(std::sync::atomic::Ordering::Relaxed) - answered_before;
    stop.cancel();
    while let Some(joined) = tasks.join_next().await {
        if let Err(error) = joined {
            assert!(error.is_cancelled(), "a site failed: {error}");
        }
    }
    // Idle sites have no news: every waiting answer asked for keep-alives must have sent
    // them, or this mode measured plain waits.
    let (all, kept) = (
        answers.load(std::sync::atomic::Ordering::Relaxed),
        kept_alive.load(std::sync::atomic::Ordering::Relaxed),
    );
    if keepalive {
        assert!(
            all > 0 && kept * 10 >= all * 9,
            "only {kept} of {all} waiting answers were kept alive"
        );
    } else {
        assert_eq!(kept, 0, "keep-alives sent unasked");
    }
    let seconds = IDLE.as_secs_f64();
    IdleCost {
        answers_per_second: answered as f64 / seconds,
        postgres: (after.2 - before.2) / seconds,
        functions: (after.1 - before.1) / seconds,
    }
}

/// A site that always has a plan request waiting; notes when an answer names its rule.
async fn wait_loop(
    client: reqwest::Client,
    base: String,
    site: Site,
    heard: Heard,
    stop: tokio_util::sync::CancellationToken,
) {
    let full = plan(&client, &base, &site.token, json!({"runner_id": "site"})).await;
    let mut cursor = full["cursor"].as_str().expect("cursor").to_owned();
    loop {
        let body = json!({"runner_id": "site", "since": cursor, "wait_seconds": WAIT_SECONDS});
        let answer = tokio::select! {
            answer = plan(&client, &base, &site.token, body) => answer,
            () = stop.cancelled() => return,
        };
        let at = Instant::now();
        assert_eq!(
            answer["wait_seconds"], WAIT_SECONDS,
            "the server waits: {answer}"
        );
        let named = answer["workflows"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["id"] == json!(site.rule)));
        if named {
            heard.lock().expect("heard").insert(site.rule, at);
        }
        cursor = answer["cursor"].as_str().expect("cursor").to_owned();
    }
}

/// A real runner on its own branch whose detector notes the time it starts; Run now by
/// the operator's call, one at a time: call → detector started.
async fn run_now_to_detector(pool: &PgPool, base: &str) {
    let dir = std::env::temp_dir().join(format!("res-wake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let started_file: PathBuf = dir.join("started");
    let seed = Seed::new(pool);
    let branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
    let rule = seed
        .command_rule(
            branch,
            RuleSpec {
                cron: Some("0 3 * * *"),
                next_run_time: Some(chrono::Utc::now() + chrono::TimeDelta::days(1)),
                ..RuleSpec::default()
            },
            &format!(
                "date +%s.%N >> {}; echo '{{\"violations\": 0}}'",
                started_file.display()
            ),
        )
        .await;
    let runner_token = generate_token();
    let scope = KeyScope {
        branch_ids: vec![branch],
        ..KeyScope::default()
    };
    db::api_keys::insert(
        pool,
        "site",
        &hash_token(&runner_token),
        Role::Runner,
        &scope,
    )
    .await
    .expect("runner key");
    let operator = generate_token();
    db::api_keys::insert(
        pool,
        "operator",
        &hash_token(&operator),
        Role::Service,
        &KeyScope::default(),
    )
    .await
    .expect("service key");
    let runner_binary = binary("res-runner");
    let runner = Runner::start(
        RunnerSpec {
            binary: &runner_binary,
            dir: &dir,
            name: "site-runner",
            functions_url: base,
            token: &runner_token,
        },
        &[
            ("PLAN_REFRESH_SECONDS", "20"),
            ("PLAN_WAIT_SECONDS", "20"),
            ("LEASE_SECONDS", "30"),
            ("REQUEST_TIMEOUT_SECONDS", "10"),
            ("RECENT_SECONDS", "1"),
        ],
        &[("RUST_LOG", "warn")],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let client = reqwest::Client::new();
    let mut latencies = Vec::with_capacity(RUNS);
    for n in 0..RUNS {
        let before_wall = std::time::SystemTime::now();
        let before = Instant::now();
        let answer = client
            .post(format!("{base}/{}", RunNowRequest::NAME))
            .bearer_auth(&operator)
            .json(&json!({"branch_rule_id": rule, "reason": "bench"}))
            .send()
            .await
            .expect("run now answered");
        assert_eq!(
            answer.status(),
            200,
            "run now: {}",
            answer.text().await.unwrap_or_default()
        );
        // The detector's own clock reading of its start.
        let deadline = before + Duration::from_secs(10);
        let started = loop {
            let lines = std::fs::read_to_string(&started_file).unwrap_or_default();
            if let Some(line) = lines.lines().nth(n) {
                let seconds: f64 = line.trim().parse().expect("a time");
                break std::time::UNIX_EPOCH + Duration::from_secs_f64(seconds);
            }
            assert!(
                Instant::now() < deadline,
                "run {n}: the detector did not start in 10 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        latencies.push(started.duration_since(before_wall).unwrap_or_default());
        // Finished and reported before the next Run now (one live run per rule).
        let finished = before + Duration::from_secs(10);
        loop {
            let live: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT FROM executions WHERE branch_rule_id = $1 \
                                AND status IN ('scheduled', 'running')) \
                     OR (SELECT run_requested_at IS NOT NULL FROM branch_rules WHERE id = $1)",
            )
            .bind(rule)
            .fetch_one(pool)
            .await
            .expect("live");
            if !live {
                break;
            }
            assert!(Instant::now() < finished, "run {n} did not finish in 10 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Past the runner's guard against queueing a rule it processed within
        // `recent_seconds` (1 s here), so each Run now measures the wake-up, not the guard.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
    }
    support::report(
        "Run now called → detector started (real res-runner)",
        &mut latencies,
    );
    drop(runner);
    let _ = std::fs::remove_dir_all(&dir);
}
