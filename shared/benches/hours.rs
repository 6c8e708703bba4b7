//! Opening hours beside today's daily window (issue 47): the next run of a cron, an
//! `@every` grid and a run at opening under split weekly hours with a 60-date calendar,
//! from inside, from a closed evening and from before a closed day; the worst case, a cron
//! that never meets the hours (the search runs to its bound); and `locate` alone.
//! Results: docs/benchmarks.md, "Issue 47".

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Days, NaiveDate, Utc};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use res_shared::schedule::{
    DaySpec, HoursSpec, OpeningHours, Recurrence, Restriction, Schedule, Timetable, Validity, Zone,
};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("an instant")
}

/// Riyadh's split shifts and Friday hours, with 60 special days over the next year: every
/// sixth day, closed or (every other one) with its own hours.
fn riyadh_hours() -> Arc<OpeningHours> {
    let first = NaiveDate::from_ymd_opt(2026, 10, 1).expect("a date");
    let days = (0..60)
        .map(|i| DaySpec {
            date: first + Days::new(i * 6),
            until: None,
            name: Some(format!("day {i}")),
            calendar: Some("holidays".into()),
            hours: if i % 2 == 0 {
                Vec::new()
            } else {
                vec!["10:00-14:00".into()]
            },
        })
        .collect();
    let spec = HoursSpec {
        week: [
            (
                "sat-thu".to_owned(),
                vec!["09:00-12:00".to_owned(), "16:00-23:00".to_owned()],
            ),
            ("fri".to_owned(), vec!["16:00-23:30".to_owned()]),
        ]
        .into_iter()
        .collect(),
        days,
        calendars: Vec::new(),
    };
    Arc::new(OpeningHours::from_spec(&spec).expect("valid hours"))
}

fn while_open(hours: &Arc<OpeningHours>) -> Timetable {
    Timetable::new(
        Some(Restriction::Hours {
            hours: hours.clone(),
            before: 1800,
            after: 900,
        }),
        Validity::default(),
    )
    .expect("a timetable")
}

/// Inside Saturday's morning shift; Saturday after closing; the evening before a closed day
/// (2026-10-07, day 1 of the calendar, is a Wednesday with its own hours; 2026-10-13 closed).
const INSTANTS: [(&str, &str); 3] = [
    ("inside", "2026-10-03T07:05:00Z"),
    ("closed_evening", "2026-10-03T20:40:00Z"),
    ("before_closed_day", "2026-10-12T20:40:00Z"),
];

fn next_run(c: &mut Criterion) {
    let zone = Zone::parse("Asia/Riyadh").expect("zone");
    let hours = riyadh_hours();
    let cron = || Recurrence::parse("*/15 * * * *").expect("cron");
    let daily = Schedule::parse(
        "*/15 * * * *",
        Some("08:30"),
        Some("23:15"),
        Some("Asia/Riyadh"),
    )
    .expect("daily");
    let open = Schedule::in_timetable(cron(), Some(while_open(&hours)), None, zone).expect("open");
    let every = Schedule::in_timetable(
        Recurrence::parse("@every 45m").expect("interval"),
        Some(while_open(&hours)),
        None,
        zone,
    )
    .expect("every");
    let opening = Schedule::in_timetable(
        Recurrence::parse("@opening +10m").expect("anchor"),
        None,
        Some(hours.clone()),
        zone,
    )
    .expect("opening");
    let mut group = c.benchmark_group("hours");
    for (name, instant) in INSTANTS {
        let now = at(instant);
        for (kind, schedule) in [
            ("daily_window", &daily),
            ("split_hours_60_dates", &open),
            ("every_45m_in_hours", &every),
            ("opening_plus_10m", &opening),
        ] {
            group.bench_function(BenchmarkId::new(kind, name), |b| {
                b.iter(|| schedule.next_run(black_box(now), false))
            });
        }
        let timetable = while_open(&hours);
        group.bench_function(BenchmarkId::new("locate", name), |b| {
            b.iter(|| timetable.locate(black_box(now), zone))
        });
    }
    // Worst case: open Thursdays 09:00–12:00 only, a cron at 10:00 on the 1st of a month.
    // A Thursday the 1st comes a few times a year; a cron that never meets them (the 31st
    // of February) runs the search to its bound.
    let thursdays: HoursSpec = serde_json::from_value(serde_json::json!({
        "week": {"thu": ["09:00-12:00"]}
    }))
    .expect("spec");
    let thursdays = Arc::new(OpeningHours::from_spec(&thursdays).expect("valid"));
    // `weekly_never`: Mondays at 10:00, open Thursdays only — the search runs its year.
    for (name, expression) in [
        ("rare", "0 10 1 * *"),
        ("never", "0 10 31 2 *"),
        ("weekly_never", "0 10 * * 1"),
    ] {
        let schedule = Schedule::in_timetable(
            Recurrence::parse(expression).expect("cron"),
            Some(while_open(&thursdays)),
            None,
            zone,
        )
        .expect("schedule");
        let now = at("2026-10-03T07:05:00Z");
        group.bench_function(BenchmarkId::new("worst_case", name), |b| {
            b.iter(|| schedule.next_run(black_box(now), false))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(50);
    targets = next_run
}
criterion_main!(benches);
