//! Operating RES end to end: `resctl` as a child process against `res-functions serve`
//! (sweeping every second, runners stale after 3 s) and real `res-runner`s.

use std::process::{Command, Output};
use std::time::Duration;

use chrono::{TimeDelta, Timelike, Utc};
use res_tests::functions::RuleSpec;
use res_tests::processes::{binary, eventually};
use serde_json::{Value, json};
use uuid::Uuid;

use super::system::{System, detector};

const WAIT: Duration = Duration::from_secs(40);
const SERVE: &[&str] = &["--sweep-interval", "1", "--runner-stale-after", "3"];

/// `resctl <args> --json` as the operator; its exit code and JSON answer.
async fn resctl(system: &System, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut args: Vec<&str> = args.to_vec();
    args.push("--json");
    let output = run_resctl(system, &args).await;
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (
        output.status.code(),
        json,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A daily cron twelve hours from now in Riyadh, so no test meets its next firing.
fn far_daily_cron() -> String {
    let riyadh_hour = (Utc::now() + TimeDelta::hours(3)).hour();
    format!("0 {} * * *", (riyadh_hour + 12) % 24)
}

/// A rule that fires daily, far from now, with its next run `from_now` away, whose
/// detector takes `seconds`.
async fn daily_rule(system: &System, from_now: TimeDelta, seconds: f64) -> Uuid {
    let cron = far_daily_cron();
    system
        .rule(
            RuleSpec {
                cron: Some(&cron),
                next_run_time: Some(Utc::now() + from_now),
                ..RuleSpec::default()
            },
            &detector(seconds, 0),
        )
        .await
}

async fn status_of(system: &System, execution: Uuid) -> String {
    sqlx::query_scalar("SELECT status FROM executions WHERE id = $1")
        .bind(execution)
        .fetch_one(&system.pool)
        .await
        .expect("the execution")
}

async fn running_execution(system: &System, rule: Uuid) -> Uuid {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let running = system
            .executions(rule)
            .await
            .into_iter()
            .find(|e| e.1 == "running");
        if let Some(execution) = running {
            return execution.0;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "rule {rule} did not start running"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_now_reaches_a_waiting_runner_at_once_not_at_its_next_refresh() {
    let system = System::start_with(SERVE).await;
    let rule = daily_rule(&system, TimeDelta::days(1), 0.2).await;
    // It polls every five minutes: only a plan request held open until the change commits
    // can bring the Run now within the bound below.
    let _runner = system.runner(
        "site-1",
        &[("PLAN_REFRESH_SECONDS", "300"), ("PLAN_WAIT_SECONDS", "20")],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(system.executions(rule).await.is_empty(), "not due yet");
    let (code, _, err) = resctl(
        &system,
        &[
            "rules",
            "run-now",
            &rule.to_string(),
            "--reason",
            "complaint",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    eventually(
        "the run-now ran within the runner's plan wait (20 s), not its refresh (300 s)",
        Duration::from_secs(15),
        || async { !system.executions(rule).await.is_empty() },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn run_now_pause_resume_and_cancel_through_resctl_with_a_real_runner() {
    let system = System::start_with(SERVE).await;
    // Due tomorrow: only a run-now makes it run today.
    let rule = daily_rule(&system, TimeDelta::days(1), 0.2).await;
    let id = rule.to_string();
    let _runner = system.runner("site-1", &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(system.executions(rule).await.is_empty(), "not due yet");

    let (code, answer, err) =
        resctl(&system, &["rules", "run-now", &id, "--reason", "complaint"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(answer["run_requested_at"].is_string(), "{answer}");
    system.completes(rule, "the run-now ran").await;
    let (code, history, err) = resctl(&system, &["executions", "list", "--rule", &id]).await;
    assert_eq!(code, Some(0), "{err}");
    let run = &history["executions"][0];
    assert_eq!(
        (run["trigger"].as_str(), run["triggered_by"].as_str()),
        (Some("manual"), Some("alice")),
        "{history}"
    );
    assert_eq!(run["trigger_reason"], "complaint");
    let (next, _, _, _) = system.rule_row(rule).await;
    assert!(
        next.is_some_and(|n| n > Utc::now()),
        "next run from the schedule: {next:?}"
    );

    // Paused: due, but not run. Resumed: runs.
    let (code, _, err) = resctl(
        &system,
        &["rules", "pause", &id, "--reason", "camera moved"],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    sqlx::query(
        "UPDATE branch_rules SET next_run_time = now() - interval '1 second' WHERE id = $1",
    )
    .bind(rule)
    .execute(&system.pool)
    .await
    .expect("due now");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(system.executions(rule).await.len(), 1, "paused: no new run");
    let (code, refused, _) = resctl(
        &system,
        &["rules", "run-now", &id, "--reason", "while paused"],
    )
    .await;
    assert_eq!(code, Some(3), "run-now refused while paused: {refused}");
    sqlx::query(
        "UPDATE rules SET cron_expression = '* * * * * *' \
         WHERE id = (SELECT rule_id FROM branch_rules WHERE id = $1)",
    )
    .bind(rule)
    .execute(&system.pool)
    .await
    .expect("every second from now on");
    let (code, _, err) = resctl(&system, &["rules", "resume", &id, "--reason", "fixed"]).await;
    assert_eq!(code, Some(0), "{err}");
    eventually("the resumed rule runs when due", WAIT, || async {
        system.executions(rule).await.len() >= 2
    })
    .await;

    // A long run cancelled: its runner stops it within a heartbeat interval.
    let slow = daily_rule(&system, TimeDelta::seconds(-1), 60.0).await;
    let execution = running_execution(&system, slow).await;
    // Running from its claim; its first heartbeat, a third of the lease later, says where
    // it is.
    let id = execution.to_string();
    eventually("the first heartbeat names the node", WAIT, || async {
        resctl_text(&system, &["executions", "show", &id])
            .await
            .contains("at node detect, last heartbeat ")
    })
    .await;
    let shown = resctl_text(&system, &["executions", "show", &id]).await;
    assert!(shown.contains("lease ends in "), "{shown}");
    let (code, answer, err) = resctl(
        &system,
        &[
            "executions",
            "cancel",
            &execution.to_string(),
            "--reason",
            "stuck",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(answer["cancel_requested"], true, "{answer}");
    eventually(
        "the cancelled run ends cancelled",
        Duration::from_secs(10),
        || async { status_of(&system, execution).await == "cancelled" },
    )
    .await;
    let shown = resctl_text(&system, &["executions", "show", &execution.to_string()]).await;
    assert!(shown.contains("cancelled by alice "), "{shown}");
    assert!(shown.contains(": stuck\n"), "{shown}");
    assert!(
        shown.contains("at node detect"),
        "where it was stopped: {shown}"
    );
    assert!(!shown.contains("lease ends"), "{shown}");

    // Force-stop: the live run is cancelled too, and the rule starts nothing new.
    let stopped = daily_rule(&system, TimeDelta::seconds(-1), 60.0).await;
    let execution = running_execution(&system, stopped).await;
    let (code, answer, err) = resctl(
        &system,
        &[
            "rules",
            "force-stop",
            &stopped.to_string(),
            "--reason",
            "wrong camera",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        answer["cancelled_execution_id"],
        json!(execution),
        "{answer}"
    );
    eventually(
        "the force-stopped run ends cancelled",
        Duration::from_secs(10),
        || async { status_of(&system, execution).await == "cancelled" },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        system.executions(stopped).await.len(),
        1,
        "nothing new starts"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_detector_failing_three_times_needs_attention_and_a_success_clears_it() {
    let system = System::start_with(SERVE).await;
    let cron = far_daily_cron();
    let rule = system
        .rule(
            RuleSpec {
                cron: Some(&cron),
                next_run_time: Some(Utc::now() - TimeDelta::seconds(1)),
                ..RuleSpec::default()
            },
            "cat >/dev/null; echo 'camera 3 did not answer' >&2; exit 3",
        )
        .await;
    let id = rule.to_string();
    let _runner = system.runner("site-1", &[]);
    for failures in 1..=3_usize {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let runs = system.executions(rule).await;
            if runs.iter().filter(|e| e.1 == "failed").count() == failures {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "failure {failures} did not come: {runs:?}; the runner's plan: {}; describe: {}",
                plan_says(&system, "site-1", rule),
                resctl(&system, &["rules", "describe", &id]).await.1["why_not"]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (next, last, _, _) = system.rule_row(rule).await;
        let (next, last) = (next.expect("a next run"), last.expect("a last run"));
        if failures < 3 {
            // The 5-minute failure retry, brought forward so the test need not wait.
            assert_eq!(
                next - last,
                TimeDelta::minutes(5),
                "retry after failure {failures}"
            );
            bring_forward(&system, rule).await;
            sqlx::query("UPDATE branch_rules SET next_run_time = now() WHERE id = $1")
                .bind(rule)
                .execute(&system.pool)
                .await
                .expect("due again");
        } else {
            assert_eq!(
                next,
                res_tests::functions::predicted_next_run(&cron, last),
                "after the third failure the next run comes from the cron, not +5 min"
            );
        }
    }
    let (_, described, _) = resctl(&system, &["rules", "describe", &id]).await;
    assert_eq!(described["condition"], "needs_attention", "{described}");
    let reason = described["needs_attention"]["reason"]
        .as_str()
        .unwrap_or("");
    assert!(reason.contains("failed 3 times in a row"), "{reason}");
    let chain: Vec<Option<Uuid>> = system.executions(rule).await.iter().map(|e| e.2).collect();
    assert!(
        chain[0].is_none() && chain[1..].iter().all(Option::is_some),
        "{chain:?}"
    );

    // Fixed: the next run succeeds and the mark is gone.
    res_tests::functions::set_detector(&system.pool, &detector(0.0, 0)).await;
    bring_forward(&system, rule).await;
    sqlx::query("UPDATE branch_rules SET next_run_time = now() WHERE id = $1")
        .bind(rule)
        .execute(&system.pool)
        .await
        .expect("due again");
    system.completes(rule, "the fixed rule completes").await;
    let (_, described, _) = resctl(&system, &["rules", "describe", &id]).await;
    assert_eq!(described["condition"], "idle", "{described}");
    assert_eq!(described["needs_attention"], Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sweeper_crashes_a_killed_runners_run_and_the_registry_shows_it_stale() {
    let system = System::start_with(SERVE).await;
    let rule = daily_rule(&system, TimeDelta::seconds(-1), 60.0).await;
    let mut runner = system.runner("only-runner", &[]);
    let execution = running_execution(&system, rule).await;
    let (code, alive, err) = resctl(&system, &["runners", "list"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(alive["runners"][0]["state"], "alive", "{alive}");
    assert_eq!(alive["runners"][0]["runner_id"], "only-runner");

    runner.kill();
    let killed_at = std::time::Instant::now();
    // The lease is 3 s and the sweeper runs every second; nobody claims the rule.
    eventually(
        "the sweeper crashed the run",
        Duration::from_secs(15),
        || async { status_of(&system, execution).await == "crashed" },
    )
    .await;
    let after = killed_at.elapsed();
    assert!(after < Duration::from_secs(10), "crashed after {after:?}");
    let (_, _, _, running) = system.rule_row(rule).await;
    assert!(!running, "the rule's running flag is cleared");
    assert_eq!(system.executions(rule).await.len(), 1, "nobody claimed it");
    let (_, described, _) = resctl(&system, &["rules", "describe", &rule.to_string()]).await;
    assert_eq!(described["condition"], "idle", "{described}");
    assert_eq!(described["runners"][0]["runner_id"], "only-runner");

    eventually(
        "the killed runner is listed stale",
        Duration::from_secs(10),
        || async {
            let (_, listed, _) = resctl(&system, &["runners", "list", "--state", "stale"]).await;
            listed["runners"][0]["runner_id"] == "only-runner"
                && listed["runners"][0]["offline_since"].is_string()
        },
    )
    .await;
}

/// Waits until the runner's plan agrees with the cloud and one refresh interval (1 s here)
/// has passed since: a schedule the runner wrote itself stands against the server's for
/// that long, so a change made sooner by hand would be lost until the next one.
async fn bring_forward(system: &System, rule: Uuid) {
    agree(system, rule, |_| true).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
}

/// Waits until `rules_describe` and the runner's `plan show` say the same of `rule`, and
/// `accept` takes it; what they say.
async fn agree(system: &System, rule: Uuid, accept: impl Fn(&str) -> bool) -> String {
    let id = rule.to_string();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (code, described, err) = resctl(system, &["rules", "describe", &id]).await;
        assert_eq!(code, Some(0), "{err}");
        let words: Vec<&str> = described["why_not"]
            .as_array()
            .map(|w| w.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let cloud = if words.is_empty() {
            "READY".to_owned()
        } else {
            words.join(", ")
        };
        let site = plan_says(system, "site-1", rule);
        if cloud == site && accept(&cloud) {
            return cloud;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "describe says {cloud:?}, plan show {site:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `res-runner plan show` for one rule: what follows "waiting: " on its line, or "READY".
fn plan_says(system: &System, runner: &str, rule: Uuid) -> String {
    let output = Command::new(binary("res-runner"))
        .args(["plan", "show", "--state-dir"])
        .arg(system.dir.join(runner))
        .output()
        .expect("res-runner plan runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with(&rule.to_string()))
        .unwrap_or_default()
        .to_owned();
    match line.split_once("waiting: ") {
        Some((_, reasons)) => reasons.to_owned(),
        None if line.ends_with("READY") => "READY".to_owned(),
        None => format!("unreadable: {line}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn describe_and_plan_show_say_the_same_in_six_states() {
    let system = System::start_with(SERVE).await;
    // Runs for a minute when it runs, so "running" lasts long enough to compare.
    let rule = daily_rule(&system, TimeDelta::days(1), 60.0).await;
    let id = rule.to_string();
    let _runner = system.runner("site-1", &[]);
    let exec = |statement: &'static str| {
        let pool = system.pool.clone();
        async move {
            sqlx::query(statement)
                .bind(rule)
                .execute(&pool)
                .await
                .expect(statement);
        }
    };
    let mut compared = Vec::new();
    for state in [
        "not due",
        "paused",
        "force-stopped",
        "rule inactive",
        "outside its window",
        "running",
    ] {
        match state {
            "not due" => {}
            "paused" => {
                let (code, _, err) =
                    resctl(&system, &["rules", "pause", &id, "--reason", "check"]).await;
                assert_eq!(code, Some(0), "{err}");
            }
            "force-stopped" => {
                let (code, _, err) =
                    resctl(&system, &["rules", "resume", &id, "--reason", "check"]).await;
                assert_eq!(code, Some(0), "{err}");
                let (code, _, err) =
                    resctl(&system, &["rules", "force-stop", &id, "--reason", "check"]).await;
                assert_eq!(code, Some(0), "{err}");
            }
            "rule inactive" => {
                let (code, _, err) =
                    resctl(&system, &["rules", "resume", &id, "--reason", "check"]).await;
                assert_eq!(code, Some(0), "{err}");
                exec("UPDATE branch_rules SET is_active = false WHERE id = $1").await;
            }
            "outside its window" => {
                exec("UPDATE branch_rules SET is_active = true WHERE id = $1").await;
                // Due, but the window opened and closed an hour ago (Riyadh time).
                exec(
                    "UPDATE branch_rules SET next_run_time = now() - interval '1 minute', \
                         operation_time_from = ((now() AT TIME ZONE 'Asia/Riyadh') \
                                                - interval '3 hours')::time, \
                         operation_time_to = ((now() AT TIME ZONE 'Asia/Riyadh') \
                                              - interval '2 hours')::time \
                     WHERE id = $1",
                )
                .await;
            }
            _ => {
                exec(
                    "UPDATE branch_rules SET operation_time_from = NULL, \
                         operation_time_to = NULL WHERE id = $1",
                )
                .await;
                running_execution(&system, rule).await;
            }
        }
        // Every state here blocks the rule: READY means the change is not seen yet.
        let said = agree(&system, rule, |said| said != "READY").await;
        eprintln!("{state}: both say {said:?}");
        compared.push(state);
    }
    assert_eq!(compared.len(), 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_waiting_at_a_delay_node_says_it_waits_and_until_when() {
    let system = System::start_with(SERVE).await;
    let rule = daily_rule(&system, TimeDelta::zero(), 0.1).await;
    let seed = res_tests::functions::Seed::new(&system.pool);
    let detect = seed
        .template(
            "Quick detector",
            "detection",
            &json!({"executor": "command", "program": "sh", "args": ["-c", detector(0.1, 0)]}),
        )
        .await;
    seed.workflow(
        rule,
        &json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": detect},
                "cool_down": {"type": "delay", "seconds": 20}
            },
            "edges": [{"from": "detect", "to": "cool_down"}]
        }),
    )
    .await;
    let _runner = system.runner("site-1", &[]);
    let execution = running_execution(&system, rule).await;
    let id = execution.to_string();
    let deadline = std::time::Instant::now() + WAIT;
    let listed = loop {
        let (_, answer, _) = resctl(
            &system,
            &["executions", "list", "--rule", &rule.to_string()],
        )
        .await;
        let latest = answer["executions"][0].clone();
        if latest["waiting_node"] == "cool_down" {
            break latest;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never said it waits: {latest}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(listed["status"], "running", "{listed}");
    let until: chrono::DateTime<Utc> = listed["waiting_until"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("until when");
    let now = Utc::now();
    assert!(
        until > now && until <= now + TimeDelta::seconds(21),
        "{until} vs {now}"
    );
    let text = resctl_text(&system, &["executions", "show", &id]).await;
    assert!(
        text.contains("waits at delay node cool_down until ") && text.contains("Asia/Riyadh"),
        "{text}"
    );
    eventually("the run ends after its delay", WAIT, || async {
        status_of(&system, execution).await == "completed"
    })
    .await;
    let (_, after, _) = resctl(&system, &["executions", "show", &id]).await;
    assert!(after["execution"]["waiting_until"].is_null(), "{after}");
    // The node results and metrics in human units, not only with --json.
    let text = resctl_text(&system, &["executions", "show", &id]).await;
    for shown in [
        "nodes (in the order they ran):",
        "detect",
        "cool_down",
        "delay",
        "metrics:",
        "process memory max: ",
        " MiB",
        " %",
    ] {
        assert!(text.contains(shown), "{shown} in:\n{text}");
    }
    assert!(!text.contains("waits at"), "{text}");
}

/// `resctl <args>` as the operator, as a person reads it.
async fn resctl_text(system: &System, args: &[&str]) -> String {
    let output = run_resctl(system, args).await;
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `resctl <args>` as the operator.
async fn run_resctl(system: &System, args: &[&str]) -> Output {
    system.resctl(&system.operator, args).await
}
