//! The functions behind PgBouncer (docs/deploy.md, "Connection poolers"): in session mode
//! everything works — runs, plan requests woken by a change, revocations heard at once —
//! and in transaction or statement mode the functions refuse to start, saying what to do
//! instead.

use std::process::Command;
use std::time::Duration;

use res_tests::pgbouncer::{PgBouncer, PoolMode};
use res_tests::postgres::{PgServer, start_in};
use res_tests::processes::{binary, eventually, free_port};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use uuid::Uuid;

use crate::system::{System, functions_cli};
use crate::waits::woken_run;

/// A server of the test's own (PgBouncer needs its socket) with an empty database `res`;
/// its watchdog removes it once the tests end.
async fn server_with_database(name: &str) -> PgServer {
    let dir = std::env::temp_dir().join(format!("res-pooler-{name}-{}", Uuid::new_v4()));
    let server = tokio::task::spawn_blocking(move || start_in(&dir))
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("cannot start the test's server: {e}"));
    let mut admin = PgConnection::connect(&server.url("postgres"))
        .await
        .expect("connect directly");
    sqlx::query(AssertSqlSafe("CREATE DATABASE res"))
        .execute(&mut admin)
        .await
        .expect("create the database");
    let _ = admin.close().await;
    server
}

#[tokio::test(flavor = "multi_thread")]
async fn behind_pgbouncer_in_session_mode_runs_run_waits_wake_and_revocations_are_heard() {
    let server = server_with_database("session").await;
    let bouncer = PgBouncer::start(&server, PoolMode::Session, 30).await;
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}/metrics");
    // Migrated, served and seeded through the pooler.
    let system = System::start_on_url(
        &bouncer.url("res"),
        &[
            "--metrics-bind",
            &format!("127.0.0.1:{metrics_port}"),
            "--plan-wait-max-seconds",
            "120",
        ],
    )
    .await;
    assert!(
        bouncer.log().contains("db=res"),
        "the functions connected through PgBouncer: {}",
        bouncer.log()
    );
    // PgBouncer dropped the startup option that turns the JIT off: the log says what to do.
    let log = || std::fs::read_to_string(system.dir.join("functions.log")).unwrap_or_default();
    assert!(
        log().contains("ALTER ROLE") && log().contains("JIT is on"),
        "{}",
        log()
    );

    // A run: claimed and reported through the pooler.
    let rule = system.tomorrows_rule(0.0).await;
    let mut runner = system.runner("site-1", &[("PLAN_WAIT_SECONDS", "120")]);
    // The change wakes the waiting request (the LISTEN connection works through the
    // pooler).
    woken_run(&system, &metrics, rule, "through the pooler").await;

    // A revoked key stops at once, not when the 60-second key cache would forget it.
    let listed = system
        .resctl(&system.operator, &["runners", "list", "--json"])
        .await;
    assert!(listed.status.success(), "{listed:?}");
    let key: Uuid = sqlx::query_scalar("SELECT id FROM api_keys WHERE name = 'alice'")
        .fetch_one(&system.pool)
        .await
        .expect("the operator's key");
    functions_cli(system.database_url(), &["revoke-api-key", &key.to_string()]);
    eventually(
        "the revocation is heard",
        Duration::from_secs(20),
        || async {
            let listed = system
                .resctl(&system.operator, &["runners", "list", "--json"])
                .await;
            !listed.status.success()
        },
    )
    .await;
    assert!(runner.stop());
    assert!(!log().contains("pool_mode = transaction"), "{}", log());
}

/// `res-functions <args>` through `url`, stopped after a minute (a `serve` that was not
/// refused would serve on): whether it succeeded, and what it printed.
fn functions_at(url: &str, args: &[String]) -> (bool, String) {
    let output = Command::new("timeout")
        .arg("60")
        .arg(binary("res-functions"))
        .args(args)
        .env("DATABASE_URL", url)
        .env("RES_SECRETS_KEYS", res_tests::secrets_keys())
        .output()
        .expect("res-functions runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

#[tokio::test(flavor = "multi_thread")]
async fn behind_pgbouncer_in_transaction_or_statement_mode_the_functions_refuse_to_start_and_say_why()
 {
    let server = server_with_database("transaction").await;
    for mode in [PoolMode::Transaction, PoolMode::Statement] {
        let bouncer = PgBouncer::start(&server, mode, 5).await;
        let url = bouncer.url("res");
        let bind = format!("127.0.0.1:{}", free_port());
        for args in [vec!["migrate"], vec!["serve", "--bind", &bind]] {
            let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
            let url = url.clone();
            let (ok, printed) = tokio::task::spawn_blocking(move || functions_at(&url, &args))
                .await
                .expect("joined");
            assert!(!ok, "{mode:?}: refused: {printed}");
            assert!(
                printed.contains("pool_mode = transaction")
                    && printed.contains("pool_mode = session")
                    && printed.contains("Connection poolers"),
                "{mode:?}: says what is wrong and what to do: {printed}"
            );
        }
    }
    // Refused before it changed anything: the database is still empty.
    let mut direct = PgConnection::connect(&server.url("res"))
        .await
        .expect("connect directly");
    let tables: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            .fetch_one(&mut direct)
            .await
            .expect("tables");
    assert_eq!(tables, 0, "nothing was migrated");
}
