//! The fleet at a glance at 100,000 rules: 1,000 branches of 100 rules each, 1,000 runners
//! (one a branch, a tenth of them silent), 100,000 runs in the last day, and 1,000 attention
//! items — 10 rules failing at 100 branches each — plus 100 overdue rules. Measures the
//! console's fleet page and `fleet_summary` over HTTP against `res-functions serve` and a
//! throwaway PostgreSQL, the page checked to show the groups. Also the fleet page at the
//! operator bench's 10,000 rules (a tenth of the branches), for the curve.
//!
//! `cargo bench -p res-functions --bench glance`; results go to docs/benchmarks.md.

mod support;

use std::time::Instant;

use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_functions::db::api_keys::KeyScope;
use res_tests::postgres::server;
use sqlx::PgPool;

use support::{report, wait_until_up};

const REQUESTS: usize = 40;

fn main() {
    support::main_when_benchmarking(run);
}

async fn seed(pool: &PgPool, branches: i32) {
    let statements = [
        "INSERT INTO brands (name) VALUES ('Bench brand')",
        "INSERT INTO rules (name, status, cron_expression) \
         SELECT 'Rule ' || g, 'active', '*/15 * * * *' FROM generate_series(1, 100) g",
        "INSERT INTO action_template_connections (rule_id, workflow_config) \
         SELECT id, '{\"start_node\": \"detect\"}' FROM rules",
    ];
    for statement in statements {
        sqlx::query(statement).execute(pool).await.expect("seed");
    }
    sqlx::query(
        "INSERT INTO branches (brand_id, name) \
         SELECT b.id, 'Branch ' || lpad(g::text, 4, '0') FROM brands b, generate_series(1, $1) g",
    )
    .bind(branches)
    .execute(pool)
    .await
    .expect("branches");
    let statements = [
        "INSERT INTO branch_rules (branch_id, rule_id, next_run_time) \
         SELECT b.id, r.id, now() + interval '10 minutes' FROM branches b CROSS JOIN rules r",
        // 10 rules failing at 100 branches each: 1,000 attention items in 10 groups.
        "UPDATE branch_rules br SET consecutive_failures = 3, needs_attention_at = now(), \
             needs_attention_reason = 'failed 3 times in a row (last: camera ' || b.name || ' offline)' \
         FROM branches b, rules r \
         WHERE b.id = br.branch_id AND r.id = br.rule_id \
           AND r.name IN ('Rule 1', 'Rule 2', 'Rule 3', 'Rule 4', 'Rule 5', 'Rule 6', 'Rule 7', \
                          'Rule 8', 'Rule 9', 'Rule 10') \
           AND b.name <= 'Branch 0100'",
    ];
    for statement in statements {
        sqlx::query(statement).execute(pool).await.expect("seed");
    }
    // 100 overdue: rule 11 at the last 100 branches, due an hour ago.
    sqlx::query(
        "UPDATE branch_rules SET next_run_time = now() - interval '1 hour' WHERE id IN ( \
             SELECT br.id FROM branch_rules br JOIN rules r ON r.id = br.rule_id \
             JOIN branches b ON b.id = br.branch_id \
             WHERE r.name = 'Rule 11' ORDER BY b.name DESC LIMIT 100)",
    )
    .execute(pool)
    .await
    .expect("overdue");
    // A runner a branch, every tenth silent for an hour, and the day's runs: one a rule.
    sqlx::query(
        "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, lease_seconds, \
                                 lease_expires_at, scheduled_at, started_at, finished_at, root_id) \
         SELECT br.id, 'site', CASE WHEN random() < 0.1 THEN 'failed' ELSE 'completed' END, 't', \
                60, now(), now() - interval '2 hours', now() - interval '2 hours', \
                now() - interval '2 hours' + interval '5 seconds', gen_random_uuid() \
         FROM branch_rules br",
    )
    .execute(pool)
    .await
    .expect("runs");
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
}

async fn runners(pool: &PgPool) {
    let branches: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM branches ORDER BY name")
        .fetch_all(pool)
        .await
        .expect("branches");
    for (n, branch) in branches.iter().enumerate() {
        let scope = KeyScope {
            branch_ids: vec![*branch],
            ..KeyScope::default()
        };
        let key = db::api_keys::insert(
            pool,
            &format!("site {n}"),
            &hash_token(&generate_token()),
            Role::Runner,
            &scope,
        )
        .await
        .expect("site key");
        let silent = if n % 10 == 0 { 3_600.0 } else { 0.0 };
        sqlx::query(
            "INSERT INTO runners (key_id, runner_id, boot_id, first_seen_at, last_seen_at, online_since) \
             VALUES ($1, 'site', 'boot', now(), now() - make_interval(secs => $2), now())",
        )
        .bind(key)
        .bind(silent)
        .execute(pool)
        .await
        .expect("runner");
    }
}

async fn measure(branches: i32) {
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    let seeding = Instant::now();
    seed(&pool, branches).await;
    runners(&pool).await;
    let rules: i64 = sqlx::query_scalar("SELECT count(*) FROM branch_rules")
        .fetch_one(&pool)
        .await
        .expect("count");
    let flagged: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM branch_rules WHERE needs_attention_at IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    println!(
        "{rules} branch rules, {flagged} needing attention, seeded in {:?}",
        seeding.elapsed()
    );
    let token = generate_token();
    let scope = KeyScope {
        all_brands: true,
        ..KeyScope::default()
    };
    db::api_keys::insert(&pool, "bench", &hash_token(&token), Role::Operator, &scope)
        .await
        .expect("key");
    let (_service, base) = support::serve(&database.url, &[]);
    res_tests::functions::install_tls();
    let client = reqwest::Client::builder()
        .no_gzip()
        .build()
        .expect("client");
    wait_until_up(&client, &base).await;
    let root = base.trim_end_matches("/functions/v1");
    let mut console = res_tests::console::Console::new(root);
    let signed = console.sign_in(&token).await;
    assert_eq!(signed.status, 303, "console sign-in: {}", signed.body);
    let mut page_times = Vec::new();
    let mut summary_times = Vec::new();
    let mut bytes = 0;
    // The first of each warms the caches.
    for n in 0..=REQUESTS {
        let started = Instant::now();
        let page = console.get("/console/").await;
        let took = started.elapsed();
        assert_eq!(page.status, 200, "console fleet: {}", page.body);
        assert!(
            page.body.contains("Rule 1 at 100 branches of Bench brand"),
            "the fleet page shows no group: {}",
            &page.body[..page.body.len().min(4_000)]
        );
        bytes = page.body.len();
        let started = Instant::now();
        let summary = client
            .post(format!("{base}/fleet_summary"))
            .bearer_auth(&token)
            .json(&serde_json::json!({}))
            .send()
            .await
            .expect("fleet_summary");
        assert!(
            summary.status().is_success(),
            "fleet_summary: {}",
            summary.status()
        );
        let body: serde_json::Value = summary.json().await.expect("JSON");
        let summary_took = started.elapsed();
        assert_eq!(
            body["totals"]["branches"],
            serde_json::json!(branches),
            "{}",
            body["totals"]
        );
        if n > 0 {
            page_times.push(took);
            summary_times.push(summary_took);
        }
    }
    println!("fleet page: {} KiB", bytes / 1024);
    report(
        &format!("console: fleet page, {rules} rules, {flagged} attention items"),
        &mut page_times,
    );
    report(
        &format!("fleet_summary, {rules} rules, {flagged} attention items"),
        &mut summary_times,
    );
    // The sweeper's alert evaluation over the same fleet, once the brand has a channel:
    // the first opens every item (and queues its message), the others find nothing new.
    sqlx::query(
        "INSERT INTO notification_channels (brand_id, name, kind, url, secret, created_by) \
         SELECT id, 'bench', 'webhook', 'http://127.0.0.1:9/none', 'whsec_bench', 'bench' \
         FROM brands",
    )
    .execute(&pool)
    .await
    .expect("a channel");
    // Through a pool as the functions make one (their session settings).
    let options = database.url.parse().expect("the database's URL");
    let functions_pool = db::lazy_pool(options, 2);
    let mut evaluations = Vec::new();
    for n in 0..6 {
        let started = Instant::now();
        let done = res_functions::alerts::evaluate(&functions_pool, Default::default())
            .await
            .expect("evaluates");
        let took = started.elapsed();
        if n == 0 {
            println!(
                "alert evaluation, first: {took:?}, {} items opened",
                done.opened
            );
            assert!(
                done.opened >= flagged as u64,
                "every flagged rule is announced"
            );
        } else {
            assert_eq!(done.opened, 0, "nothing new");
            evaluations.push(took);
        }
    }
    report(
        &format!("alert evaluation (a sweep's), {rules} rules, nothing new"),
        &mut evaluations,
    );
}

async fn run() {
    // 10,000 rules (100 branches: the failing rules' 100 first branches are all of them)
    // then 100,000.
    measure(100).await;
    measure(1_000).await;
}
