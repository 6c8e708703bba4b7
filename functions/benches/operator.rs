//! The operator functions at scale, over real HTTP against a throwaway PostgreSQL: 10,000
//! rules and 1,000,000 executions (100 per rule over ~87 days, a tenth failed) with a
//! violation for every tenth. Measures the history's first and a deep page, filtered pages,
//! describe, the rule and violation lists, a runner registering (its earlier boots' live
//! executions looked up), and the claim → heartbeat → set_NextRunTime cycle on the same
//! rules with an empty executions table and then with the history, side by side in one run.
//! Run with `cargo bench -p res-functions --bench operator` (`-- --executions 20000000`
//! for the history at fleet scale); results go to docs/benchmarks.md.

mod support;

use std::time::Instant;

use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_functions::db::api_keys::KeyScope;
use res_tests::postgres::server;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use support::{CLIENTS, CYCLE_SECONDS, cycle_load, report, seed, wait_until_up};

const REQUESTS: usize = 200;

fn main() {
    support::main_when_benchmarking(run);
}

/// `--executions N` (1,000,000 unless given; a multiple of 10,000, one share per rule).
fn executions_wanted() -> i64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--executions")
        .and_then(|i| args.get(i + 1))
        .map_or(1_000_000, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("--executions takes a number, not {v}"))
        })
}

async fn run() {
    let wanted = executions_wanted();
    let per_rule = (wanted / 10_000).max(1);
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    seed(&pool).await;
    let branches: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branches")
        .fetch_all(&pool)
        .await
        .expect("branches");
    let runner = key(&pool, Role::Runner, branches).await;
    let operator = key(&pool, Role::Operator, Vec::new()).await;
    let (_service, base) = support::serve(&database.url, &[]);
    res_tests::functions::install_tls();
    let client = reqwest::Client::builder()
        .no_gzip()
        .build()
        .expect("client");
    wait_until_up(&client, &base).await;

    // A first run warms the pool and PostgreSQL's caches, so the two measured runs differ
    // only in the table's size.
    cycle_load(&client, &base, &runner, &pool).await;
    let (empty_cycles, mut empty_latencies) = cycle_load(&client, &base, &runner, &pool).await;
    let filling = Instant::now();
    fill_history(&pool, per_rule).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM executions")
        .fetch_one(&pool)
        .await
        .expect("count");
    println!(
        "history: {rows} executions after {:?} of seeding",
        filling.elapsed()
    );
    assert!(
        rows >= per_rule * 10_000,
        "the history was not seeded: {rows} rows"
    );
    // The rules are due every second: a cycle on the full table starts from the same state.
    let (full_cycles, mut full_latencies) = cycle_load(&client, &base, &runner, &pool).await;
    let (empty_rate, full_rate) = (
        empty_cycles as f64 / CYCLE_SECONDS as f64,
        full_cycles as f64 / CYCLE_SECONDS as f64,
    );
    println!(
        "claim→heartbeat→set_NextRunTime, {CLIENTS} clients: empty table {empty_rate:.0}/s, \
         {rows} rows {full_rate:.0}/s (ratio {:.2})",
        full_rate / empty_rate
    );
    report("one cycle, empty table", &mut empty_latencies);
    report("one cycle, full history", &mut full_latencies);

    let rules: Vec<(Uuid, Uuid)> =
        sqlx::query_as("SELECT id, branch_id FROM branch_rules ORDER BY random() LIMIT 200")
            .fetch_all(&pool)
            .await
            .expect("rules");
    let call = |function: &'static str, body: Value| {
        let request = client
            .post(format!("{base}/{function}"))
            .bearer_auth(&operator)
            .json(&body);
        async move {
            let started = Instant::now();
            let response = request.send().await.expect("an answer");
            let status = response.status();
            let answer: Value = response.json().await.expect("JSON");
            assert!(status.is_success(), "{function}: {status} {answer}");
            (started.elapsed(), answer)
        }
    };
    let mut first = Vec::new();
    let mut deep_cursor = None;
    for _ in 0..REQUESTS {
        let (took, page) = call("executions_list", json!({"limit": 50})).await;
        assert_eq!(page["executions"].as_array().map(Vec::len), Some(50));
        first.push(took);
        deep_cursor = page["next"].as_str().map(str::to_owned);
    }
    report("history, first page of 50 (no filter)", &mut first);
    // Walk 200 pages down (10,000 rows), then time the page there.
    let mut cursor = deep_cursor;
    for _ in 0..200 {
        let (_, page) = call("executions_list", json!({"limit": 50, "after": cursor})).await;
        cursor = page["next"].as_str().map(str::to_owned);
    }
    let mut deep = Vec::new();
    for _ in 0..REQUESTS {
        let (took, _) = call("executions_list", json!({"limit": 50, "after": cursor})).await;
        deep.push(took);
    }
    report("history, a page 10,000 rows deep", &mut deep);
    let mut by_rule = Vec::new();
    let mut by_branch = Vec::new();
    let mut by_branch_failed = Vec::new();
    let mut describe = Vec::new();
    for (rule, branch) in rules.iter().cycle().take(REQUESTS) {
        let (took, _) = call("executions_list", json!({"branch_rule_id": rule})).await;
        by_rule.push(took);
        let (took, _) = call("executions_list", json!({"branch_id": branch})).await;
        by_branch.push(took);
        let (took, _) = call(
            "executions_list",
            json!({"branch_id": branch, "status": "failed"}),
        )
        .await;
        by_branch_failed.push(took);
        let (took, answer) = call("rules_describe", json!({"branch_rule_id": rule})).await;
        assert!(
            answer["last_runs"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        );
        describe.push(took);
    }
    report("history of one rule", &mut by_rule);
    report("history of one branch", &mut by_branch);
    report("history of one branch, failed only", &mut by_branch_failed);
    report("rules_describe", &mut describe);
    let mut rules_page = Vec::new();
    let mut attention = Vec::new();
    let mut violations = Vec::new();
    for _ in 0..REQUESTS / 4 {
        let (took, _) = call("rules_list", json!({"limit": 50})).await;
        rules_page.push(took);
        let (took, _) = call("rules_list", json!({"condition": "needs_attention"})).await;
        attention.push(took);
        let (took, _) = call("violations_list", json!({"limit": 50})).await;
        violations.push(took);
    }
    report("rules_list, first page of 50", &mut rules_page);
    report(
        "rules_list, needs_attention over all 10,000 rules",
        &mut attention,
    );
    report("violations_list, first page of 50", &mut violations);

    // A runner registering a new boot: its earlier boots' live executions are looked up
    // among the whole history (through the live executions, not an index of their own).
    let mut register = Vec::new();
    for n in 0..REQUESTS / 4 {
        let started = Instant::now();
        let response = client
            .post(format!("{base}/runner_register"))
            .bearer_auth(&runner)
            .json(&json!({"runner_id": "site-7", "boot_id": format!("boot-{n}")}))
            .send()
            .await
            .expect("an answer");
        assert!(
            response.status().is_success(),
            "runner_register: {}",
            response.status()
        );
        register.push(started.elapsed());
    }
    report(
        "runner_register (earlier boots' live runs looked up)",
        &mut register,
    );

    // The console's fleet page (every rule and runner in scope, folded per branch) and a
    // rule page (describe, violations, runners), signed in as the operator.
    let root = base.trim_end_matches("/functions/v1");
    let mut console = res_tests::console::Console::new(root);
    let signed = console.sign_in(&operator).await;
    assert_eq!(signed.status, 303, "console sign-in: {}", signed.body);
    let mut fleet = Vec::new();
    let mut rule_page = Vec::new();
    let mut history_page = Vec::new();
    for (rule, _) in rules.iter().cycle().take(REQUESTS / 4) {
        let started = Instant::now();
        let page = console.get("/console/").await;
        assert_eq!(page.status, 200, "console fleet: {}", page.body);
        fleet.push(started.elapsed());
        let started = Instant::now();
        let page = console.get(&format!("/console/rules/{rule}")).await;
        assert_eq!(page.status, 200, "console rule: {}", page.body);
        // The strip of its last runs is on it.
        assert!(
            page.body.contains("class=\"strip"),
            "console rule: no strip"
        );
        rule_page.push(started.elapsed());
        // The whole history, counted by status up to the cap: the widest count there is.
        let started = Instant::now();
        let page = console.get("/console/executions").await;
        assert_eq!(page.status, 200, "console history: {}", page.body);
        assert!(
            page.body.contains("More than 10,000 runs match"),
            "console history: no counts"
        );
        history_page.push(started.elapsed());
    }
    report("console: fleet page over all 10,000 rules", &mut fleet);
    report("console: rule page", &mut rule_page);
    report(
        "console: history page, all runs counted by status",
        &mut history_page,
    );

    // A mass outage: 1,000 site keys with a runner each, all silent for an hour, and every
    // rule overdue — each rule then carries its cause, read from its branch's runners.
    for n in 0..1_000 {
        let branch: Uuid = sqlx::query_scalar(
            "SELECT id FROM branches ORDER BY id OFFSET $1 % (SELECT count(*) FROM branches) LIMIT 1",
        )
        .bind(n as i64)
        .fetch_one(&pool)
        .await
        .expect("a branch");
        key(&pool, Role::Runner, vec![branch]).await;
    }
    sqlx::query(
        "INSERT INTO runners (key_id, runner_id, boot_id, first_seen_at, last_seen_at) \
         SELECT id, 'site-' || id, 'boot', now() - interval '2 hours', now() - interval '1 hour' \
         FROM api_keys WHERE role = 'runner' ON CONFLICT DO NOTHING",
    )
    .execute(&pool)
    .await
    .expect("silent runners");
    sqlx::query("UPDATE runners SET last_seen_at = now() - interval '1 hour'")
        .execute(&pool)
        .await
        .expect("all silent");
    sqlx::query("UPDATE branch_rules SET next_run_time = now() - interval '1 hour'")
        .execute(&pool)
        .await
        .expect("all overdue");
    sqlx::query("ANALYZE")
        .execute(&pool)
        .await
        .expect("analyze");
    let mut outage_fleet = Vec::new();
    let mut outage_list = Vec::new();
    for _ in 0..REQUESTS / 4 {
        let started = Instant::now();
        let page = console.get("/console/").await;
        assert_eq!(page.status, 200, "console fleet: {}", page.body);
        assert!(
            page.body.contains("no runner of this branch seen since"),
            "causes shown"
        );
        outage_fleet.push(started.elapsed());
        let (took, answer) = call("rules_list", json!({"limit": 50})).await;
        assert_eq!(answer["rules"][0]["overdue"], true, "{answer}");
        outage_list.push(took);
    }
    report(
        "mass outage (all 10,000 rules overdue, 1,000 silent runners): console fleet page",
        &mut outage_fleet,
    );
    report(
        "mass outage: rules_list, first page of 50",
        &mut outage_list,
    );
}

async fn key(pool: &PgPool, role: Role, branch_ids: Vec<Uuid>) -> String {
    let token = generate_token();
    let scope = KeyScope {
        all_brands: role == Role::Operator,
        branch_ids,
        ..KeyScope::default()
    };
    db::api_keys::insert(pool, "bench", &hash_token(&token), role, &scope)
        .await
        .expect("key");
    token
}

/// `per_rule` finished executions per rule, evenly back from now over ~87 days (inside the
/// retention), a tenth failed with an error, and a violation for every tenth execution.
async fn fill_history(pool: &PgPool, per_rule: i64) {
    // One slice of every rule's history per statement, so a large history shows progress
    // and no statement holds millions of rows in one transaction.
    let spacing_seconds = 87 * 24 * 3600 / per_rule;
    let slices = (per_rule + 99) / 100;
    for slice in 0..slices {
        let first = slice * 100 + 1;
        let last = ((slice + 1) * 100).min(per_rule);
        sqlx::query(
            "INSERT INTO executions (branch_rule_id, runner_id, status, attempt, claim_token, \
                 lease_seconds, lease_expires_at, scheduled_at, started_at, finished_at, error, \
                 trigger, root_id, boot_id) \
             SELECT br.id, 'site-' || br.n % 100, \
                    CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'completed' END, 1, md5(g::text), \
                    60, t + interval '1 minute', t, t, t + interval '31 seconds', \
                    CASE WHEN g % 10 = 0 THEN 'camera 3 did not answer' END, 'schedule', \
                    gen_random_uuid(), 'boot-1' \
             FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM branch_rules) br \
             CROSS JOIN generate_series($1::bigint, $2::bigint) g \
             CROSS JOIN LATERAL (SELECT now() - g * make_interval(secs => $3) \
                                       - br.n * interval '1 second' AS t) times",
        )
        .bind(first)
        .bind(last)
        .bind(spacing_seconds as f64)
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("seeding the history: {e}"));
        if slices > 1 {
            println!("history: {} of {per_rule} executions per rule", last);
        }
    }
    let statements = [
        "UPDATE executions SET status = 'completed', finished_at = now() \
         WHERE status IN ('scheduled', 'running')",
        "UPDATE branch_rules SET is_currently_running = false",
        "INSERT INTO violations (branch_rule_id, execution_id, kind, details, idempotency_key, \
                                 created_at) \
         SELECT branch_rule_id, id, 'queue_too_long', '{\"queue_length\": 9}', id::text, \
                finished_at \
         FROM executions WHERE abs(hashtext(id::text)) % 10 = 0",
        "ANALYZE",
    ];
    for statement in statements {
        sqlx::query(statement)
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("seeding the history: {e}\n{statement}"));
    }
}
