//! Criterion benchmarks for parsing and the next-run answer, each measured beside the
//! naive croner-iteration approach on the same input. Results: docs/benchmarks.md.

mod common;

use std::hint::black_box;
use std::str::FromStr;
use std::time::Duration;

use common::{COMMON, Case, HARD};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use res_shared::schedule::{
    CronSchedule, OperationWindow, OverlapPolicy, Schedule, reschedule, reschedule_run,
};

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    for expression in [
        "*/30 * * * *",
        "0 9 * * MON-FRI",
        "0,15,30,45 8-18 1-15 JAN-JUN 1-5",
        "*/20 * * * * *",
    ] {
        group.bench_with_input(BenchmarkId::new("cron", expression), expression, |b, e| {
            b.iter(|| CronSchedule::parse(black_box(e)))
        });
        // Croner's whole-pattern parser, for comparison: it also expands a year field.
        group.bench_with_input(
            BenchmarkId::new("croner", expression),
            expression,
            |b, e| b.iter(|| croner::Cron::from_str(black_box(e))),
        );
    }
    group.bench_function("schedule_with_window_and_zone", |b| {
        b.iter(|| {
            Schedule::parse(
                black_box("*/30 * * * *"),
                Some(black_box("08:00")),
                Some(black_box("18:00")),
                Some(black_box("Asia/Riyadh")),
            )
        })
    });
    group.finish();
}

fn compare(c: &mut Criterion, group_name: &str, cases: &[Case]) {
    let mut group = c.benchmark_group(group_name);
    for case in cases {
        let schedule = case.schedule().expect("benchmark rules are valid");
        let naive = case.naive();
        let now = case.now();
        group.bench_function(BenchmarkId::new("ours", case.name), |b| {
            b.iter(|| schedule.next_run(black_box(now), false))
        });
        group.bench_function(BenchmarkId::new("naive", case.name), |b| {
            b.iter(|| naive.next_run(black_box(now)))
        });
    }
    group.finish();
}

fn common_rules(c: &mut Criterion) {
    compare(c, "next_run_common", COMMON);
}

fn hard_rules(c: &mut Criterion) {
    compare(c, "next_run_hard", HARD);
}

/// An interval schedule and the cron expression closest to it, with one window and zone.
struct Pair {
    name: &'static str,
    interval: &'static str,
    cron: &'static str,
    window: Option<(&'static str, &'static str)>,
    tz: &'static str,
}

const PAIRS: [Pair; 5] = [
    Pair {
        name: "every_30m_window",
        interval: "@every 30m",
        cron: "*/30 * * * *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
    },
    Pair {
        name: "every_90m_window",
        interval: "@every 90m",
        cron: "0 8,11,14,17 * * *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
    },
    Pair {
        name: "every_1h_no_window",
        interval: "@every 1h",
        cron: "0 * * * *",
        window: None,
        tz: "Asia/Riyadh",
    },
    Pair {
        name: "weekdays_overnight_berlin",
        interval: "@every 90m on mon-fri",
        cron: "*/30 * * * 1-5",
        window: Some(("22:00", "06:00")),
        tz: "Europe/Berlin",
    },
    Pair {
        name: "every_45s_new_york",
        interval: "@every 45s",
        cron: "*/45 * * * * *",
        window: None,
        tz: "America/New_York",
    },
];

/// Interval schedules beside the cron expression closest to each, same window, zone and
/// instant, so the two searches compare directly.
fn intervals(c: &mut Criterion) {
    let now: chrono::DateTime<chrono::Utc> = "2026-03-02T11:07:13Z".parse().expect("instant");
    let mut group = c.benchmark_group("next_run_interval");
    for pair in &PAIRS {
        for (kind, text) in [("interval", pair.interval), ("cron", pair.cron)] {
            let (from, to) = (pair.window.map(|w| w.0), pair.window.map(|w| w.1));
            let schedule =
                Schedule::parse(text, from, to, Some(pair.tz)).expect("benchmark rules are valid");
            group.bench_function(BenchmarkId::new(kind, pair.name), |b| {
                b.iter(|| schedule.next_run(black_box(now), false))
            });
        }
    }
    group.finish();
}

/// What a report costs: the plain reschedule beside reschedule_run under each overlap
/// policy, for a run that finished before its next occurrence and for one that outlasted it
/// (buffered under buffer_one), each for a cron rule and an interval rule in a window.
fn overlap(c: &mut Criterion) {
    let at = |t: &str| -> chrono::DateTime<chrono::Utc> { t.parse().expect("instant") };
    let window = OperationWindow::parse(Some("08:00"), Some("18:00")).expect("window");
    let finished = at("2026-03-02T11:07:13Z");
    let mut group = c.benchmark_group("reschedule");
    for rule in ["*/30 * * * *", "@every 90m"] {
        let plain = |finished| {
            let zero = chrono::TimeDelta::zero();
            reschedule(
                Some(rule),
                window,
                Some("Asia/Riyadh"),
                zero,
                finished,
                false,
            )
        };
        let run = |policy, started, finished| {
            let zero = chrono::TimeDelta::zero();
            let tz = Some("Asia/Riyadh");
            reschedule_run(
                Some(rule),
                window,
                tz,
                zero,
                (policy, started),
                finished,
                false,
            )
        };
        // 08:00 Riyadh is 05:00 UTC: the cron's occurrences are :00 and :30, the
        // interval's 05:00 + 90 min steps (11:00 UTC).
        for (kind, started) in [
            ("short_run", at("2026-03-02T11:06:13Z")),
            ("outlasted", at("2026-03-02T10:50:00Z")),
        ] {
            group.bench_function(BenchmarkId::new(format!("reschedule/{kind}"), rule), |b| {
                b.iter(|| plain(black_box(finished)))
            });
            for policy in [OverlapPolicy::Skip, OverlapPolicy::BufferOne] {
                // The cases are what they say: only an outlasted run under buffer_one runs
                // again at its finish; every other answer is the plain reschedule's.
                let answer = run(policy, started, finished);
                if policy == OverlapPolicy::BufferOne && kind == "outlasted" {
                    assert_eq!(answer.next_run.next_run_time, finished, "{rule} {kind}");
                } else {
                    assert_eq!(answer, plain(finished), "{rule} {kind} {policy:?}");
                    assert!(answer.next_run.next_run_time > finished, "{rule} {kind}");
                }
                let name = format!("reschedule_run_{}/{kind}", policy.as_str());
                group.bench_function(BenchmarkId::new(name, rule), |b| {
                    b.iter(|| run(policy, black_box(started), black_box(finished)))
                });
            }
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(50);
    targets = parse, common_rules, hard_rules, intervals, overlap
}
criterion_main!(benches);
