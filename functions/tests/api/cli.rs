//! `res-functions` as a platform engineer runs it: migrate, create and revoke keys, serve.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use res_tests::postgres::{TestDatabase, server};
use res_tests::processes::free_port;
use serde_json::{Value, json};
use uuid::Uuid;

fn res_functions(database: &TestDatabase, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_res-functions"))
        .args(args)
        .env("DATABASE_URL", &database.url)
        .output()
        .expect("res-functions runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn seed_branch(database: &TestDatabase) -> Uuid {
    let pool = sqlx::PgPool::connect(&database.url).await.expect("connect");
    let branch = sqlx::query_scalar(
        "WITH b AS (INSERT INTO brands (name) VALUES ('Brand') RETURNING id) \
         INSERT INTO branches (brand_id, name) SELECT id, 'Branch 17' FROM b RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .expect("branch");
    pool.close().await;
    branch
}

#[tokio::test]
async fn migrate_create_a_key_serve_and_revoke() {
    let database = server().create_database().await;
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");

    // Serving an unmigrated database fails fast and says what to do.
    let early = res_functions(&database, &["serve", "--bind", &bind]);
    assert!(!early.status.success());
    assert!(
        text(&early.stderr).contains("res-functions migrate"),
        "{}",
        text(&early.stderr)
    );

    let migrate = res_functions(&database, &["migrate"]);
    assert!(migrate.status.success(), "{}", text(&migrate.stderr));
    assert!(text(&migrate.stdout).contains("up to date"));
    let again = res_functions(&database, &["migrate"]);
    assert!(again.status.success(), "migrate is repeatable");

    let branch = seed_branch(&database).await;
    let no_branch = res_functions(
        &database,
        &["create-api-key", "--name", "site", "--role", "runner"],
    );
    assert!(!no_branch.status.success());
    assert!(text(&no_branch.stderr).contains("--branch"));
    let unknown = Uuid::new_v4().to_string();
    let typo = res_functions(
        &database,
        &[
            "create-api-key",
            "--name",
            "site",
            "--role",
            "runner",
            "--branch",
            &unknown,
        ],
    );
    assert!(!typo.status.success());
    assert!(text(&typo.stderr).contains(&unknown));

    let service = res_functions(&database, &["create-api-key", "--role", "service"]);
    assert!(
        service.status.success(),
        "--name is optional: {}",
        text(&service.stderr)
    );
    assert!(text(&service.stdout).trim().starts_with("res_"));

    let branch_text = branch.to_string();
    let created = res_functions(
        &database,
        &[
            "create-api-key",
            "--name",
            "site-17",
            "--role",
            "runner",
            "--branch",
            &branch_text,
        ],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let token = text(&created.stdout).trim().to_owned();
    assert!(
        token.starts_with("res_"),
        "only the token goes to stdout: {token}"
    );
    let key_id = text(&created.stderr)
        .split_whitespace()
        .find_map(|word| word.parse::<Uuid>().ok())
        .expect("the key id is reported");

    let mut service = Command::new(env!("CARGO_BIN_EXE_res-functions"))
        .args(["serve", "--bind", &bind])
        .env("DATABASE_URL", &database.url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let client = res_tests::functions::client();
    let base = format!("http://{bind}/functions/v1");
    let started = Instant::now();
    loop {
        let up = client.get(format!("{base}/health")).send().await;
        if up.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "serve did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let plan = |token: String| {
        let client = client.clone();
        let url = format!("{base}/get-execution-plan-v2");
        async move {
            client
                .post(url)
                .bearer_auth(token)
                .json(&json!({"runner_id": "site-17"}))
                .send()
                .await
                .expect("answer")
        }
    };
    let ok = plan(token.clone()).await;
    assert_eq!(ok.status(), 200);
    let body: Value = ok.json().await.expect("JSON");
    assert_eq!(body["full"], true);

    let key_text = key_id.to_string();
    let revoked = res_functions(&database, &["revoke-api-key", &key_text]);
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    // serve remembers verified keys and hears revocations through LISTEN: at once, in
    // human terms (a behaviour bound, not a benchmark).
    let revoked_at = Instant::now();
    while plan(token.clone()).await.status() != 401 {
        assert!(
            revoked_at.elapsed() < Duration::from_secs(2),
            "a revoked token still worked 2 s later"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let twice = res_functions(&database, &["revoke-api-key", &key_text]);
    assert!(!twice.status.success());

    // SIGTERM stops the service cleanly.
    assert!(
        res_tests::processes::terminate(&mut service),
        "serve stops on SIGTERM and exits 0"
    );
}

#[tokio::test]
async fn openapi_prints_the_document_and_bad_urls_are_explained() {
    let database = server().create_database().await;
    let spec = res_functions(&database, &["openapi"]);
    assert!(spec.status.success());
    let document: Value = serde_json::from_slice(&spec.stdout).expect("JSON");
    assert_eq!(document["info"]["title"], "RES functions");
    let bad = Command::new(env!("CARGO_BIN_EXE_res-functions"))
        .args(["migrate"])
        .env("DATABASE_URL", "mysql://nope")
        .output()
        .expect("runs");
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("DATABASE_URL"),
        "{}",
        text(&bad.stderr)
    );
}

#[tokio::test]
async fn a_single_function_binary_refuses_a_schema_behind_its_build() {
    let database = server().create_database().await;
    let port = free_port().to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_branch-rules-claim"))
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", &database.url)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    assert!(!output.status.success(), "it must not serve");
    let log = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(log.contains("schema is behind this build"), "{log}");
}
