//! `res-runner next-run` as a technician runs it: a real child process, its output and
//! its exit code.

#[path = "next_run_cli/peer_examples.rs"]
mod peer_examples;

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_res-runner"))
        .args(args)
        .output()
        .expect("res-runner starts")
}

fn runner_with_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_res-runner"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("res-runner starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .expect("stdin accepts the batch");
    child.wait_with_output().expect("res-runner finishes")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("UTF-8 stderr")
}

#[test]
fn prints_the_next_run_in_utc() {
    let output = runner(&[
        "next-run",
        "--cron",
        "*/30 * * * *",
        "--from",
        "08:00",
        "--to",
        "18:00",
        "--now",
        "2026-03-02T11:00:00Z",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "2026-03-02T11:30:00Z\n");
}

/// docs/schedule.md: a one-digit hour is read as written, here as in documents and the
/// console (`9:00` is `09:00`).
#[test]
fn a_one_digit_hour_is_read_as_written() {
    let at = |from: &str| {
        let output = runner(&[
            "next-run",
            "--cron",
            "*/30 * * * *",
            "--from",
            from,
            "--to",
            "18:00",
            "--now",
            "2026-03-02T03:00:00Z",
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output)
    };
    assert_eq!(at("9:00"), at("09:00"));
    // Asia/Riyadh, the default zone: 09:00 there is 06:00 UTC.
    assert_eq!(at("9:00"), "2026-03-02T06:00:00Z\n");
}

#[test]
fn json_output_carries_the_degenerate_flag() {
    let output = runner(&[
        "next-run",
        "--cron",
        "*/30 * * * *",
        "--now",
        "2026-03-02T11:00:00Z",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "{\"next_run_time\":\"2026-03-02T11:30:00Z\",\"degenerate\":false}\n"
    );
}

#[test]
fn a_degenerate_rule_prints_the_window_opening_and_warns() {
    let output = runner(&[
        "next-run",
        "--cron",
        "0 7 * * *",
        "--from",
        "08:00",
        "--to",
        "18:00",
        "--now",
        "2026-03-02T11:00:00Z",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout(&output), "2026-03-03T05:00:00Z\n");
    assert!(
        stderr(&output).contains("no occurrence of '0 7 * * *' ever falls inside 08:00–18:00"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn failed_runs_retry_in_five_minutes() {
    let output = runner(&[
        "next-run",
        "--cron",
        "*/30 * * * *",
        "--now",
        "2026-03-02T11:32:10Z",
        "--failed",
    ]);
    assert_eq!(stdout(&output), "2026-03-02T11:37:10Z\n");
}

#[test]
fn time_zone_and_offsets_are_honoured() {
    let output = runner(&[
        "next-run",
        "--cron",
        "0 9 * * MON-FRI",
        "--tz",
        "Europe/Berlin",
        "--now",
        "2026-03-02T10:00:00+01:00",
    ]);
    assert_eq!(stdout(&output), "2026-03-03T08:00:00Z\n");
}

#[test]
fn now_defaults_to_the_current_time() {
    let before = chrono::Utc::now();
    let output = runner(&["next-run", "--cron", "* * * * *"]);
    assert_eq!(output.status.code(), Some(0));
    let next: chrono::DateTime<chrono::Utc> = stdout(&output).trim().parse().expect("RFC 3339");
    assert!(next > before);
    assert!(next <= before + chrono::TimeDelta::seconds(61));
}

#[test]
fn bad_input_exits_two_and_names_the_problem() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["--cron", "-90 * * * *"],
            "invalid cron '-90 * * * *': minute '-90' is missing a value",
        ),
        (
            &["--cron", "*/0 * * * *"],
            "invalid cron '*/0 * * * *': minute step must be >= 1",
        ),
        (
            &["--cron", "0 25 * * *"],
            "invalid cron '0 25 * * *': hour 25 is out of range 0-23",
        ),
        (
            &["--cron", "0 * * * *", "--tz", "Asia/Riyad"],
            "unknown time zone 'Asia/Riyad'",
        ),
        (
            &["--cron", "0 * * * *", "--from", "25:00", "--to", "18:00"],
            "invalid from '25:00': hour must be 00-23",
        ),
        (
            &["--cron", "0 * * * *", "--from", "08:00"],
            "operation window needs both from and to",
        ),
        (
            &["--cron", "0 * * * *", "--now", "tomorrow"],
            "invalid now 'tomorrow'",
        ),
    ];
    for (args, message) in cases {
        let output = runner(&[&["next-run"], args].concat());
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stdout(&output).is_empty(), "{args:?}");
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn impossible_expression_without_a_window_is_an_error() {
    let output = runner(&["next-run", "--cron", "0 0 30 2 *"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("never matches"));
}

#[test]
fn missing_cron_is_a_usage_error() {
    let output = runner(&["next-run"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--cron"));
}

#[test]
fn batch_answers_line_by_line_and_survives_bad_lines() {
    let input = concat!(
        r#"{"cron": "*/30 * * * *", "from": "08:00", "to": "18:00", "now": "2026-03-02T11:00:00Z"}"#,
        "\n",
        r#"{"cron": "0 * * * *", "from": "22:00", "to": "06:00", "now": "2026-03-02T20:00:00Z"}"#,
        "\n",
        "garbage\n",
        r#"{"cron": "*/15 * * * *", "from": "08:00", "to": "18:00", "tz": "Nowhere/City", "now": "2026-03-02T17:00:00Z"}"#,
        "\n",
        r#"{"cron": "*/30 * * * *", "from": "08:00", "to": "18:00", "now": "2026-03-02T11:32:00Z", "failed": true}"#,
        "\n",
    );
    let output = runner_with_stdin(&["next-run", "--batch"], input);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["next_run_time"], "2026-03-02T11:30:00Z");
    assert_eq!(lines[1]["next_run_time"], "2026-03-02T21:00:00Z");
    assert!(
        lines[2]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid JSON"))
    );
    assert!(
        lines[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown time zone 'Nowhere/City'"))
    );
    assert_eq!(lines[4]["next_run_time"], "2026-03-02T11:37:00Z");
    assert_eq!(lines[4]["degenerate"], false);
}

#[test]
fn batch_refuses_single_query_flags() {
    let output = runner(&["next-run", "--batch", "--cron", "0 * * * *"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn an_interval_runs_on_its_grid_from_the_window_opening() {
    // 14:00 Riyadh: the grid from 08:00 every 90 minutes next reaches 15:30 (12:30Z).
    let output = runner(&[
        "next-run",
        "--cron",
        "@every 90m",
        "--from",
        "08:00",
        "--to",
        "18:00",
        "--now",
        "2026-03-02T11:00:00Z",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "2026-03-02T12:30:00Z\n");
    let batch = runner_with_stdin(
        &["next-run", "--batch"],
        "{\"cron\":\"@every 2h on sat\",\"now\":\"2026-03-02T11:00:00Z\"}\n\
         {\"cron\":\"@every 0m\",\"now\":\"2026-03-02T11:00:00Z\"}\n",
    );
    assert_eq!(batch.status.code(), Some(0), "{}", stderr(&batch));
    let lines: Vec<String> = stdout(&batch).lines().map(str::to_owned).collect();
    // Monday 2 March: the next Saturday's midnight in Riyadh is 6 March 21:00Z.
    assert_eq!(
        lines.first().map(String::as_str),
        Some("{\"next_run_time\":\"2026-03-06T21:00:00Z\",\"degenerate\":false}")
    );
    assert_eq!(
        lines.get(1).map(String::as_str),
        Some(
            "{\"error\":\"invalid interval '@every 0m': '0m' is zero; the interval must be at \
             least 1s\"}"
        )
    );
}

/// docs/schedule.md's opening-hours examples, run as written: each `res-runner next-run`
/// line through `sh`, its output (or error) the `#` line after it, before any note.
#[test]
fn the_opening_hours_examples_answer_as_documented() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/schedule.md"))
        .expect("the page");
    let start = page.find("## Opening hours").expect("the section");
    let section = &page[start..];
    let section = &section[..section[3..]
        .find("\n## ")
        .map_or(section.len(), |end| end + 3)];
    let lines: Vec<&str> = section.lines().collect();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_res-runner"))
        .parent()
        .expect("the bin directory")
        .to_owned();
    let mut checked = 0;
    for pair in lines.windows(2) {
        let (Some(_), Some(expected)) = (
            pair[0].strip_prefix("res-runner next-run "),
            pair[1].strip_prefix("# "),
        ) else {
            continue;
        };
        let expected = expected.split("   (").next().unwrap_or_default().trim();
        let output = Command::new("sh")
            .args(["-c", pair[0]])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .output()
            .expect("sh runs");
        let printed = if expected.starts_with("error:") {
            stderr(&output)
        } else {
            stdout(&output)
        };
        assert_eq!(printed.trim(), expected, "{}", pair[0]);
        checked += 1;
    }
    assert_eq!(checked, 3, "every example ran");
}

#[test]
fn help_names_every_batch_key_and_a_merged_grid_answers_as_the_docs_say() {
    let help = stdout(&runner(&["next-run", "--help"]));
    let batch = &help[help.find("--batch").expect("the batch option")..];
    for key in [
        "cron",
        "now",
        "from",
        "to",
        "tz",
        "failed",
        "jitter_seconds",
        "branch_rule_id",
        "hours",
        "timing",
    ] {
        assert!(batch.contains(key), "--batch help lacks {key}: {batch}");
    }
    // docs/schedule.md: spans that overlap are one grid (Riyadh, 09:00-12:00 and
    // 13:00-18:00 from two hours before each opening: 07:00, 08:30, 10:00, 11:30, 13:00).
    let line = r#"{"cron": "@every 90m", "now": "2026-03-02T07:00:00Z", "tz": "Asia/Riyadh", "hours": {"week": {"sun-sat": ["09:00-12:00", "13:00-18:00"]}}, "timing": {"while_open": {"before_seconds": 7200}}}"#;
    let output = runner_with_stdin(&["next-run", "--batch"], &format!("{line}\n"));
    assert!(
        stdout(&output).contains("2026-03-02T08:30:00Z"),
        "{}",
        stdout(&output)
    );
}
