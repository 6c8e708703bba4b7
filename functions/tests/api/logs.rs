//! The functions' log as an operator reads it: client-supplied text cannot forge lines or
//! drive the terminal, and a log file carries no colour codes.

use res_tests::functions::{Seed, client};
use res_tests::postgres::server;
use res_tests::processes::FunctionsServer;
use serde_json::json;

#[tokio::test]
async fn client_text_cannot_forge_log_lines_or_reach_the_log_raw() {
    res_tests::functions::install_tls();
    let database = server().create_database().await;
    let pool = sqlx::PgPool::connect(&database.url).await.expect("connect");
    res_functions::db::migrate(&pool).await.expect("migrations");
    let seed = Seed::new(&pool);
    let branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
    let token = res_functions::auth::generate_token();
    res_functions::db::api_keys::insert(
        &pool,
        "site",
        &res_functions::auth::hash_token(&token),
        res_functions::auth::Role::Runner,
        &res_functions::db::api_keys::KeyScope {
            branch_ids: vec![branch],
            ..Default::default()
        },
    )
    .await
    .expect("runner key");
    let dir = std::env::temp_dir().join(format!("res-logs-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("log dir");
    let log = dir.join("functions.log");
    let mut functions = FunctionsServer::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_res-functions")),
        &database.url,
        &log,
    )
    .await;
    let forged = "site-1\n2026-11-23T00:00:00.000000Z  INFO forged: admin logged in";
    let escapes = "boot\u{1b}[31mred\u{1b}]0;owned\u{7}\r";
    let reply = client()
        .post(format!("{}/runner_register", functions.url()))
        .bearer_auth(&token)
        .json(&json!({"runner_id": forged, "boot_id": escapes}))
        .send()
        .await
        .expect("answer");
    assert_eq!(reply.status(), 200);
    assert!(functions.stop(), "stops cleanly");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("runner registered"), "{text}");
    assert!(
        !text
            .lines()
            .any(|line| line.starts_with("2026-11-23T00:00:00")),
        "a forged line: {text}"
    );
    assert!(
        text.contains("site-1\\u{a}2026"),
        "the newline is shown escaped: {text}"
    );
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'),
        "no raw control characters (and no colour codes) in a log file: {text:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
