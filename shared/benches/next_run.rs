//! Criterion benchmarks for parsing and the next-run answer, each measured beside the
//! naive croner-iteration approach on the same input. Results: docs/benchmarks.md.

mod common;

use std::hint::black_box;
use std::str::FromStr;
use std::time::Duration;

use common::{COMMON, Case, HARD};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use res_shared::schedule::{CronSchedule, Schedule};

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

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(50);
    targets = parse, common_rules, hard_rules
}
criterion_main!(benches);
