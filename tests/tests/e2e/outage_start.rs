//! An occurrence claimed by one runner in the instant before the functions die: the
//! branch's offline owner, which never heard of that claim, must not run it offline too,
//! and must still run on time what comes due after.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use nix::sys::signal::Signal;
use res_tests::processes::eventually;
use uuid::Uuid;

use super::due;
use super::offline::{next_due_after, offline_runs, owner_seen_by};
use crate::system::System;

const LONG_WAIT: Duration = Duration::from_secs(90);
const PERIOD_SECONDS: i64 = 6;

async fn sleep_until(at: DateTime<Utc>) {
    let wait = (at - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait).await;
}

#[derive(Debug, sqlx::FromRow)]
struct Run {
    runner_id: String,
    status: String,
    offline: bool,
    started_at: Option<DateTime<Utc>>,
}

#[tokio::test(flavor = "multi_thread")]
async fn an_occurrence_claimed_just_before_the_functions_die_is_not_run_again_offline() {
    let mut system = System::start().await;
    let starts = system.dir.join("detector-starts");
    let script = format!(
        "cat >/dev/null; echo start >> {}; sleep 0.3; \
         echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 0}}'",
        starts.display()
    );
    let cron = format!("*/{PERIOD_SECONDS} * * * * *");
    let rule = system.rule(due(&cron), &script).await;
    // A lease far longer than the outage: the hold ends at the next occurrence, not there.
    let settings = [("LEASE_SECONDS", "60")];
    let mut owner = system.runner("site-a", &settings);
    eventually(
        "site-a is the branch's offline owner",
        LONG_WAIT,
        || async { owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;
    let mut other = system.runner("site-c", &settings);
    eventually(
        "site-c knows the owner and holds nothing",
        LONG_WAIT,
        || async { owner_seen_by(&other, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;

    // The owner is frozen over the next due second, so site-c claims it; the functions
    // die right after that claim, before the owner can hear of it.
    let due_at = next_due_after(Utc::now() + TimeDelta::seconds(3), PERIOD_SECONDS);
    sleep_until(due_at - TimeDelta::milliseconds(1_500)).await;
    owner.signal(Signal::SIGSTOP);
    let claimed: Option<Uuid> = {
        let mut found = None;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while found.is_none() && std::time::Instant::now() < deadline {
            found = sqlx::query_scalar(
                "SELECT id FROM executions WHERE branch_rule_id = $1 AND runner_id = 'site-c' \
                 AND started_at >= $2",
            )
            .bind(rule)
            .bind(due_at - TimeDelta::milliseconds(500))
            .fetch_optional(&system.pool)
            .await
            .expect("executions");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        found
    };
    system.functions.kill();
    owner.signal(Signal::SIGCONT);
    assert!(
        claimed.is_some(),
        "site-c claimed the occurrence due at {due_at}"
    );

    // Two more occurrences come due in the outage: the owner runs them offline, on time.
    eventually(
        "the owner runs what comes due after, offline",
        LONG_WAIT,
        || async { offline_runs(&owner) >= 2 },
    )
    .await;
    system.functions.restart().await;
    for runner in [&owner, &other] {
        eventually("both runners delivered everything", LONG_WAIT, || async {
            runner.delivered_everything().await
        })
        .await;
    }
    assert!(owner.stop() && other.stop());
    let owner_log = owner.log();

    let runs: Vec<Run> = sqlx::query_as(
        "SELECT runner_id, status, offline, started_at FROM executions \
         WHERE branch_rule_id = $1 AND started_at >= $2 ORDER BY started_at",
    )
    .bind(rule)
    .bind(due_at - TimeDelta::milliseconds(500))
    .fetch_all(&system.pool)
    .await
    .expect("executions");
    let first = runs.first().expect("the occurrence was run");
    assert_eq!(
        (first.runner_id.as_str(), first.offline),
        ("site-c", false),
        "the occurrence due at {due_at} is site-c's claimed run: {runs:?}"
    );
    // One run per occurrence: two runs of one due second would start within a period.
    for pair in runs.windows(2) {
        let (Some(a), Some(b)) = (pair[0].started_at, pair[1].started_at) else {
            panic!("a run without a start: {runs:?}");
        };
        assert!(
            b - a >= TimeDelta::seconds(PERIOD_SECONDS - 2),
            "two runs of one occurrence: {runs:?}"
        );
    }
    assert!(
        runs.iter()
            .filter(|r| r.offline && r.runner_id == "site-a")
            .count()
            >= 2,
        "the owner ran the later occurrences offline: {runs:?}"
    );
    assert!(runs.iter().all(|r| r.status == "completed"), "{runs:?}");
    let started = std::fs::read_to_string(&starts).unwrap_or_default();
    let all: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE branch_rule_id = $1")
        .bind(rule)
        .fetch_one(&system.pool)
        .await
        .expect("count");
    assert_eq!(
        started.lines().count() as i64,
        all,
        "every detector start is one execution"
    );
    assert!(
        owner_log.contains("occurrences due before the outage was known are not run offline"),
        "the owner says why it held the occurrence"
    );
}
