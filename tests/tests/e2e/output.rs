//! Each run's output end to end: a `command` detector printing 1 MiB, its last 64 KiB read
//! with `resctl executions logs`, the cut marked — for a run reported at once and for one
//! run while the functions were away, delivered later from the runner's outbox.

use std::time::Duration;

use res_tests::browser::Browser;
use res_tests::processes::{Runner, eventually, free_port};
use serde_json::Value;
use uuid::Uuid;

use super::console::{console_url, sign_in};
use super::due;
use super::offline::{owner_seen_by, rules_run_offline};
use crate::system::{System, answered};

const LONG_WAIT: Duration = Duration::from_secs(90);
/// 65,536 lines of 16 bytes on stderr (1 MiB), a line of chatter and the result on stdout.
const CHATTY: &str = "cat >/dev/null; seq -f 'line%07g....' 1 65536 >&2; echo 'warming up'; \
     echo '{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 0}'";
const MARKER: &str = "[… 983,040 bytes cut; the last 65,536 of 1,048,576 bytes follow …]";

/// Completed executions of `rule`: (id, offline).
async fn completed(system: &System, rule: Uuid) -> Vec<(Uuid, bool)> {
    system
        .executions(rule)
        .await
        .into_iter()
        .filter(|e| e.1 == "completed")
        .map(|e| (e.0, e.3))
        .collect()
}

/// `resctl executions logs <id> <args>` as the operator: exit code, stdout, stderr.
async fn logs(system: &System, id: Uuid, args: &[&str]) -> (Option<i32>, String, String) {
    let id = id.to_string();
    let mut all = vec!["executions", "logs", id.as_str()];
    all.extend_from_slice(args);
    let output = system.resctl(&system.operator, &all).await;
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Once `runner` (site-a) is its branch's offline owner, the functions stop until it has
/// run each of `rules` rules offline, then start again. (Counted by rule, not by run: a
/// rule due sooner runs offline twice while another has not run yet.)
async fn through_an_outage(system: &mut System, runner: &Runner, rules: usize) {
    eventually(
        "site-a is the branch's offline owner",
        LONG_WAIT,
        || async { owner_seen_by(runner, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;
    assert!(system.functions.stop(), "the functions stop cleanly");
    eventually("the runner ran every rule offline", LONG_WAIT, || async {
        rules_run_offline(runner).len() >= rules
    })
    .await;
    system.functions.restart().await;
}

/// The stderr tail of execution `id` reads as the detector's last 64 KiB, cut marked.
async fn assert_tail(system: &System, id: Uuid) {
    let (code, text, err) = logs(system, id, &["--stream", "stderr"]).await;
    assert_eq!(code, Some(0), "{err}");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(MARKER), "{id}: {err}");
    assert_eq!(
        lines.next(),
        Some("line0061441...."),
        "the first kept line is whole"
    );
    assert_eq!(lines.clone().last(), Some("line0065536...."));
    assert_eq!(lines.count(), 4_095);

    // Both streams, each under its header; one node's, as JSON.
    let (code, both, _) = logs(system, id, &[]).await;
    assert_eq!(code, Some(0));
    assert!(
        both.starts_with("==> detect stdout: 89 bytes <==\nwarming up\n{\"feature_result\""),
        "{}",
        &both[..200.min(both.len())]
    );
    assert!(both.contains("\n==> detect stderr: 1,048,576 bytes <==\n[… 983,040 bytes cut"));
    let (code, json, _) = logs(system, id, &["--node", "detect", "--json"]).await;
    assert_eq!(code, Some(0));
    let json: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
    assert_eq!(json[1]["cut_bytes"], 983_040, "{}", json[0]);
    assert_eq!(json[1]["text"].as_str().map(str::len), Some(65_536));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_detector_printing_a_mebibyte_shows_its_last_64_kib_online_and_after_an_outage() {
    let mut system = System::start().await;
    let rule = system.rule(due("*/3 * * * * *"), CHATTY).await;
    let runner = system.runner("site-a", &[]);
    eventually("the rule ran and reported", LONG_WAIT, || async {
        !completed(&system, rule).await.is_empty()
    })
    .await;
    let (online, offline) = completed(&system, rule).await[0];
    assert!(!offline);
    assert_tail(&system, online).await;

    // The console's execution page, in Chromium: the same tail, the cut said first.
    let browser = Browser::start(1280, 900).await;
    sign_in(&browser, &system, &system.operator).await;
    browser
        .open(&format!("{}/executions/{online}", console_url(&system)))
        .await;
    let shown = browser.text("#output").await;
    assert!(
        shown.contains("detect · stderr · 1,048,576 bytes, the last 65,536 kept"),
        "{}",
        &shown[..shown.len().min(400)]
    );
    let marker_then_first = format!("{MARKER}\nline0061441....");
    assert!(
        shown.contains(&marker_then_first),
        "the cut, then the first kept line"
    );
    assert!(
        shown.trim_end().ends_with("line0065536...."),
        "the last line"
    );

    // Another node, or an execution nobody has: said, not guessed.
    let (code, text, err) = logs(&system, online, &["--node", "notify"]).await;
    assert_eq!((code, text.as_str()), (Some(0), ""), "{err}");
    assert!(err.contains("no output kept"), "{err}");
    let (code, _, err) = logs(&system, Uuid::new_v4(), &[]).await;
    assert_eq!(code, Some(4), "unknown is exit 4: {err}");

    // The functions go away; the runner, its branch's offline owner, runs on its own and
    // keeps the report with its output in the outbox until they are back.
    through_an_outage(&mut system, &runner, 1).await;
    eventually("the offline run is recorded", LONG_WAIT, || async {
        completed(&system, rule)
            .await
            .iter()
            .any(|(_, offline)| *offline)
    })
    .await;
    let offline_run = completed(&system, rule)
        .await
        .into_iter()
        .find_map(|(id, offline)| offline.then_some(id))
        .expect("an offline run");
    assert_tail(&system, offline_run).await;
}

/// 64 KiB of a control character on stdout and on stderr, then the result: a report whose
/// output, escaped as JSON (`\u0001`), is about 790 KB.
const ESCAPED: &str = "cat >/dev/null; head -c 65536 /dev/zero | tr '\\000' '\\001'; \
     head -c 65536 /dev/zero | tr '\\000' '\\001' >&2; echo; \
     echo '{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 0}'";

/// Eight rules' offline reports wait in the outbox, about 6.3 MB as JSON together: more
/// than the functions read in one batch of reports. The runner sends them in batches cut
/// under that limit, so none is refused whole, and every run is recorded with its output.
#[tokio::test(flavor = "multi_thread")]
async fn reports_waiting_with_large_output_go_in_batches_under_the_body_limit() {
    let metrics_port = free_port();
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let mut system =
        System::start_with(&["--metrics-bind", &format!("127.0.0.1:{metrics_port}")]).await;
    let mut rules = Vec::new();
    for _ in 0..8 {
        rules.push(system.rule(due("*/4 * * * * *"), ESCAPED).await);
    }
    let runner = system.runner("site-a", &[("WORKERS", "8")]);
    through_an_outage(&mut system, &runner, 8).await;
    let mut recorded = Vec::new();
    for rule in &rules {
        eventually(
            "the rule's offline runs are recorded",
            LONG_WAIT,
            || async {
                completed(&system, *rule)
                    .await
                    .iter()
                    .any(|(_, offline)| *offline)
            },
        )
        .await;
        recorded.extend(
            completed(&system, *rule)
                .await
                .into_iter()
                .filter_map(|(id, offline)| offline.then_some(id)),
        );
    }
    let batch = "function=\"branch_rules_set_NextRunTime_batch\"";
    let refused = answered(&metrics_url, &format!("{batch},status=\"413\"")).await;
    assert_eq!(refused, 0, "no batch of reports went over the body limit");
    let batches = answered(&metrics_url, &format!("{batch},status=\"200\"")).await;
    assert!(
        batches >= 2,
        "eight reports of ~790 KB take at least two batches: {batches}"
    );
    // Each run's output arrived whole: stdout's last 64 KiB, the result line included.
    let (code, json, err) = logs(&system, recorded[0], &["--node", "detect", "--json"]).await;
    assert_eq!(code, Some(0), "{err}");
    let json: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
    assert_eq!(
        json[0]["text"].as_str().map(str::len),
        Some(65_536),
        "{}",
        json[0]["stream"]
    );
    assert_eq!(json[1]["text"].as_str().map(str::len), Some(65_536));
}
