//! `res-runner run` as a real process against real functions and PostgreSQL: scheduling,
//! claims between two runners, restarts, crashes, the cloud going away, throttling.

mod support;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_tests::functions::hourly_cron;
use support::{Site, detector, eventually, plan_command, runner, runner_with_env};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn a_due_rule_runs_once_is_rescheduled_and_a_restart_keeps_the_plan() {
    let site = Site::start().await;
    let cron = &hourly_cron();
    let rule = site
        .rule(cron, Utc::now() - TimeDelta::minutes(1), &detector(0.0, 2))
        .await;
    let mut runner = runner(&site, "site-1", &[]);
    eventually("the rule ran", WAIT, || async {
        site.executions(rule)
            .await
            .iter()
            .any(|e| e.1 == "completed")
    })
    .await;
    let executions = site.executions(rule).await;
    assert_eq!(executions.len(), 1, "{executions:?}");
    let (next, last, runs, running) = site.rule_row(rule).await;
    assert_eq!(runs, 1);
    assert!(!running);
    let last = last.expect("last run time");
    assert_eq!(
        next,
        Some(res_tests::functions::predicted_next_run(cron, last))
    );
    assert_eq!(site.violations(rule).await, 1);

    // The local plan follows the report, and the operator surfaces say so.
    eventually("the status page shows the result", WAIT, || async {
        runner
            .status()
            .await
            .is_some_and(|s| s["recent"][0]["status"] == "completed" && s["alive_workers"] == 4)
    })
    .await;
    let (code, metrics) = runner.get("/metrics").await.expect("metrics");
    assert_eq!(code, 200);
    for line in [
        "res_runner_alive_workers 4",
        "res_runner_write_thread_alive 1",
        "res_runner_outbox_depth 0",
        "res_runner_executions_total{status=\"completed\"} 1",
        "res_runner_dispatch_lag_seconds_count 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    // Every metric the operator docs name is exported.
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/runner.md"))
        .expect("docs/runner.md");
    let documented: Vec<&str> = docs
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter(|rest| rest.starts_with("res_runner_"))
        .filter_map(|rest| rest.split(['`', '{']).next())
        .collect();
    assert!(documented.len() >= 18, "{documented:?}");
    for name in documented {
        let family = name.trim_end_matches("_total");
        assert!(
            metrics.contains(&format!("# TYPE {family} ")),
            "{name} is documented but not on /metrics:\n{metrics}"
        );
    }
    let (code, page) = runner.get("/").await.expect("page");
    assert_eq!(code, 200);
    assert!(page.contains(&rule.to_string()) && page.contains("completed"));
    assert_eq!(runner.get("/healthz").await.map(|r| r.0), Some(200));

    // SIGTERM: graceful, marker written, plan on disk.
    assert!(runner.stop(), "a graceful stop exits 0:\n{}", runner.log());
    let marker: serde_json::Value = serde_json::from_slice(
        &std::fs::read(runner.state_dir.join("shutdown-marker.json")).expect("marker written"),
    )
    .expect("marker JSON");
    assert_eq!(marker["signal"], "SIGTERM");
    assert!(marker["pid"].as_u64().is_some() && marker["shutdown_started_at"].is_string());

    // `plan why` reads the plan while the daemon is stopped.
    let (ok, out, err) = plan_command(&runner.state_dir, &["why", &rule.to_string()]);
    assert!(ok, "{err}");
    assert!(
        out.contains("NOT READY") && out.contains("[FAIL] next_run_time"),
        "{out}"
    );
    let (ok, out, _) = plan_command(&runner.state_dir, &["show"]);
    assert!(
        ok && out.contains(&rule.to_string()) && out.contains("waiting: due"),
        "{out}"
    );

    // Restarted: it reads its plan, says the last stop was graceful, and runs nothing twice.
    site.proxy.set_up(false);
    runner.restart();
    eventually("the restarted runner reports its start", WAIT, || async {
        runner.status().await.is_some_and(|s| {
            s["plan_at_start"]
                .as_str()
                .is_some_and(|p| p.contains("1 branch rule(s)"))
                && s["last_stop"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("graceful"))
        })
    })
    .await;
    let status = runner.status().await.expect("status");
    assert_eq!(status["rules"][0]["next_run_time"], serde_json::json!(next));
    site.proxy.set_up(true);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(site.executions(rule).await.len(), 1);
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn two_runners_on_the_same_branch_never_run_a_rule_twice() {
    let site = Site::start().await;
    let mut rules = Vec::new();
    for _ in 0..12 {
        rules.push(
            site.rule(
                &hourly_cron(),
                Utc::now() - TimeDelta::seconds(5),
                &detector(0.2, 0),
            )
            .await,
        );
    }
    let mut a = runner(&site, "runner-a", &[]);
    let mut b = runner(&site, "runner-b", &[]);
    eventually("every rule ran", WAIT, || async {
        let mut all = true;
        for rule in &rules {
            all &= site.rule_row(*rule).await.2 == 1;
        }
        all
    })
    .await;
    // Both keep scheduling for a while; nothing runs again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut runners = std::collections::BTreeSet::new();
    for rule in &rules {
        let executions = site.executions(*rule).await;
        assert_eq!(executions.len(), 1, "rule {rule}: {executions:?}");
        assert_eq!(executions[0].1, "completed");
        let (_, _, runs, running) = site.rule_row(*rule).await;
        assert_eq!((runs, running), (1, false));
        let runner: String = sqlx::query_scalar("SELECT runner_id FROM executions WHERE id = $1")
            .bind(executions[0].0)
            .fetch_one(&site.app.pool)
            .await
            .expect("runner id");
        runners.insert(runner);
    }
    assert!(a.stop() && b.stop());
    eprintln!("rules were run by {runners:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_plan_file_is_reported_and_the_runner_starts_empty() {
    let site = Site::start().await;
    let rule = site
        .rule(
            &hourly_cron(),
            Utc::now() - TimeDelta::minutes(1),
            &detector(0.0, 0),
        )
        .await;
    let state_dir = site.dir.join("site-1");
    std::fs::create_dir_all(&state_dir).expect("state dir");
    std::fs::write(
        state_dir.join("plan.json"),
        b"{\"version\": 1, \"saved_at\": \"2026-",
    )
    .expect("write");
    std::fs::write(state_dir.join("shutdown-marker.json"), b"not json").expect("write");
    let mut runner = runner(&site, "site-1", &[]);
    eventually("the rule ran", WAIT, || async {
        site.executions(rule)
            .await
            .iter()
            .any(|e| e.1 == "completed")
    })
    .await;
    let log = runner.log();
    assert!(log.contains("not a valid plan file"), "{log}");
    assert!(log.contains("unreadable shutdown marker"), "{log}");
    let status = runner.status().await.expect("status");
    assert!(
        status["plan_at_start"]
            .as_str()
            .is_some_and(|p| p.starts_with("plan file ignored"))
    );
    assert!(runner.stop());
    assert!(
        support::plan_command(&runner.state_dir, &["show"]).0,
        "the plan file is whole again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reports_wait_in_the_outbox_across_a_restart_and_arrive_once() {
    let site = Site::start().await;
    let cron = &hourly_cron();
    let rule = site
        .rule(cron, Utc::now() - TimeDelta::minutes(1), &detector(2.0, 1))
        .await;
    let mut runner = runner(&site, "site-1", &[]);
    eventually("the run started", WAIT, || async {
        site.executions(rule).await.iter().any(|e| e.1 == "running")
    })
    .await;
    site.proxy.set_up(false);
    // The violation reaches the outbox mid-run; the report joins it when the run ends.
    eventually("the report is in the outbox", WAIT, || async {
        runner.status().await.is_some_and(|s| {
            s["recent"][0]["status"] == "completed" && s["outbox_depth"].as_u64() >= Some(2)
        })
    })
    .await;
    let status = runner.status().await.expect("status");
    let finished = Utc::now();
    let local_next: chrono::DateTime<Utc> =
        serde_json::from_value(status["rules"][0]["next_run_time"].clone())
            .expect("local next run");
    assert_eq!(
        local_next,
        res_tests::functions::predicted_next_run(cron, finished),
        "the fallback equals the function's rule"
    );
    assert!(
        runner.log().contains("report kept in the outbox"),
        "{}",
        runner.log()
    );

    // Restarted while the functions are still away: the outbox survives.
    assert!(runner.stop());
    runner.restart();
    eventually("the restarted runner has its outbox", WAIT, || async {
        runner
            .status()
            .await
            .is_some_and(|s| s["outbox_depth"].as_u64() >= Some(1))
    })
    .await;
    site.proxy.set_up(true);
    eventually("the outbox is delivered", WAIT, || async {
        runner
            .status()
            .await
            .is_some_and(|s| s["outbox_depth"] == 0)
            && site.rule_row(rule).await.2 == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let executions = site.executions(rule).await;
    assert_eq!(executions.len(), 1, "{executions:?}");
    assert_eq!(executions[0].1, "completed", "the late report finished it");
    assert_eq!(site.violations(rule).await, 1, "the violation arrived once");
    let (next, _, runs, running) = site.rule_row(rule).await;
    assert_eq!((runs, running), (1, false));
    assert_eq!(
        next,
        Some(local_next),
        "server and runner agree on the next run"
    );
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sole_runner_runs_due_rules_offline_and_reports_them_later() {
    let site = Site::start().await;
    let cron = &hourly_cron();
    let rule = site
        .rule(cron, Utc::now() + TimeDelta::seconds(4), &detector(0.0, 1))
        .await;
    let mut runner = runner(&site, "site-1", &[("OFFLINE_EXECUTION", "true")]);
    eventually("the plan is fetched", WAIT, || async {
        runner.status().await.is_some_and(|s| s["workflows"] == 1)
    })
    .await;
    site.proxy.set_up(false);
    eventually("the rule ran offline", WAIT, || async {
        runner.status().await.is_some_and(|s| {
            s["recent"][0]["offline"] == true && s["recent"][0]["status"] == "completed"
        })
    })
    .await;
    assert!(
        site.executions(rule).await.is_empty(),
        "nothing reached the cloud yet"
    );
    let status = runner.status().await.expect("status");
    assert_eq!(status["outbox_depth"], 1);
    site.proxy.set_up(true);
    eventually("the offline run is recorded", WAIT, || async {
        site.executions(rule).await.len() == 1 && site.rule_row(rule).await.2 == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let executions = site.executions(rule).await;
    assert_eq!(executions.len(), 1);
    assert_eq!(
        (executions[0].1.as_str(), executions[0].3),
        ("completed", true)
    );
    assert_eq!(site.violations(rule).await, 1);
    let (next, _, _, running) = site.rule_row(rule).await;
    let local: chrono::DateTime<Utc> = serde_json::from_value(
        runner.status().await.expect("status")["rules"][0]["next_run_time"].clone(),
    )
    .expect("local next run");
    assert_eq!(next, Some(local));
    assert!(!running);
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_run_crashes_the_execution_and_the_next_boot_retries_it() {
    let site = Site::start().await;
    let rule = site
        .rule(
            &hourly_cron(),
            Utc::now() - TimeDelta::minutes(1),
            &detector(1.5, 0),
        )
        .await;
    // The first boot's detector is slow enough to be killed in the middle.
    site.set_detector(&detector(60.0, 0)).await;
    let mut runner = runner(&site, "site-1", &[("SHUTDOWN_GRACE_SECONDS", "1")]);
    eventually("the run started", WAIT, || async {
        site.executions(rule).await.iter().any(|e| e.1 == "running")
    })
    .await;
    runner.kill();
    let crashed = site.executions(rule).await[0].0;
    site.set_detector(&detector(0.0, 0)).await;
    runner.restart();
    eventually("the retry completed", WAIT, || async {
        site.executions(rule)
            .await
            .iter()
            .any(|e| e.1 == "completed")
    })
    .await;
    let executions = site.executions(rule).await;
    assert_eq!(executions.len(), 2, "{executions:?}");
    assert_eq!(executions[0].0, crashed);
    assert_eq!(executions[0].1, "crashed");
    assert_eq!(
        executions[1].2,
        Some(crashed),
        "the retry links to the crash"
    );
    assert!(runner.log().contains("no shutdown marker"));
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn above_the_memory_limit_no_job_starts() {
    let site = Site::start().await;
    let rule = site
        .rule(
            &hourly_cron(),
            Utc::now() - TimeDelta::minutes(1),
            &detector(0.0, 0),
        )
        .await;
    let mut runner = runner_with_env(
        &site,
        "site-1",
        &[("MEMORY_LIMIT_PERCENT", "0.01")],
        &[("RES_RUNNER_LOG_FORMAT", "json")],
    );
    eventually("throttling is visible", WAIT, || async {
        runner
            .get("/metrics")
            .await
            .is_some_and(|(_, m)| m.contains("res_runner_memory_throttled 1"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(site.executions(rule).await.is_empty());
    let log = runner.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("memory throttling"))),
        "{log}"
    );
    assert!(
        !log.contains(&site.token),
        "the token never appears in logs"
    );
    assert!(runner.stop());
}

#[test]
fn bad_configuration_is_refused_with_every_problem_named() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_res-runner"))
        .arg("run")
        .env("RES_RUNNER_WORKERS", "0")
        .env("RES_RUNNER_TOKEN", "s3cret-token")
        .env("RES_RUNNER_FUNCTIONS_URL", "not a url")
        .env_remove("RES_RUNNER_RUNNER_ID")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for part in [
        "workers must be at least 1",
        "runner_id is required",
        "functions_url 'not a url'",
    ] {
        assert!(stderr.contains(part), "{part} in {stderr}");
    }
    assert!(!stderr.contains("s3cret-token"));
    let typo = std::process::Command::new(env!("CARGO_BIN_EXE_res-runner"))
        .args(["run"])
        .env("RES_RUNNER_WORKRS", "3")
        .output()
        .expect("runs");
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&typo.stderr).contains("workrs"),
        "{}",
        String::from_utf8_lossy(&typo.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn systemd_hears_ready_watchdog_and_stopping() {
    let site = Site::start().await;
    let socket_path = site.dir.join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).expect("notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let path = socket_path.display().to_string();
    let mut runner = runner_with_env(
        &site,
        "site-1",
        &[],
        &[
            ("NOTIFY_SOCKET", path.as_str()),
            ("WATCHDOG_USEC", "400000"),
        ],
    );
    let mut heard = Vec::new();
    let mut buffer = [0u8; 512];
    while !(heard.iter().any(|m: &String| m.contains("READY=1"))
        && heard.iter().any(|m| m.contains("WATCHDOG=1")))
    {
        let n = socket.recv(&mut buffer).expect("a notification");
        heard.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
    }
    assert!(runner.stop());
    loop {
        let n = socket.recv(&mut buffer).expect("a notification");
        if String::from_utf8_lossy(&buffer[..n]).contains("STOPPING=1") {
            break;
        }
    }
}
