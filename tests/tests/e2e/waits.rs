//! A real runner waiting minutes on its plan: one request per wait, still alive in the
//! registry past the stale time, a Run now still within moments — also when the change is
//! made through another `serve` process — and `serve` stopping at once instead of waiting
//! the wait out.

use std::time::{Duration, Instant};

use res_tests::processes::{FunctionsServer, Runner, RunnerSpec, binary, eventually, free_port};

use crate::WAIT;
use crate::system::{System, answered, metrics_text};

const PLAN: &str = "function=\"get-execution-plan-v2\"";

/// The `res_functions_plan_requests_waiting` gauge.
pub(crate) async fn waiting(metrics: &str) -> u64 {
    metrics_text(metrics)
        .await
        .lines()
        .find_map(|l| l.strip_prefix("res_functions_plan_requests_waiting "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the waiting gauge is exported")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_waiting_minutes_asks_once_stays_alive_and_serve_stops_without_waiting_it_out() {
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}/metrics");
    let mut system = System::start_with(&[
        "--metrics-bind",
        &format!("127.0.0.1:{metrics_port}"),
        "--plan-wait-max-seconds",
        "240",
        "--runner-stale-after",
        "3",
    ])
    .await;
    // Due tomorrow: only a Run now makes it run today.
    let rule = system.tomorrows_rule(0.0).await;
    let mut runner = system.runner("site-1", &[("PLAN_WAIT_SECONDS", "240")]);
    eventually("the runner waits on its plan", WAIT, || async {
        waiting(&metrics).await == 1
    })
    .await;
    let asked = answered(&metrics, PLAN).await;

    // Three stale times later it has not asked again, and still counts as alive.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        answered(&metrics, PLAN).await,
        asked,
        "no plan request answered meanwhile"
    );
    assert_eq!(waiting(&metrics).await, 1);
    let silent: f64 = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM now() - last_seen_at)::float8 FROM runners WHERE runner_id = 'site-1'",
    )
    .fetch_one(&system.pool)
    .await
    .expect("registered");
    assert!(silent < 3.0, "kept present: seen {silent:.1} s ago");
    let listed = system
        .resctl(&system.operator, &["runners", "list", "--json"])
        .await;
    assert!(listed.status.success(), "{listed:?}");
    let listing: serde_json::Value =
        serde_json::from_slice(&listed.stdout).expect("resctl prints JSON");
    assert_eq!(listing["runners"][0]["runner_id"], "site-1", "{listing}");
    assert_eq!(listing["runners"][0]["state"], "alive", "{listing}");

    // A Run now still arrives through the open request.
    sqlx::query("UPDATE branch_rules SET run_requested_at = now() WHERE id = $1")
        .bind(rule)
        .execute(&system.pool)
        .await
        .expect("run requested");
    system.completes(rule, "the run-now ran").await;

    eventually("the runner waits again", WAIT, || async {
        waiting(&metrics).await == 1
    })
    .await;
    let stopping = Instant::now();
    assert!(system.functions.stop(), "serve stops cleanly");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "serve answered the waiting request instead of waiting 240 s: {:?}",
        stopping.elapsed()
    );
    assert!(runner.stop());
}

/// Once a runner's plan request waits at the `serve` whose metrics are at `metrics`, a Run
/// now of `rule` (sent through `system`'s `serve`) reaches it long before its wait (two
/// minutes or more) ends: the rule's one execution, completed.
pub(crate) async fn woken_run(
    system: &System,
    metrics: &str,
    rule: uuid::Uuid,
    reason: &str,
) -> Vec<(uuid::Uuid, String, Option<uuid::Uuid>, bool, String)> {
    eventually("the runner waits on its plan", WAIT, || async {
        waiting(metrics).await == 1
    })
    .await;
    let asked = Instant::now();
    system.run_now(rule, reason).await;
    assert!(
        asked.elapsed() < Duration::from_secs(60),
        "woken, not timed out: {:?}",
        asked.elapsed()
    );
    let executions = system.executions(rule).await;
    assert_eq!(executions.len(), 1, "{executions:?}");
    assert_eq!(executions[0].1, "completed");
    executions
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_made_through_one_serve_wakes_a_plan_request_waiting_at_another() {
    // Two processes over one database, as behind a load balancer or sharing a port
    // (`--reuse-port`): each hears changes on its own LISTEN connection.
    let system = System::start_with(&["--plan-wait-max-seconds", "240"]).await;
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}/metrics");
    let other = FunctionsServer::start_with(
        &binary("res-functions"),
        system.database_url(),
        &system.dir.join("functions-b.log"),
        &[
            "--plan-wait-max-seconds",
            "240",
            "--metrics-bind",
            &format!("127.0.0.1:{metrics_port}"),
        ],
    )
    .await;
    let rule = system.tomorrows_rule(0.0).await;
    let mut runner = Runner::start(
        RunnerSpec {
            binary: &binary("res-runner"),
            dir: &system.dir,
            name: "site-b",
            functions_url: &other.url(),
            token: &system.token,
        },
        &[("PLAN_WAIT_SECONDS", "240")],
        &[],
    );
    // The Run now goes through the first process; the runner hears it through the second.
    let executions = woken_run(&system, &metrics, rule, "through the other process").await;
    assert_eq!(
        (executions[0].1.as_str(), executions[0].4.as_str()),
        ("completed", "site-b")
    );
    assert!(runner.stop());
}
