//! `command` detectors as real child processes: stdin/stdout, stopping, failing.

use std::time::Duration;

use crate::support::*;
use chrono::{TimeDelta, Utc};
use res_runner::workflow::report::NodeStatus;
use res_shared::wire::{ExecutionStatus, MAX_OUTPUT_BYTES, OutputStream};
use serde_json::{Value, json};
use uuid::Uuid;

#[tokio::test]
async fn a_command_detector_gets_the_job_on_stdin_and_answers_on_stdout() {
    let dir = scratch();
    let script = write_script(
        &dir,
        "detect.sh",
        &format!(
            "cat > '{}/job.json'\necho 'loading model' >&2\necho 'frame 1 of 1'\necho '{{\"feature_result\": \"detection_complete\", \"people\": 4}}'\n",
            dir.display()
        ),
    );
    let (table, ids) = templates(&[(
        "Script detector",
        "detection",
        json!({"executor": "command", "program": script, "args": [], "parameters": {"threshold": 3}}),
    )]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    run.details.insert(ids[0], json!({"camera_ids": ["cam-9"]}));
    let report = run.go(&engine).await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(
        report.aggregated_actions_details,
        [json!({"feature_result": "detection_complete", "people": 4})],
        "the last stdout line is the result"
    );
    let job: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("job.json")).expect("job written"))
            .expect("the job is JSON");
    assert_eq!(job["details"]["camera_ids"], json!(["cam-9"]));
    assert_eq!(job["action"]["parameters"]["threshold"], 3);
    assert_eq!(job["execution_id"], json!(report.execution_id));
}

#[tokio::test]
async fn the_window_closing_mid_detection_stops_the_program_and_keeps_results() {
    let site = Site::start().await;
    let dir = scratch();
    // Writes its pid, then works until told to stop; on SIGTERM it prints what it has.
    let script = write_script(
        &dir,
        "slow.sh",
        &format!(
            "trap 'echo \"{{\\\"frames\\\": 12, \\\"partial\\\": true}}\"; exit 143' TERM\ncat > /dev/null\necho $$ > '{}/pid'\nsleep 60 &\nwait $!\n",
            dir.display()
        ),
    );
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("queue")}),
        ),
        (
            "Slow script",
            "detection",
            json!({"executor": "command", "program": script}),
        ),
    ]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({
            "start_node": "first",
            "nodes": {
                "first": {"type": "detection", "action_template_id": ids[0]},
                "slow": {"type": "detection", "action_template_id": ids[1]}
            },
            "edges": [{"from": "first", "to": "slow"}]
        }),
        &table,
    );
    run.deadline = Some(Utc::now() + TimeDelta::milliseconds(1500));
    let report = run.go(&engine).await;

    assert_eq!(report.status, ExecutionStatus::OperationWindowExceeded);
    assert_eq!(
        statuses(&report),
        [
            ("first", NodeStatus::Completed),
            ("slow", NodeStatus::Stopped)
        ]
    );
    assert_eq!(
        report.nodes[1].result,
        Some(json!({"frames": 12, "partial": true}))
    );
    assert_eq!(
        report.aggregated_actions_details.len(),
        2,
        "results so far are kept"
    );
    let error = report.error.as_ref().expect("the reason is reported");
    assert_eq!(error.node_id.as_deref(), Some("slow"));
    assert_eq!(error.message, "the operation window closed");
    assert!(
        report.nodes[1].duration_ms < 20_000,
        "stopped at the deadline, not after the script's minute"
    );
    assert_process_gone(&dir);

    let request = report
        .next_run_request(Uuid::new_v4(), "t")
        .expect("finished");
    assert!(
        !request.is_last_run_failed,
        "a closed window is not a failure"
    );
}

#[tokio::test]
async fn a_program_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = scratch();
    let script = write_script(
        &dir,
        "stubborn.sh",
        &format!(
            "trap '' TERM\ncat > /dev/null\necho $$ > '{}/pid'\necho '{{\"frames\": 1}}'\nwhile true; do sleep 1; done\n",
            dir.display()
        ),
    );
    let (table, ids) = templates(&[(
        "Stubborn",
        "detection",
        json!({"executor": "command", "program": script, "grace_seconds": 1}),
    )]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    run.max_runtime = Some(Duration::from_secs(1));
    let report = run.go(&engine).await;
    assert_eq!(report.status, ExecutionStatus::Timeout);
    assert_eq!(statuses(&report), [("detect", NodeStatus::Stopped)]);
    assert_eq!(
        report.nodes[0].result,
        Some(json!({"frames": 1})),
        "output before the kill is kept"
    );
    assert!(
        report.nodes[0].duration_ms >= 1000,
        "SIGKILL came after the grace period"
    );
    assert_process_gone(&dir);
}

#[tokio::test]
async fn failing_detectors_fail_the_run_with_node_and_reason() {
    let site = Site::start().await;
    let dir = scratch();
    let crash = write_script(
        &dir,
        "crash.sh",
        "cat > /dev/null\necho '{\"frames\": 2}'\necho 'camera cam-3 unreachable' >&2\nexit 3\n",
    );
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("queue")}),
        ),
        (
            "Broken service",
            "detection",
            json!({"executor": "http", "url": site.url("broken")}),
        ),
        (
            "Crashing script",
            "detection",
            json!({"executor": "command", "program": crash}),
        ),
        (
            "Missing program",
            "detection",
            json!({"executor": "command", "program": dir.join("nope.sh")}),
        ),
    ]);
    let engine = engine();
    for (index, expected) in [
        (1, "answered 500 Internal Server Error"),
        (2, "exited with status 3: camera cam-3 unreachable"),
        (3, "cannot start"),
    ] {
        let report = Run::of(
            &engine,
            json!({
                "start_node": "first",
                "nodes": {
                    "first": {"type": "detection", "action_template_id": ids[0]},
                    "second": {"type": "detection", "action_template_id": ids[index]}
                },
                "edges": [{"from": "first", "to": "second"}]
            }),
            &table,
        )
        .go(&engine)
        .await;
        assert_eq!(report.status, ExecutionStatus::Failed);
        assert_eq!(
            statuses(&report),
            [
                ("first", NodeStatus::Completed),
                ("second", NodeStatus::Failed)
            ]
        );
        let error = report.error.as_ref().expect("an error");
        assert_eq!(error.node_id.as_deref(), Some("second"));
        assert!(error.message.contains(expected), "{}", error.message);
        assert_eq!(
            report.nodes[1].error.as_deref(),
            Some(error.message.as_str())
        );
        let request = report
            .next_run_request(Uuid::new_v4(), "t")
            .expect("finished");
        assert!(
            request.is_last_run_failed,
            "a failed run retries in five minutes"
        );
        assert!(
            request
                .error
                .expect("error text")
                .starts_with("node 'second': ")
        );
    }
}

#[tokio::test]
async fn a_programs_output_goes_with_the_report_its_last_64_kib_with_the_cut_counted() {
    let dir = scratch();
    // 1 MiB of numbered stderr lines (16 bytes each), a line of stdout chatter, the result.
    let script = write_script(
        &dir,
        "chatty.sh",
        "cat > /dev/null\n\
         seq -f 'line%07g....' 1 65536 >&2\n\
         echo 'warming up'\n\
         echo '{\"people\": 2}'\n",
    );
    let (table, ids) = templates(&[(
        "Chatty detector",
        "detection",
        json!({"executor": "command", "program": script}),
    )]);
    let engine = engine();
    let run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    let report = run.go(&engine).await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    let streams: Vec<_> = report
        .output
        .iter()
        .map(|o| (o.node_id.as_str(), o.visit, o.stream))
        .collect();
    assert_eq!(
        streams,
        [
            ("detect", 1, OutputStream::Stdout),
            ("detect", 1, OutputStream::Stderr)
        ]
    );
    let stdout = &report.output[0];
    assert_eq!(stdout.text, "warming up\n{\"people\": 2}\n");
    assert_eq!(stdout.cut_bytes, 0);
    let stderr = &report.output[1];
    assert_eq!(stderr.text.len(), MAX_OUTPUT_BYTES);
    assert_eq!(stderr.total_bytes(), 1_048_576);
    assert!(
        stderr.text.ends_with("line0065536....\n"),
        "the last line is kept"
    );
    assert!(
        stderr.text.starts_with("line0061441....\n"),
        "the first kept line is whole: {:?}",
        &stderr.text[..40]
    );
    // The output travels beside the report, not inside its result.
    let request = report
        .next_run_request(Uuid::new_v4(), "token")
        .expect("a finished run is reported");
    assert_eq!(request.output, report.output);
    let result = request.result.expect("the report is the result");
    assert!(result.get("output").is_none(), "{result}");
}

#[tokio::test]
async fn a_failed_and_a_stopped_program_keep_what_they_printed() {
    let dir = scratch();
    let failing = write_script(
        &dir,
        "failing.sh",
        "cat > /dev/null\necho 'reading camera cam-9' >&2\necho 'camera offline' >&2\nexit 3\n",
    );
    let (table, ids) = templates(&[(
        "Failing detector",
        "detection",
        json!({"executor": "command", "program": failing}),
    )]);
    let engine = engine();
    let run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    let report = run.go(&engine).await;
    assert_eq!(report.status, ExecutionStatus::Failed);
    assert_eq!(
        report.output.len(),
        1,
        "stdout was empty: {:?}",
        report.output
    );
    assert_eq!(report.output[0].stream, OutputStream::Stderr);
    assert_eq!(
        report.output[0].text,
        "reading camera cam-9\ncamera offline\n"
    );

    let stopped = write_script(
        &dir,
        "stopped.sh",
        "trap 'echo \"stopping at frame 7\" >&2; exit 143' TERM\ncat > /dev/null\necho 'started' >&2\nsleep 60 &\nwait $!\n",
    );
    let (table, ids) = templates(&[(
        "Slow detector",
        "detection",
        json!({"executor": "command", "program": stopped}),
    )]);
    let mut run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    run.deadline = Some(Utc::now() + TimeDelta::milliseconds(800));
    let report = run.go(&engine).await;
    assert_eq!(report.status, ExecutionStatus::OperationWindowExceeded);
    // The whole group gets SIGTERM, so the shell may also announce its killed `sleep`
    // ("Terminated") between the two lines, depending on which it notices first.
    let text = &report.output[0].text;
    assert!(text.starts_with("started\n"), "{text:?}");
    assert!(text.ends_with("\nstopping at frame 7\n"), "{text:?}");
    assert!(text.lines().count() <= 3, "{text:?}");
}
