//! A site's disk refusing writes (docs/faults.md): the runner's state directory on a small
//! tmpfs, filled up or made read-only, across an outage of the functions.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_tests::functions::RuleSpec;
use res_tests::processes::eventually;
use res_tests::tmpfs::Tmpfs;

use crate::system::System;

const WAIT: Duration = Duration::from_secs(60);

/// How the disk refuses.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    Full,
    ReadOnly,
}

/// A run finishing during an outage with its report and violation refused by the disk:
/// both held in memory and delivered when the functions are back; offline runs not started
/// (their start cannot be journalled); the status page, `/healthz` and `/metrics` say so;
/// when the disk takes writes again, nothing is left behind and nothing arrives twice.
async fn a_refusing_disk_loses_nothing(refusal: Refusal) {
    let mut system = System::start().await;
    let starts = system.dir.join("starts");
    let detector = format!(
        "cat >/dev/null; echo start >> '{}'; sleep 2; \
         echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 1}}'",
        starts.display()
    );
    let spec = RuleSpec {
        cron: Some("*/3 * * * * *"),
        next_run_time: Some(Utc::now() - TimeDelta::seconds(5)),
        ..RuleSpec::default()
    };
    let rule = system.rule(spec, &detector).await;
    let disk = Tmpfs::mount(&system.dir.join("site-1"), 2048);
    // The tmpfs is far smaller than the low-space threshold: only the refusal is tested here.
    let mut runner = system.runner("site-1", &[("STATE_FREE_WARN_MB", "0")]);
    eventually("runs online", WAIT, || async {
        system.rule_row(rule).await.2 >= 2
    })
    .await;
    match refusal {
        Refusal::Full => disk.fill(),
        Refusal::ReadOnly => disk.read_only(true),
    }
    eventually("a run is under way", WAIT, || async {
        system.statuses(rule).await.iter().any(|s| s == "running")
    })
    .await;
    assert!(system.functions.stop());
    eventually("the report is held in memory", WAIT, || async {
        runner.status().await.is_some_and(|s| {
            s["outbox_in_memory"].as_u64() >= Some(1) && !s["state_unwritable"].is_null()
        })
    })
    .await;
    let (_, health) = runner.get("/healthz").await.expect("healthz");
    assert!(health.contains("\"status\":\"degraded\""), "{health}");
    let (_, metrics) = runner.get("/metrics").await.expect("metrics");
    assert!(
        metrics.contains("res_runner_state_unwritable 1"),
        "{metrics}"
    );
    let (_, page) = runner.get("/").await.expect("page");
    assert!(page.contains("State directory unwritable since"), "{page}");
    // Due runs meet the outage: none starts offline, as its start cannot be journalled.
    eventually("an offline run is refused", WAIT, || async {
        runner
            .log()
            .contains("cannot record the offline run's start; not running it")
    })
    .await;
    system.functions.restart().await;
    eventually("what was held is delivered", WAIT, || async {
        runner.delivered_everything().await
    })
    .await;
    // The fleet view names the site's runner and why, as `resctl fleet` shows it.
    let fleet = || async {
        let out = system.resctl(&system.operator, &["fleet"]).await;
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    eventually("the fleet view lists the runner's disk", WAIT, || async {
        fleet()
            .await
            .contains("runner site-1 (Branch (offline owner)) its disk refuses writes since")
    })
    .await;
    match refusal {
        Refusal::Full => disk.free(),
        Refusal::ReadOnly => disk.read_only(false),
    }
    eventually("the fleet view no longer lists it", WAIT, || async {
        !fleet().await.contains("runner site-1")
    })
    .await;
    eventually("the disk is seen to take writes again", WAIT, || async {
        runner
            .status()
            .await
            .is_some_and(|s| s["state_unwritable"].is_null())
    })
    .await;
    system.pause_and_settle(&[rule], &runner, WAIT).await;
    assert!(runner.stop());
    let executions = system.executions(rule).await;
    assert!(
        executions.iter().all(|e| e.1 == "completed" && !e.3),
        "every run completed online, none offline, none crashed: {executions:?}"
    );
    let detectors = std::fs::read_to_string(&starts)
        .map(|t| t.lines().count())
        .unwrap_or(0);
    assert_eq!(detectors, executions.len(), "one detector per recorded run");
    assert_eq!(
        system.violations(rule).await,
        executions.len(),
        "one violation per run, none lost, none twice"
    );
    assert!(
        runner.log().contains("the outbox can be written again"),
        "{}",
        runner.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_loses_no_report_or_violation_and_starts_no_offline_run() {
    a_refusing_disk_loses_nothing(Refusal::Full).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_disk_loses_no_report_or_violation_and_starts_no_offline_run() {
    a_refusing_disk_loses_nothing(Refusal::ReadOnly).await;
}

/// A state directory that fills without a write failing yet is seen first: `/healthz`
/// degraded, the status page, `/status`, the metric, and the fleet view name it; with room
/// again, each clears.
#[tokio::test(flavor = "multi_thread")]
async fn a_disk_filling_up_is_seen_before_a_write_fails() {
    let system = System::start().await;
    let disk = Tmpfs::mount(&system.dir.join("site-1"), 4096);
    // 4 MiB with a 2 MiB threshold: room at first.
    let runner = system.runner("site-1", &[("STATE_FREE_WARN_MB", "2")]);
    let up = tokio::time::timeout(WAIT, async {
        while runner.status().await.is_none() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(up.is_ok(), "the runner is up: {}", runner.log());
    // Room at first (its workers may still be starting: health says so once they are).
    eventually("health is ok with room on the disk", WAIT, || async {
        runner
            .get("/healthz")
            .await
            .is_some_and(|(_, body)| body.contains("\"status\":\"ok\""))
    })
    .await;
    // Three of the four MiB taken by something else on the site: nothing refused yet.
    let ballast = system.dir.join("site-1").join("ballast");
    std::fs::write(&ballast, vec![0u8; 3 * 1024 * 1024]).expect("ballast written");
    eventually("health says the disk is nearly full", WAIT, || async {
        runner.get("/healthz").await.is_some_and(|(_, body)| {
            body.contains("\"status\":\"degraded\"")
                && !body.contains("\"state_space_low_since\":null")
        })
    })
    .await;
    let status = runner.status().await.expect("status");
    assert!(
        status["state_unwritable"].is_null(),
        "nothing refused: {status}"
    );
    assert!(
        status["state_free_bytes"].as_u64() < Some(2 * 1024 * 1024),
        "{status}"
    );
    let (_, metrics) = runner.get("/metrics").await.expect("metrics");
    assert!(
        metrics.contains("res_runner_state_space_low 1"),
        "{metrics}"
    );
    let (_, page) = runner.get("/").await.expect("page");
    assert!(page.contains("State directory nearly full"), "{page}");
    let fleet = || async {
        let out = system.resctl(&system.operator, &["fleet"]).await;
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The registry hears it with the runner's next plan request: within the granted wait.
    let plan_wait = Duration::from_secs(120);
    eventually(
        "the fleet view lists the runner's filling disk",
        plan_wait,
        || async { fleet().await.contains("its disk is nearly full since") },
    )
    .await;
    std::fs::remove_file(&ballast).expect("ballast removed");
    eventually("health is ok again", WAIT, || async {
        runner
            .get("/healthz")
            .await
            .is_some_and(|(_, body)| body.contains("\"status\":\"ok\""))
    })
    .await;
    eventually("the fleet view no longer lists it", plan_wait, || async {
        !fleet().await.contains("its disk is nearly full")
    })
    .await;
    drop(disk);
}
