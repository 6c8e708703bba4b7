//! `resctl` as a child process against real functions and PostgreSQL.

use std::process::{Command, Output};

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_tests::functions::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

fn resctl(app_url: &str, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resctl"))
        .args(args)
        .env("RES_URL", app_url)
        .env("RES_TOKEN", token)
        .output()
        .expect("resctl runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_runs_pauses_and_reads_a_rule_and_exit_codes_say_what_went_wrong() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    let operator = app.token("alice", Role::Operator, &scope).await;
    let viewer = app.token("victor", Role::Viewer, &scope).await;
    let id = rule.to_string();
    let url = app.base.clone();
    let (u, o) = (url.clone(), operator.clone());
    let run = move |args: Vec<String>| {
        let (u, o) = (u.clone(), o.clone());
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            resctl(&u, &o, &args)
        })
    };
    let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

    let described = run(args(&["rules", "describe", &id]))
        .await
        .expect("joined");
    assert!(described.status.success(), "{}", text(&described));
    let out = text(&described);
    assert!(
        out.contains("state: idle") && out.contains("every 30 minutes"),
        "{out}"
    );

    let asked = run(args(&["rules", "run-now", &id, "--reason", "complaint"]))
        .await
        .expect("joined");
    assert!(asked.status.success(), "{}", text(&asked));
    assert!(
        text(&asked).starts_with("run requested: "),
        "{}",
        text(&asked)
    );
    let twice = run(args(&["rules", "run-now", &id, "--reason", "again"]))
        .await
        .expect("joined");
    assert_eq!(twice.status.code(), Some(3), "refused: {}", text(&twice));
    assert!(text(&twice).contains("run_requested"), "{}", text(&twice));

    let unknown = Uuid::new_v4().to_string();
    let missing = run(args(&["rules", "pause", &unknown, "--reason", "x"]))
        .await
        .expect("joined");
    assert_eq!(missing.status.code(), Some(4), "{}", text(&missing));

    let listed = run(args(&["executions", "list", "--json"]))
        .await
        .expect("joined");
    assert!(listed.status.success(), "{}", text(&listed));
    let json: serde_json::Value =
        serde_json::from_slice(&listed.stdout).expect("--json prints JSON");
    assert!(json["executions"].is_array(), "{json}");

    let (u, v) = (url.clone(), viewer.clone());
    let read_only = tokio::task::spawn_blocking(move || {
        resctl(&u, &v, &["rules", "pause", &id, "--reason", "x"])
    })
    .await
    .expect("joined");
    assert_eq!(read_only.status.code(), Some(3), "{}", text(&read_only));
    let u = url.clone();
    let bad_token =
        tokio::task::spawn_blocking(move || resctl(&u, "res_not-a-key", &["executions", "list"]))
            .await
            .expect("joined");
    assert_eq!(bad_token.status.code(), Some(6), "{}", text(&bad_token));
    let nowhere = tokio::task::spawn_blocking(move || {
        resctl("http://127.0.0.1:9", &operator, &["executions", "list"])
    })
    .await
    .expect("joined");
    assert_eq!(nowhere.status.code(), Some(5), "{}", text(&nowhere));
    let paused: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT paused_at FROM branch_rules WHERE id = $1")
            .bind(rule)
            .fetch_one(&app.pool)
            .await
            .expect("the rule");
    assert_eq!(paused, None, "the viewer's pause changed nothing");
}
