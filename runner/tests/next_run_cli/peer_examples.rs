//! The examples of other cron libraries' own test suites, asked of `res-runner next-run
//! --batch` as a child process. The examples live in `peer_examples/*.txt` beside this
//! file, one per line:
//!
//! ```text
//! # a comment (whole lines only)
//! zone: Europe/Berlin                      the zone of the lines that follow
//! <cron> | <start> | <t1> <t2> ...         the next runs after <start>, in order
//! <cron> | <start> | not <t>               the next run after <start> is not <t>
//! <cron> | <start> | refused: <text>       refused, the error saying <text>
//! <cron> | <start> | same as: <cron> for <n>  both give the same next <n> runs
//! ```
//!
//! An instant with an offset (`2013-10-27T03:00:00+02:00`, `...Z`) is that instant; without
//! one it is the zone's wall-clock time and must not be ambiguous. Examples whose library
//! follows another policy than RES's are left out in comments that name the policy.

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

use super::{runner_with_stdin, stderr, stdout};

/// What one example expects.
enum Expect {
    Runs(Vec<DateTime<Utc>>),
    Not(DateTime<Utc>),
    Refused(String),
    SameAs(String, usize),
}

/// The CLI's answer to one question.
type Answer = Result<DateTime<Utc>, String>;

/// A cron and its answers so far, each from the previous one.
type Chain = (String, Vec<Answer>);

struct Example {
    line: usize,
    cron: String,
    zone: Tz,
    start: DateTime<Utc>,
    expect: Expect,
}

fn instant(text: &str, zone: Tz) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .ok_or_else(|| format!("'{text}' is not a time"))?;
    zone.from_local_datetime(&naive)
        .single()
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| format!("'{text}' is ambiguous or skipped in {zone}: give its offset"))
}

fn parse(text: &str) -> Vec<Example> {
    let mut zone = Tz::UTC;
    let mut examples = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        // Comments are whole lines: '#' inside a line is cron's nth weekday.
        let content = raw.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if let Some(name) = content.strip_prefix("zone:") {
            zone = name
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("line {line}: {e}"));
            continue;
        }
        let parts: Vec<&str> = content.split('|').map(str::trim).collect();
        let [cron, start, expected] = parts[..] else {
            panic!("line {line}: expected '<cron> | <start> | <expectation>'");
        };
        let at = |t: &str| instant(t, zone).unwrap_or_else(|e| panic!("line {line}: {e}"));
        let expect = if let Some(text) = expected.strip_prefix("refused:") {
            Expect::Refused(text.trim().to_owned())
        } else if let Some(rest) = expected.strip_prefix("same as:") {
            let (other, count) = rest
                .rsplit_once(" for ")
                .unwrap_or_else(|| panic!("line {line}: 'same as: <cron> for <n>'"));
            let count = count
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("line {line}: {e}"));
            Expect::SameAs(other.trim().to_owned(), count)
        } else if let Some(t) = expected.strip_prefix("not ") {
            Expect::Not(at(t.trim()))
        } else {
            Expect::Runs(expected.split_whitespace().map(at).collect())
        };
        examples.push(Example {
            line,
            cron: cron.to_owned(),
            zone,
            start: at(start),
            expect,
        });
    }
    examples
}

/// One `next-run --batch` process answering `questions` (cron, zone, now).
fn ask(questions: &[(&str, Tz, DateTime<Utc>)]) -> Vec<Answer> {
    let input: String = questions
        .iter()
        .map(|(cron, zone, now)| {
            format!(
                "{}\n",
                json!({"cron": cron, "tz": zone.name(), "now": now.to_rfc3339()})
            )
        })
        .collect();
    let output = runner_with_stdin(&["next-run", "--batch"], &input);
    assert!(output.status.success(), "{}", stderr(&output));
    let answers: Vec<Answer> = stdout(&output)
        .lines()
        .map(|line| {
            let answer: Value = serde_json::from_str(line).expect("one JSON answer per line");
            match (answer["next_run_time"].as_str(), answer["error"].as_str()) {
                (Some(t), _) => Ok(DateTime::parse_from_rfc3339(t)
                    .expect("an RFC 3339 next run")
                    .with_timezone(&Utc)),
                (None, Some(error)) => Err(error.to_owned()),
                _ => panic!("neither a next run nor an error: {line}"),
            }
        })
        .collect();
    assert_eq!(answers.len(), questions.len(), "one answer per question");
    answers
}

/// Asks every example of `file` through as few processes as the longest sequence needs
/// (each round asks for the run after the previous answer) and fails with every
/// disagreement, by line.
fn check(file: &str) {
    let path = format!(
        "{}/tests/next_run_cli/peer_examples/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let examples = parse(&text);
    assert!(!examples.is_empty(), "{path} has no examples");
    // Per example: the chains it follows (one, or two for `same as`) and their answers.
    let mut chains: Vec<Vec<Chain>> = examples
        .iter()
        .map(|e| match &e.expect {
            Expect::SameAs(other, _) => vec![(e.cron.clone(), vec![]), (other.clone(), vec![])],
            _ => vec![(e.cron.clone(), vec![])],
        })
        .collect();
    let wanted = |e: &Example| match &e.expect {
        Expect::Runs(runs) => runs.len(),
        Expect::SameAs(_, n) => *n,
        Expect::Not(_) | Expect::Refused(_) => 1,
    };
    let rounds = examples.iter().map(wanted).max().unwrap_or(0);
    for _ in 0..rounds {
        let mut questions = Vec::new();
        let mut askers = Vec::new();
        for (index, example) in examples.iter().enumerate() {
            for (chain, (cron, answers)) in chains[index].iter().enumerate() {
                let from = match answers.last() {
                    None => example.start,
                    Some(Ok(t)) if answers.len() < wanted(example) => *t,
                    _ => continue,
                };
                questions.push((cron.as_str(), example.zone, from));
                askers.push((index, chain));
            }
        }
        if questions.is_empty() {
            break;
        }
        for ((index, chain), answer) in askers.into_iter().zip(ask(&questions)) {
            chains[index][chain].1.push(answer);
        }
    }
    let mut failures = Vec::new();
    for (example, chains) in examples.iter().zip(&chains) {
        let got = &chains[0].1;
        let fail = match &example.expect {
            Expect::Runs(runs) => {
                let got: Result<Vec<_>, _> = got.iter().cloned().collect();
                (got.as_ref() != Ok(runs)).then(|| format!("expected {runs:?}, got {got:?}"))
            }
            Expect::Not(t) => (got[0].as_ref() == Ok(t)).then(|| format!("runs at {t}")),
            Expect::Refused(text) => match &got[0] {
                Err(error) if error.contains(text.as_str()) => None,
                other => Some(format!("expected a refusal saying '{text}', got {other:?}")),
            },
            Expect::SameAs(other, _) => (chains[0].1 != chains[1].1
                || got.iter().any(Result::is_err))
            .then(|| format!("{got:?} but '{other}' gives {:?}", chains[1].1)),
        };
        if let Some(fail) = fail {
            failures.push(format!(
                "{file}:{} '{}' from {}: {fail}",
                example.line, example.cron, example.start
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn robfig_cron() {
    check("robfig.txt");
}

#[test]
fn croner() {
    check("croner.txt");
}

#[test]
fn croniter() {
    check("croniter.txt");
}
