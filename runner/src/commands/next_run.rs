//! `res-runner next-run`: the schedule rules by hand, for site technicians and scripts.

use std::io::{self, BufRead, BufWriter, Write};
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use clap::Args;
use std::sync::Arc;

use res_shared::schedule::{
    AnchorSchedule, HoursSpec, MAX_JITTER_SECONDS, NextRun, OpeningHours, OperationWindow,
    OverlapPolicy, RuleSchedule, RuleTiming, Schedule, TimingSpec, jitter_offset,
};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

/// Bad input exits with this code, as clap's own usage errors do.
const EXIT_BAD_INPUT: u8 = 2;

/// Arguments of `res-runner next-run`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  res-runner next-run --cron '*/30 * * * *' --from 08:00 --to 18:00 --now 2026-03-02T11:00:00Z
  res-runner next-run --cron '0 9 * * MON-FRI' --tz Europe/Berlin --json
  res-runner next-run --cron '0 * * * *' --jitter 300 --rule-id 6f1c2a9e-3b7d-4c1a-9e2f-0a1b2c3d4e5f
  res-runner next-run --cron '@opening +10m' --hours '{\"week\": {\"sat-thu\": [\"09:00-12:00\", \"16:00-23:00\"]}}'
  res-runner next-run --cron '*/15 * * * *' --hours HOURS --timing '{\"while_open\": {\"before_seconds\": 1800}}'
  echo '{\"cron\": \"0 * * * *\", \"now\": \"2026-03-02T20:00:00Z\"}' | res-runner next-run --batch")]
pub struct NextRunArgs {
    /// Cron expression (5 fields, 6 with leading seconds, 7 with a trailing year, or
    /// @hourly/@daily/@weekly/@monthly/@yearly) or interval (@every 90m [on mon-fri]).
    // A leading '-' is the expression's (`-90 * * * *` is refused for its minute, not
    // taken for an unknown option).
    #[arg(long, required_unless_present = "batch", allow_hyphen_values = true)]
    cron: Option<String>,
    /// Operation window start, local wall-clock HH:MM[:SS] (give --to too).
    #[arg(long)]
    from: Option<String>,
    /// Operation window end (exclusive), local HH:MM[:SS]; before --from means overnight.
    #[arg(long)]
    to: Option<String>,
    /// IANA time zone the cron expression and window are read in [default: Asia/Riyadh].
    #[arg(long)]
    tz: Option<String>,
    /// Compute from this instant, RFC 3339 such as 2026-03-02T11:00:00Z [default: now].
    #[arg(long)]
    now: Option<String>,
    /// The last run failed: the next run is five minutes after --now.
    #[arg(long)]
    failed: bool,
    /// The rule's jitter in seconds (0–3600): each run happens a fixed offset after its
    /// cron time, derived from --rule-id.
    #[arg(long, requires = "rule_id", value_parser = clap::value_parser!(u32).range(0..=3600))]
    jitter: Option<u32>,
    /// The branch rule's id, which fixes its jitter offset.
    #[arg(long, requires = "jitter")]
    rule_id: Option<Uuid>,
    /// The branch's opening hours, as a plan carries them: JSON `{"week": {"sat-thu":
    /// ["09:00-12:00"]}, "days": [{"date": "2026-09-23", "name": "National Day"}]}`.
    #[arg(long)]
    hours: Option<String>,
    /// The rule's timing beyond cron and window, as a plan carries it: JSON such as
    /// `{"while_open": {"before_seconds": 1800}, "valid_until": "2027-06-30"}`.
    #[arg(long)]
    timing: Option<String>,
    /// Print {"next_run_time": ..., "degenerate": ...} instead of the bare time.
    #[arg(long)]
    json: bool,
    /// Read one JSON object per line on stdin (keys cron, now, and optionally from, to, tz,
    /// failed, jitter_seconds with branch_rule_id, hours and timing as objects of the shapes
    /// --hours and --timing take) and write one JSON answer per line, in order.
    #[arg(long, conflicts_with_all = ["cron", "from", "to", "tz", "now", "failed", "json", "jitter", "rule_id", "hours", "timing"])]
    batch: bool,
}

/// One question: the rule's schedule texts and the instant to answer from.
struct Query<'a> {
    cron: &'a str,
    from: Option<&'a str>,
    to: Option<&'a str>,
    tz: Option<&'a str>,
    now: DateTime<Utc>,
    failed: bool,
    /// The jitter offset.
    offset: TimeDelta,
    /// The branch's opening hours.
    hours: Option<HoursSpec>,
    /// The rule's timing.
    timing: Option<TimingSpec>,
}

/// One `--batch` input line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchLine {
    cron: String,
    now: String,
    from: Option<String>,
    to: Option<String>,
    tz: Option<String>,
    failed: Option<bool>,
    jitter_seconds: Option<u32>,
    branch_rule_id: Option<Uuid>,
    hours: Option<HoursSpec>,
    timing: Option<TimingSpec>,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(args: NextRunArgs) -> ExitCode {
    if args.batch {
        let stdin = io::stdin().lock();
        let stdout = io::stdout().lock();
        return match run_batch(stdin, stdout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        };
    }
    match run_single(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

fn run_single(args: &NextRunArgs) -> Result<String, String> {
    let now = match &args.now {
        Some(text) => parse_now(text)?,
        None => crate::clock::now(),
    };
    let query = Query {
        // clap insists on --cron unless --batch is given.
        cron: args.cron.as_deref().unwrap_or_default(),
        from: args.from.as_deref(),
        to: args.to.as_deref(),
        tz: args.tz.as_deref(),
        now,
        failed: args.failed,
        offset: match (args.rule_id, args.jitter) {
            (Some(id), Some(jitter)) => jitter_offset(id, jitter),
            _ => TimeDelta::zero(),
        },
        hours: args
            .hours
            .as_deref()
            .map(|text| json_argument("--hours", text))
            .transpose()?,
        timing: args
            .timing
            .as_deref()
            .map(|text| json_argument("--timing", text))
            .transpose()?,
    };
    let (schedule, next) = answer(&query)?;
    if args.json {
        return serde_json::to_string(&next).map_err(|error| error.to_string());
    }
    if let Some(window) = schedule.window().filter(|_| next.degenerate) {
        eprintln!(
            "warning: no occurrence of '{}' ever falls inside {window} ({}); \
             the next run is the window's next opening",
            schedule.recurrence(),
            schedule.zone(),
        );
    }
    Ok(format_instant(next.next_run_time))
}

/// Answers each input line with one output line; a bad line never stops the batch.
fn run_batch(input: impl BufRead, output: impl Write) -> io::Result<()> {
    let mut output = BufWriter::new(output);
    for line in input.split(b'\n') {
        let line = line?;
        let reply = match answer_line(&line) {
            Ok(next) => serde_json::to_string(&next),
            Err(message) => serde_json::to_string(&json!({ "error": message })),
        }?;
        writeln!(output, "{reply}")?;
    }
    output.flush()
}

fn answer_line(line: &[u8]) -> Result<NextRun, String> {
    let text = std::str::from_utf8(line).map_err(|_| "the line is not UTF-8".to_owned())?;
    let text = text.strip_suffix('\r').unwrap_or(text);
    if text.trim().is_empty() {
        return Err("the line is empty (expected a JSON object)".to_owned());
    }
    let fields: BatchLine = serde_json::from_str(text).map_err(describe_json_error)?;
    let offset = match (fields.branch_rule_id, fields.jitter_seconds) {
        (_, Some(jitter)) if jitter > MAX_JITTER_SECONDS => {
            return Err(format!(
                "jitter_seconds must be 0 to {MAX_JITTER_SECONDS}, not {jitter}"
            ));
        }
        (Some(id), Some(jitter)) => jitter_offset(id, jitter),
        (None, Some(_)) => {
            return Err("jitter_seconds needs branch_rule_id (it fixes the offset)".to_owned());
        }
        (_, None) => TimeDelta::zero(),
    };
    let (_, next) = answer(&Query {
        cron: &fields.cron,
        from: fields.from.as_deref(),
        to: fields.to.as_deref(),
        tz: fields.tz.as_deref(),
        now: parse_now(&fields.now)?,
        failed: fields.failed.unwrap_or(false),
        offset,
        hours: fields.hours,
        timing: fields.timing,
    })?;
    Ok(next)
}

fn answer(query: &Query<'_>) -> Result<(Schedule, NextRun), String> {
    let timed =
        query.hours.is_some() || query.timing.is_some() || AnchorSchedule::is_anchor(query.cron);
    let schedule = if timed {
        by_hours(query)?
    } else {
        Schedule::parse(query.cron, query.from, query.to, query.tz)
            .map_err(|error| error.to_string())?
    }
    .with_offset(query.offset);
    let next = schedule
        .next_run(query.now, query.failed)
        .map_err(|error| error.to_string())?;
    Ok((schedule, next))
}

/// A schedule with opening hours or timing, built as the functions and the runner build a
/// rule's (the window read first, so its errors name `from` and `to`).
fn by_hours(query: &Query<'_>) -> Result<Schedule, String> {
    let window = OperationWindow::parse(query.from, query.to).map_err(|e| e.to_string())?;
    let hours = query
        .hours
        .as_ref()
        .map(OpeningHours::from_spec)
        .transpose()
        .map_err(|error| format!("invalid hours: {error}"))?
        .map(Arc::new);
    if let Some(timing) = &query.timing {
        timing
            .check()
            .map_err(|error| format!("invalid timing: {error}"))?;
    }
    let rule = RuleSchedule::new(RuleTiming {
        id: Uuid::nil(),
        cron: Some(query.cron),
        from: window.map(|w| w.from()),
        to: window.map(|w| w.to()),
        zone: query.tz,
        jitter_seconds: 0,
        overlap: OverlapPolicy::Skip,
        hours: hours.as_ref(),
        spec: query.timing.as_ref(),
    });
    rule.schedule().cloned().map_err(str::to_owned)
}

/// A JSON option's value, or what is wrong with it naming the option.
fn json_argument<T: serde::de::DeserializeOwned>(option: &str, text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|error| format!("invalid {option}: {error}"))
}

fn parse_now(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|error| {
            format!(
                "invalid now '{text}': expected RFC 3339 such as 2026-03-02T11:00:00Z ({error})"
            )
        })
}

/// RFC 3339 in UTC with a `Z`, with fractional seconds only when there are any.
fn format_instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// serde_json's message without its "at line 1 column N" suffix: each input is one line.
fn describe_json_error(error: serde_json::Error) -> String {
    let message = error.to_string();
    let message = match message.rsplit_once(" at line ") {
        Some((head, _)) => head.to_owned(),
        None => message,
    };
    if error.column() > 0 {
        format!("invalid JSON: {message} (column {})", error.column())
    } else {
        format!("invalid JSON: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(input: &str) -> Vec<serde_json::Value> {
        let mut output = Vec::new();
        run_batch(input.as_bytes(), &mut output).expect("in-memory I/O");
        String::from_utf8(output)
            .expect("UTF-8 output")
            .lines()
            .map(|line| serde_json::from_str(line).expect("each output line is JSON"))
            .collect()
    }

    #[test]
    fn batch_answers_every_line_in_order() {
        let replies = batch(concat!(
            r#"{"cron": "*/30 * * * *", "from": "08:00", "to": "18:00", "now": "2026-03-02T11:00:00Z"}"#,
            "\n",
            r#"{"cron": "*/0 * * * *", "now": "2026-03-02T11:00:00Z"}"#,
            "\n",
            r#"{"cron": "0 7 * * *", "from": "08:00", "to": "18:00", "now": "2026-03-02T07:00:00Z"}"#,
            "\n",
        ));
        assert_eq!(
            replies,
            vec![
                json!({"next_run_time": "2026-03-02T11:30:00Z", "degenerate": false}),
                json!({"error": "invalid cron '*/0 * * * *': minute step must be >= 1"}),
                json!({"next_run_time": "2026-03-03T05:00:00Z", "degenerate": true}),
            ]
        );
    }

    #[test]
    fn batch_reports_malformed_lines_and_carries_on() {
        let replies = batch(concat!(
            "not json\n",
            "\n",
            r#"{"cron": "0 * * * *"}"#,
            "\n",
            r#"{"cron": "0 * * * *", "now": "yesterday"}"#,
            "\n",
            r#"{"cron": "0 * * * *", "now": "2026-03-02T11:00:00Z", "form": "08:00"}"#,
            "\n",
            r#"{"cron": "0 * * * *", "now": "2026-03-02T11:00:00Z", "failed": true}"#,
        ));
        let errors: Vec<&str> = replies
            .iter()
            .filter_map(|reply| reply.get("error").and_then(|e| e.as_str()))
            .collect();
        assert_eq!(errors.len(), 5, "{replies:?}");
        assert!(errors[0].starts_with("invalid JSON: "), "{}", errors[0]);
        assert!(errors[1].contains("the line is empty"));
        assert!(errors[2].contains("missing field `now`"));
        assert!(errors[3].starts_with("invalid now 'yesterday'"));
        assert!(errors[4].contains("unknown field `form`"));
        assert_eq!(
            replies[5],
            json!({"next_run_time": "2026-03-02T11:05:00Z", "degenerate": false})
        );
    }

    #[test]
    fn batch_lines_may_carry_a_jitter_with_the_rule_id_that_fixes_it() {
        // The id 42 under a 60 s jitter has the offset 42 s.
        let id = Uuid::from_u128(42);
        let replies = batch(&format!(
            "{}\n{}\n{}\n",
            json!({"cron": "0 * * * *", "now": "2026-03-02T11:00:00Z", "jitter_seconds": 60, "branch_rule_id": id}),
            json!({"cron": "0 * * * *", "now": "2026-03-02T11:00:00Z", "jitter_seconds": 60}),
            json!({"cron": "0 * * * *", "now": "2026-03-02T11:00:00Z", "jitter_seconds": 7200, "branch_rule_id": id}),
        ));
        assert_eq!(
            replies[0],
            json!({"next_run_time": "2026-03-02T11:00:42Z", "degenerate": false})
        );
        assert_eq!(
            replies[1],
            json!({"error": "jitter_seconds needs branch_rule_id (it fixes the offset)"})
        );
        assert_eq!(
            replies[2],
            json!({"error": "jitter_seconds must be 0 to 3600, not 7200"})
        );
    }

    #[test]
    fn instants_print_in_utc_with_z() {
        let t = parse_now("2026-03-02T14:00:00+03:00").expect("valid");
        assert_eq!(format_instant(t), "2026-03-02T11:00:00Z");
    }
}
