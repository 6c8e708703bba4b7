//! A run's output page: the console's execution page and `executions_show` with `output`,
//! over HTTP against `res-functions serve` and a throwaway PostgreSQL holding 10,000 rules,
//! 100,000 executions and, for 2,000 of them, what their programs printed (a few lines of
//! stdout and 64 KiB of stderr (1,424 lines) cut from 1 MiB). Measured for one such run and for the
//! largest output a report carries (8 streams of 64 KiB, 512 KiB), the pages checked to
//! show the cut and the last line. Then the report itself, side by side: claim, then
//! `branch_rules_set_NextRunTime` without output and with a run's (2 KiB of stdout, 64 KiB
//! of stderr), alternating, each checked to be recorded.
//!
//! `cargo bench -p res-functions --bench output`; results go to docs/benchmarks.md.

mod support;

use std::time::{Duration, Instant};

use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_functions::db::api_keys::KeyScope;
use res_tests::postgres::server;
use sqlx::PgPool;
use uuid::Uuid;

use support::{report, wait_until_up};

const REQUESTS: usize = 40;

fn main() {
    support::main_when_benchmarking(run);
}

/// Ten finished runs a rule; the newest run of 2,000 rules has output. Returns a run with
/// the common output and one with the largest.
async fn history(pool: &PgPool) -> (Uuid, Uuid) {
    sqlx::query(
        "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, lease_seconds, \
                                 lease_expires_at, scheduled_at, started_at, finished_at, root_id, \
                                 result) \
         SELECT br.id, 'site', 'failed', 't', 60, now(), now() - make_interval(hours => g), \
                now() - make_interval(hours => g), now() - make_interval(hours => g) + interval '5 s', \
                gen_random_uuid(), \
                '{\"nodes\": [{\"node_id\": \"detect\", \"node_type\": \"detection\", \"visit\": 1, \"status\": \"failed\"}]}' \
         FROM branch_rules br, generate_series(1, 10) g",
    )
    .execute(pool)
    .await
    .expect("history");
    // Lines like a detector's: numbered, so no two 64 KiB tails compress alike.
    sqlx::query(
        "INSERT INTO execution_output (execution_id, seq, node_id, visit, stream, text, cut_bytes) \
         SELECT e.id, s.seq, 'detect', 1, s.stream, \
                CASE s.stream WHEN 'stdout' THEN 'warming up' || chr(10) || '{\"people\": 4}' || chr(10) \
                     ELSE (SELECT string_agg('frame ' || lpad(f::text, 6, '0') || ' ' || md5(e.id::text || f) \
                                             || chr(10), '') FROM generate_series(1, 1424) f) END, \
                CASE s.stream WHEN 'stdout' THEN 0 ELSE 983040 END \
         FROM (SELECT DISTINCT ON (branch_rule_id) id FROM executions \
               ORDER BY branch_rule_id, scheduled_at DESC LIMIT 2000) e, \
              (VALUES (1, 'stdout'), (2, 'stderr')) s(seq, stream)",
    )
    .execute(pool)
    .await
    .expect("output");
    let common: Uuid = sqlx::query_scalar(
        "SELECT execution_id FROM execution_output ORDER BY execution_id LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .expect("a run with output");
    let largest: Uuid = sqlx::query_scalar(
        "SELECT id FROM executions WHERE id NOT IN (SELECT execution_id FROM execution_output) \
         ORDER BY id LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .expect("a run without");
    sqlx::query(
        "INSERT INTO execution_output (execution_id, seq, node_id, visit, stream, text, cut_bytes) \
         SELECT $1, v, 'detect', v, 'stderr', \
                (SELECT string_agg('frame ' || lpad(f::text, 6, '0') || ' ' || md5(v::text || f) \
                                   || chr(10), '') FROM generate_series(1, 1424) f), 983040 \
         FROM generate_series(1, 8) v",
    )
    .bind(largest)
    .execute(pool)
    .await
    .expect("the largest output");
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
    (common, largest)
}

async fn run() {
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    let seeding = Instant::now();
    support::seed(&pool).await;
    let (common, largest) = history(&pool).await;
    let (executions, outputs, bytes): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM executions), count(*), sum(octet_length(text))::bigint \
         FROM execution_output",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    println!(
        "{executions} executions, {outputs} output streams ({} MiB), seeded in {:?}",
        bytes / (1 << 20),
        seeding.elapsed()
    );
    let token = generate_token();
    let scope = KeyScope {
        all_brands: true,
        ..KeyScope::default()
    };
    db::api_keys::insert(&pool, "bench", &hash_token(&token), Role::Viewer, &scope)
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

    for (label, id, streams) in [("one run's", common, 2), ("the largest", largest, 8)] {
        let mut page_times: Vec<Duration> = Vec::new();
        let mut show_times: Vec<Duration> = Vec::new();
        let mut page_bytes = 0;
        for n in 0..=REQUESTS {
            let started = Instant::now();
            let page = console.get(&format!("/console/executions/{id}")).await;
            let took = started.elapsed();
            assert_eq!(page.status, 200, "execution page: {}", page.status);
            assert_eq!(
                page.body.matches("983,040 bytes cut").count(),
                streams - usize::from(streams == 2),
                "the page shows every cut stream"
            );
            assert!(
                page.body.contains("frame 001424 "),
                "the last line is shown"
            );
            page_bytes = page.body.len();
            let started = Instant::now();
            let shown = client
                .post(format!("{base}/executions_show"))
                .bearer_auth(&token)
                .json(&serde_json::json!({"execution_id": id, "output": true}))
                .send()
                .await
                .expect("executions_show");
            assert!(
                shown.status().is_success(),
                "executions_show: {}",
                shown.status()
            );
            let body: serde_json::Value = shown.json().await.expect("JSON");
            let show_took = started.elapsed();
            assert_eq!(body["output"].as_array().map(Vec::len), Some(streams));
            if n > 0 {
                page_times.push(took);
                show_times.push(show_took);
            }
        }
        println!("{label} output page: {} KiB", page_bytes / 1024);
        report(
            &format!("console: execution page, {label} output ({streams} streams)"),
            &mut page_times,
        );
        report(
            &format!("executions_show with output, {label} ({streams} streams)"),
            &mut show_times,
        );
    }
    reports(&pool, &client, &base).await;
}

/// Report latency without and with output, alternating on fresh rules.
async fn reports(pool: &PgPool, client: &reqwest::Client, base: &str) {
    let branches: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branches")
        .fetch_all(pool)
        .await
        .expect("branches");
    let token = generate_token();
    let scope = KeyScope {
        branch_ids: branches,
        ..KeyScope::default()
    };
    db::api_keys::insert(pool, "site", &hash_token(&token), Role::Runner, &scope)
        .await
        .expect("runner key");
    let rules: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branch_rules ORDER BY id LIMIT 401")
        .fetch_all(pool)
        .await
        .expect("rules");
    let stderr: String = (1..=1424)
        .map(|f| format!("frame {f:06} {:032x}\n", u128::from(f as u32) * 0x9e37_79b9))
        .collect();
    let output = serde_json::json!([
        {"node_id": "detect", "visit": 1, "stream": "stdout", "text": "warming up\n".repeat(186)},
        {"node_id": "detect", "visit": 1, "stream": "stderr", "text": stderr, "cut_bytes": 983_040},
    ]);
    let post = |function: &str, body: serde_json::Value| {
        client
            .post(format!("{base}/{function}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    let mut plain = Vec::new();
    let mut with_output = Vec::new();
    for (n, rule) in rules.iter().enumerate() {
        let claim: serde_json::Value = post(
            "branch_rules_claim",
            serde_json::json!({"branch_rule_id": rule, "runner_id": "bench"}),
        )
        .await
        .expect("claim")
        .json()
        .await
        .expect("claim JSON");
        let mut body = serde_json::json!({"branch_rule_id": rule, "is_last_run_failed": false,
            "execution_id": claim["execution_id"], "claim_token": claim["claim_token"],
            "status": "completed"});
        let carries = n % 2 == 1;
        if carries {
            body["output"] = output.clone();
        }
        let started = Instant::now();
        let answer = post("branch_rules_set_NextRunTime", body)
            .await
            .expect("report");
        let took = started.elapsed();
        assert!(answer.status().is_success(), "report: {}", answer.status());
        // The first warms the caches.
        match (n, carries) {
            (0, _) => {}
            (_, true) => with_output.push(took),
            (_, false) => plain.push(took),
        }
    }
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM execution_output o JOIN executions e ON e.id = o.execution_id \
         WHERE e.runner_id = 'bench'",
    )
    .fetch_one(pool)
    .await
    .expect("count");
    assert_eq!(stored, 400, "every report with output stored both streams");
    report("set_NextRunTime without output", &mut plain);
    report("set_NextRunTime with 66 KiB of output", &mut with_output);
}
