//! Offline by default, never twice: two runners serve one branch; while the functions are
//! away only the branch's offline owner runs its rules, a restart of the owner changes
//! nothing, and when the functions are back every offline run is recorded once and the
//! other runner does not claim what the owner already ran.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use res_tests::processes::{Runner, eventually};
use uuid::Uuid;

use super::due;
use crate::system::{System, detector};

const LONG_WAIT: Duration = Duration::from_secs(90);
/// The rules' period: `*/3 * * * * *`.
const PERIOD_SECONDS: i64 = 3;

fn offline_runs(runner: &Runner) -> usize {
    runner
        .log()
        .lines()
        .filter(|l| l.contains("job finished") && l.contains("offline=true"))
        .count()
}

/// The runner's `/status` row for `branch`: (owner, held).
async fn owner_seen_by(runner: &Runner, branch: Uuid) -> Option<(String, bool)> {
    let status = runner.status().await?;
    status["offline_owners"].as_array()?.iter().find_map(|o| {
        (o["branch_id"] == serde_json::json!(branch)).then(|| {
            (
                o["owner"].as_str().unwrap_or_default().to_owned(),
                o["held"] == true,
            )
        })
    })
}

/// An execution as the assertions read it.
#[derive(Debug, sqlx::FromRow)]
struct Run {
    status: String,
    offline: bool,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    runner_id: String,
}

/// The next `*/3` second at or after `t`, strictly after when `t` is on the grid.
fn next_due_after(t: DateTime<Utc>) -> DateTime<Utc> {
    let millis = t.timestamp_millis();
    let period = PERIOD_SECONDS * 1000;
    let next = (millis.div_euclid(period) + 1) * period;
    DateTime::<Utc>::from_timestamp_millis(next).unwrap_or(t)
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_functions_away_only_the_branchs_owner_runs_its_rules_and_nothing_runs_twice() {
    let mut system = System::start().await;
    let cron = "*/3 * * * * *";
    let mut rules = Vec::new();
    for _ in 0..3 {
        rules.push(system.rule(due(cron), &detector(0.2, 1)).await);
    }
    let mut owner = system.runner("site-a", &[]);
    eventually(
        "site-a is the branch's offline owner",
        LONG_WAIT,
        || async { owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;
    let mut other = system.runner("site-b", &[]);
    eventually(
        "site-b knows the owner and, having seen it since its start, holds nothing",
        LONG_WAIT,
        || async { owner_seen_by(&other, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;

    // The functions go away: the owner goes on offline, the other runner holds.
    assert!(system.functions.stop(), "the functions stop cleanly");
    eventually("the owner runs every rule offline", LONG_WAIT, || async {
        offline_runs(&owner) >= 2 * rules.len()
    })
    .await;
    assert_eq!(
        owner_seen_by(&other, system.branch).await,
        Some(("site-a".into(), true)),
        "site-b holds the branch's rules during the outage"
    );
    // A crash of the owner while the functions are still away: it restarts from its plan
    // and outbox, still the owner, and goes on without running an occurrence again.
    owner.kill();
    let before_restart = offline_runs(&owner);
    owner.restart();
    eventually("the restarted owner goes on offline", LONG_WAIT, || async {
        offline_runs(&owner) >= before_restart + rules.len()
    })
    .await;

    system.functions.restart().await;
    for runner in [&owner, &other] {
        eventually(
            "both runners are back, outboxes delivered, nothing held",
            LONG_WAIT,
            || async {
                let back = runner
                    .status()
                    .await
                    .is_some_and(|s| s["outbox_depth"] == 0 && s["cloud_reachable"] == true);
                back && owner_seen_by(runner, system.branch)
                    .await
                    .is_some_and(|(_, held)| !held)
            },
        )
        .await;
    }
    // Runs go on online for a few periods.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(owner.stop() && other.stop());

    assert_eq!(offline_runs(&other), 0, "only the owner ran offline");
    let mut recorded_offline = 0;
    for rule in &rules {
        let runs: Vec<Run> = sqlx::query_as(
            "SELECT status, offline, started_at, finished_at, runner_id FROM executions \
             WHERE branch_rule_id = $1 ORDER BY started_at",
        )
        .bind(rule)
        .fetch_all(&system.pool)
        .await
        .expect("executions");
        assert!(runs.iter().all(|r| r.status == "completed"), "{runs:?}");
        for run in runs.iter().filter(|r| r.offline) {
            assert_eq!(
                run.runner_id, "site-a",
                "offline runs are the owner's: {runs:?}"
            );
            recorded_offline += 1;
        }
        // Every run starts at or after the first due time after the previous run ended:
        // a second run of one occurrence (a claim over an offline run not yet reported)
        // would start before it.
        for pair in runs.windows(2) {
            let (Some(finished), Some(started)) = (pair[0].finished_at, pair[1].started_at) else {
                panic!("a run without times: {runs:?}");
            };
            assert!(
                started >= next_due_after(finished) - TimeDelta::milliseconds(100),
                "rule {rule}: {:?} started {started} before the occurrence after {finished}: {runs:?}",
                pair[1]
            );
        }
        assert_eq!(
            system.violations(*rule).await,
            runs.len(),
            "one violation per run"
        );
    }
    assert_eq!(
        recorded_offline,
        offline_runs(&owner),
        "every offline run the owner finished is recorded, once"
    );
    assert_eq!(system.superseded().await, 0);
    for runner in [&owner, &other] {
        let rejected = runner.state_dir.join("outbox").join("rejected");
        assert_eq!(std::fs::read_dir(&rejected).map_or(0, |d| d.count()), 0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn when_the_owner_dies_the_other_runner_takes_the_branch_over_once_it_is_stale() {
    let system = System::start_with(&["--runner-stale-after", "3"]).await;
    system.rule(due("*/2 * * * * *"), &detector(0.0, 0)).await;
    let mut owner = system.runner("site-a", &[]);
    eventually("site-a owns the branch", LONG_WAIT, || async {
        owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false))
    })
    .await;
    let mut other = system.runner("site-b", &[]);
    eventually("site-b sees site-a as the owner", LONG_WAIT, || async {
        owner_seen_by(&other, system.branch)
            .await
            .is_some_and(|(owner, _)| owner == "site-a")
    })
    .await;
    owner.kill();
    eventually("site-b took the branch over", LONG_WAIT, || async {
        owner_seen_by(&other, system.branch).await == Some(("site-b".into(), false))
    })
    .await;
    let runs_before: i64 =
        sqlx::query_scalar("SELECT count(*) FROM executions WHERE runner_id = 'site-b'")
            .fetch_one(&system.pool)
            .await
            .expect("count");
    eventually("site-b runs the branch's rule", LONG_WAIT, || async {
        let runs: i64 =
            sqlx::query_scalar("SELECT count(*) FROM executions WHERE runner_id = 'site-b'")
                .fetch_one(&system.pool)
                .await
                .expect("count");
        runs > runs_before
    })
    .await;
    assert!(other.stop());
}
