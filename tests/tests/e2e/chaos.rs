//! A bad day for a site host: the runner process frozen, the functions gone for longer
//! than a lease, the runner killed with detectors running, second-level schedules.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use nix::sys::signal::Signal;
use res_tests::functions::{RuleSpec, hourly_cron};
use res_tests::processes::eventually;
use uuid::Uuid;

use super::{WAIT, due};
use crate::system::{System, answered, assert_no_overlap, detector};

/// Sets `timeout_seconds` of the detector `rule` runs.
async fn detector_timeout(system: &System, rule: Uuid, seconds: u64) {
    sqlx::query(
        "UPDATE action_templates SET config = config || jsonb_build_object('timeout_seconds', $2::bigint) \
         WHERE id = (SELECT (c.workflow_config->'nodes'->'detect'->>'action_template_id')::uuid \
                     FROM action_template_connections c JOIN branch_rules br ON br.rule_id = c.rule_id \
                     WHERE br.id = $1)",
    )
    .bind(rule)
    .bind(seconds as i64)
    .execute(&system.pool)
    .await
    .expect("detector timeout");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_runner_and_an_outage_longer_than_the_lease_cause_no_false_failure_and_no_superseded_report()
 {
    let mut system = System::start().await;
    // Heartbeats every 3 s: a 4 s freeze stays inside the lease, a 12 s outage does not.
    // Requests time out after 10 s, not the tests' 3: a plan request in flight when the host
    // froze would otherwise be past its deadline on waking, and whether its answer or its
    // timeout is seen first is a race that logs a zero-second outage.
    let mut runner = system.runner(
        "site-1",
        &[("LEASE_SECONDS", "9"), ("REQUEST_TIMEOUT_SECONDS", "10")],
    );

    // 1. The host stalls (SIGSTOP) for longer than the detector's timeout while the
    //    detector finishes in one second: the run keeps its result.
    let frozen = system
        .rule(due(&format!("0 {}", hourly_cron())), &detector(1.0, 0))
        .await;
    detector_timeout(&system, frozen, 2).await;
    eventually("the detector runs", WAIT, || async {
        system.statuses(frozen).await.iter().any(|s| s == "running")
    })
    .await;
    runner.signal(Signal::SIGSTOP);
    tokio::time::sleep(Duration::from_secs(4)).await;
    runner.signal(Signal::SIGCONT);
    eventually("the frozen run is reported", WAIT, || async {
        system
            .statuses(frozen)
            .await
            .iter()
            .any(|s| s != "running" && s != "scheduled")
    })
    .await;
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, error FROM executions WHERE branch_rule_id = $1")
            .bind(frozen)
            .fetch_one(&system.pool)
            .await
            .expect("execution");
    assert_eq!(
        (status.as_str(), error.as_deref()),
        ("completed", None),
        "no false timeout after the host pause"
    );

    // 2. The functions go away mid-run for longer than the lease; the run's report waits
    //    in the outbox while the rule comes due again locally.
    let busy = system.rule(due("*/3 * * * * *"), &detector(2.0, 0)).await;
    eventually("the busy rule runs", WAIT, || async {
        system.statuses(busy).await.iter().any(|s| s == "running")
    })
    .await;
    let in_flight = system.executions(busy).await[0].0;
    assert!(system.functions.stop());
    tokio::time::sleep(Duration::from_secs(12)).await;
    system.functions.restart().await;
    eventually("the rule ran again after the outage", WAIT, || async {
        system
            .statuses(busy)
            .await
            .iter()
            .filter(|s| *s == "completed")
            .count()
            >= 2
    })
    .await;
    eventually("the outbox is empty", WAIT, || async {
        runner
            .status()
            .await
            .is_some_and(|s| s["outbox_depth"] == 0)
    })
    .await;
    let executions = system.executions(busy).await;
    assert_eq!(executions[0].0, in_flight);
    assert_eq!(
        executions[0].1, "completed",
        "the run finished during the outage is recorded as finished, not crashed: {executions:?}"
    );
    assert!(
        executions.iter().all(|e| e.1 != "crashed"),
        "{executions:?}"
    );
    assert_eq!(system.superseded().await, 0);
    let rejected = runner.state_dir.join("outbox").join("rejected");
    assert_eq!(
        std::fs::read_dir(&rejected).map_or(0, |d| d.count()),
        0,
        "nothing refused for good"
    );
    let (_, metrics) = runner.get("/metrics").await.expect("metrics");
    assert!(
        metrics.contains("res_runner_reports_superseded_total 0"),
        "{metrics}"
    );
    assert!(runner.stop());

    // The outage is two log lines, not one per due rule and retry.
    let log = runner.log();
    let count = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("outage started"), 1, "{log}");
    assert_eq!(count("outage ended"), 1, "{log}");
    assert_eq!(count("functions unreachable: not running"), 0, "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_runners_detectors_are_ended_by_its_next_boot() {
    let system = System::start().await;
    let pid_file = system.dir.join("detector.pid");
    let script = format!(
        "cat >/dev/null; echo $$ > {}; sleep 120; echo '{{\"violations\": 0}}'",
        pid_file.display()
    );
    system
        .rule(due(&format!("0 {}", hourly_cron())), &script)
        .await;
    let mut runner = system.runner("site-1", &[]);
    eventually("the detector started", WAIT, || async { pid_file.exists() }).await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("the detector's pid");
    let alive = |pid: i32| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    runner.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        alive(pid),
        "kill -9 of the runner leaves its detector running"
    );
    runner.restart();
    eventually("the next boot ended the orphan", WAIT, || async {
        !alive(pid)
    })
    .await;
    eventually("and says so", WAIT, || async {
        runner
            .log()
            .contains("ended detectors an earlier boot left running")
    })
    .await;
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_level_schedule_runs_every_time_despite_recent_seconds() {
    let system = System::start().await;
    let rule = system.rule(due("*/2 * * * * *"), &detector(0.0, 0)).await;
    // The default dedupe window, far longer than the period.
    let mut runner = system.runner("site-1", &[("RECENT_SECONDS", "30")]);
    eventually("a first run", WAIT, || async {
        system.rule_row(rule).await.2 >= 1
    })
    .await;
    let (_, _, first, _) = system.rule_row(rule).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let (_, _, later, _) = system.rule_row(rule).await;
    assert!(runner.stop());
    // Every 2 s for 12 s is 6 runs; a 30 s window would have allowed none.
    assert!(
        later - first >= 4,
        "{} runs in 12 s of a */2 seconds schedule",
        later - first
    );
}

/// Rules due every 2 s inside a `00:00`–`24:00` window (a window value that once made every
/// delta answer 500), two runners, each killed with `kill -9` online and the owner again
/// during an outage: the functions answer no 500, no two executions of one rule overlap in
/// the database, and every detector run has its execution record.
#[tokio::test(flavor = "multi_thread")]
async fn a_bad_day_with_an_all_day_window_answers_no_500_overlaps_no_run_and_loses_no_record() {
    let metrics_port = res_tests::processes::free_port();
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let mut system = System::start_with(&[
        "--metrics-bind",
        &format!("127.0.0.1:{metrics_port}"),
        "--sweep-interval",
        "1",
    ])
    .await;
    let starts = system.dir.join("detector-starts");
    std::fs::create_dir_all(&starts).expect("dir");
    let mut rules = Vec::new();
    for i in 0..4 {
        // The detector notes the execution it runs for before it works.
        let script = format!(
            "input=$(cat); echo \"$input\" | grep -o '\"execution_id\":\"[^\"]*\"' | head -1 \
             | cut -d'\"' -f4 >> {dir}/{i}; sleep 1.2; \
             echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 0}}'",
            dir = starts.display()
        );
        let spec = RuleSpec {
            cron: Some("*/2 * * * * *"),
            window: Some(("00:00", "24:00")),
            next_run_time: Some(Utc::now() - TimeDelta::seconds(10)),
            ..RuleSpec::default()
        };
        rules.push((i, system.rule(spec, &script).await));
    }
    let lease = [("LEASE_SECONDS", "6")];
    let mut owner = system.runner("site-a", &lease);
    eventually("site-a runs", WAIT, || async {
        owner.reaches_functions().await
    })
    .await;
    let mut other = system.runner("site-b", &lease);
    tokio::time::sleep(Duration::from_secs(5)).await;

    // kill -9 online, mid-run more often than not; leases and the sweeper recover.
    other.kill();
    other.restart();
    owner.kill();
    owner.restart();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut errors = answered(&metrics_url, "status=\"500\"").await;

    // The functions go away; the owner runs offline and is killed mid-run.
    assert!(system.functions.stop());
    tokio::time::sleep(Duration::from_secs(4)).await;
    owner.kill();
    owner.restart();
    tokio::time::sleep(Duration::from_secs(3)).await;
    system.functions.restart().await;
    for runner in [&owner, &other] {
        eventually("outboxes delivered", Duration::from_secs(90), || async {
            runner.delivered_everything().await
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(owner.stop() && other.stop());
    // Leases of runs cut off by the stops run out and are swept.
    tokio::time::sleep(Duration::from_secs(8)).await;
    errors += answered(&metrics_url, "status=\"500\"").await;
    assert_eq!(errors, 0, "the functions answered 500");

    for (i, rule) in rules {
        let runs = system.runs_in_order(rule).await;
        assert!(runs.len() >= 4, "rule {rule} ran: {runs:?}");
        for run in &runs {
            assert!(
                !matches!(run.1.as_str(), "scheduled" | "running"),
                "every run ended: {runs:?}"
            );
        }
        assert!(
            runs.iter().all(|run| run.4.is_some()),
            "an ended run has an end: {runs:?}"
        );
        assert_no_overlap(&format!("rule {rule}"), &runs);
        let recorded: std::collections::HashSet<Uuid> = runs.iter().map(|r| r.0).collect();
        let detected = std::fs::read_to_string(starts.join(i.to_string())).unwrap_or_default();
        for id in detected.lines() {
            let id: Uuid = id.trim().parse().expect("an execution id");
            assert!(
                recorded.contains(&id),
                "rule {rule}: the detector ran for {id}, which has no record: {runs:?}"
            );
        }
        assert!(detected.lines().count() >= 4, "{detected}");
    }
}

/// Two runners on a branch, rules every 4 s whose detectors take 2.5 s; the functions go
/// away for longer than the lease while runs are going on one of the runners. Those runs'
/// reports wait in that runner's outbox; the other runner leaves their rules alone after
/// the outage until the reports are in (or it took their claims shortly before), so no
/// finished run is crashed and no occurrence runs twice.
#[tokio::test(flavor = "multi_thread")]
async fn after_an_outage_longer_than_the_lease_no_runner_takes_a_rule_whose_report_is_on_its_way() {
    let mut system = System::start().await;
    let rules = crate::restarts::counted_rules(&system, 3, "*/4 * * * * *", 2.5).await;
    let mut runners = [system.runner("site-a", &[]), system.runner("site-b", &[])];
    crate::restarts::two_running(&system, &rules).await;
    // The tests' lease is 3 s: every running lease runs out during the outage.
    assert!(system.functions.stop());
    tokio::time::sleep(Duration::from_secs(6)).await;
    system.functions.restart().await;
    let before = crate::restarts::total_runs(&system, &rules).await;
    eventually("the rules run again", WAIT, || async {
        crate::restarts::total_runs(&system, &rules).await >= before + rules.len()
    })
    .await;
    let ids: Vec<Uuid> = rules.iter().map(|(r, _)| *r).collect();
    for runner in &runners {
        system.pause_and_settle(&ids, runner, WAIT).await;
    }
    let held: usize = runners
        .iter()
        .map(|r| r.log().matches("are left alone for a lease").count())
        .sum();
    for runner in &mut runners {
        assert!(runner.stop());
    }
    // Every run completed (none crashed), one detector start and one violation each. A
    // report may still be stored as superseded: the branch's offline owner ran the rule's
    // next occurrence during the outage, before the report of the one before arrived.
    crate::restarts::nothing_lost_or_doubled(&system, &rules).await;
    // Whether a runner still holds a rule when its outage ends depends on who the offline
    // owner was (its own offline runs move the rule on); the figure is for the reader.
    eprintln!("rules left alone after the outage: {held}");
}
