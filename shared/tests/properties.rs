//! Property tests: the crate against an independent brute-force reference and against
//! croner itself, over random expressions, windows, zones and instants that crowd around
//! DST changes and leap days.

mod reference;

use std::collections::HashMap;
use std::sync::OnceLock;

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use reference::{
    RefAnswer, RefCron, RefInterval, RefWindow, describe, reference_interval_next,
    reference_next_run, transitions,
};
use res_shared::schedule::{
    CronSchedule, Deadline, FAILED_RUN_RETRY, NextRun, OperationWindow, OverlapPolicy, Recurrence,
    Schedule, ScheduleError, Zone, reschedule_run,
};

const ZONES: [Tz; 7] = [
    Tz::Asia__Riyadh,
    Tz::Europe__Berlin,
    Tz::America__New_York,
    Tz::Asia__Kolkata,
    Tz::Pacific__Chatham,
    // Half-hour DST.
    Tz::Australia__Lord_Howe,
    // Changes its clocks at midnight.
    Tz::America__Santiago,
];

fn utc_seconds(year: i32) -> i64 {
    NaiveDate::from_ymd_opt(year, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp())
        .expect("valid year")
}

/// DST changes of every test zone between 2020 and 2041.
fn zone_transitions(tz: Tz) -> &'static [DateTime<Utc>] {
    static CACHE: OnceLock<HashMap<Tz, Vec<DateTime<Utc>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let (from, to) = (utc_seconds(2020), utc_seconds(2041));
        let instant = |s| DateTime::<Utc>::from_timestamp(s, 0).expect("in range");
        ZONES
            .iter()
            .map(|tz| (*tz, transitions(*tz, instant(from), instant(to))))
            .collect()
    });
    cache.get(&tz).map(Vec::as_slice).unwrap_or(&[])
}

/// An instant: uniform over 2020-2040, near a DST change, or near a leap day.
fn instant_in(tz: Tz) -> BoxedStrategy<DateTime<Utc>> {
    let changes = zone_transitions(tz).to_vec();
    let two_days = 2 * 86_400i64;
    let uniform = (utc_seconds(2020)..utc_seconds(2041)).boxed();
    let near_change = if changes.is_empty() {
        uniform.clone()
    } else {
        (select(changes), -two_days..two_days)
            .prop_map(|(change, delta)| change.timestamp() + delta)
            .boxed()
    };
    let leap_days: Vec<i64> = [2024, 2028, 2032, 2036, 2040]
        .iter()
        .map(|year| {
            let wall = NaiveDate::from_ymd_opt(*year, 2, 29)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .expect("leap day");
            tz.from_local_datetime(&wall)
                .earliest()
                .map(|t| t.timestamp())
                .expect("midnight exists")
        })
        .collect();
    let near_leap = (select(leap_days), -two_days..two_days)
        .prop_map(|(day, delta)| day + delta)
        .boxed();
    let seconds = prop_oneof![3 => uniform, 4 => near_change, 2 => near_leap];
    // Whole minutes hit exact-match edges; milliseconds test "strictly after now".
    (seconds, 0u8..10, 1u32..1000)
        .prop_map(|(s, shape, millis)| {
            let s = if shape < 5 { s - s.rem_euclid(60) } else { s };
            let nanos = if shape == 9 { millis * 1_000_000 } else { 0 };
            DateTime::<Utc>::from_timestamp(s, nanos).expect("in range")
        })
        .boxed()
}

fn zone_and_instant() -> impl Strategy<Value = (Tz, DateTime<Utc>)> {
    select(ZONES.to_vec()).prop_flat_map(|tz| (Just(tz), instant_in(tz)))
}

/// One cron field over `min..=max` (steps stay within the field's span).
fn field(
    min: u32,
    max: u32,
    star_weight: u32,
    names: &'static [&'static str],
) -> BoxedStrategy<String> {
    let span = max - min;
    // 0-7 names Sunday twice, so day-of-week steps stop at 6.
    let max_step = if max == 7 { 6 } else { span };
    let value = min..=max;
    let named = move |v: u32| -> String {
        let index = (v - min) as usize;
        match names.get(index) {
            Some(name) if v.is_multiple_of(2) => (*name).to_owned(),
            _ => v.to_string(),
        }
    };
    prop_oneof![
        star_weight => Just("*".to_owned()),
        2 => (1..=max_step).prop_map(|k| format!("*/{k}")),
        3 => value.clone().prop_map(named),
        2 => (value.clone(), 0..=span).prop_map(move |(a, len)| {
            format!("{}-{}", named(a), named((a + len).min(max)))
        }),
        1 => (value.clone(), 0..=span, 1..=max_step)
            .prop_map(move |(a, len, k)| format!("{a}-{}/{k}", (a + len).min(max))),
        1 => (value.clone(), 1..=max_step).prop_map(|(a, k)| format!("{a}/{k}")),
        2 => prop::collection::vec(value, 2..4).prop_map(move |vs| {
            vs.into_iter().map(named).collect::<Vec<_>>().join(",")
        }),
    ]
    .boxed()
}

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Expressions of every shape the contract supports; seconds stay sparse so the
/// brute-force reference stays quick.
fn cron_expression() -> impl Strategy<Value = String> {
    let seconds = select(vec!["0", "30", "*/15", "*/20", "0,30", "5-10/5", "59"]);
    // `?` is the day fields' other spelling of `*` (Quartz, EventBridge).
    let any = |field: BoxedStrategy<String>| {
        (field, prop::bool::weighted(0.3)).prop_map(|(f, question)| {
            if question && f == "*" {
                "?".to_owned()
            } else {
                f
            }
        })
    };
    let fields = (
        field(0, 59, 2, &[]),
        field(0, 23, 3, &[]),
        prop_oneof![8 => any(field(1, 31, 8, &[])), 2 => month_day_extension()],
        field(1, 12, 8, &MONTH_NAMES),
        prop_oneof![8 => any(field(0, 7, 6, &DAY_NAMES)), 2 => weekday_extension()],
    );
    let macros = select(vec!["@hourly", "@daily", "@weekly", "@monthly", "@yearly"]);
    // Quartz's seventh field: years around the generated instants (2020-2040).
    let years = prop_oneof![
        Just("*".to_owned()),
        (2018u32..2045).prop_map(|y| y.to_string()),
        (2018u32..2045, 0u32..8).prop_map(|(y, n)| format!("{y}-{}", y + n)),
        (2018u32..2045, 1u32..5).prop_map(|(y, k)| format!("{y}/{k}")),
        (2018u32..2045, 2018u32..2045).prop_map(|(a, b)| format!("{a},{b}")),
    ];
    prop_oneof![
        12 => fields.clone().prop_map(|(m, h, dom, mon, dow)| format!("{m} {h} {dom} {mon} {dow}")),
        4 => (seconds.clone(), fields.clone()).prop_map(|(s, (m, h, dom, mon, dow))| {
            format!("{s} {m} {h} {dom} {mon} {dow}")
        }),
        2 => (seconds, fields, years).prop_map(|(s, (m, h, dom, mon, dow), y)| {
            format!("{s} {m} {h} {dom} {mon} {dow} {y}")
        }),
        1 => macros.prop_map(str::to_owned),
    ]
}

/// `@every` schedules: common intervals, any whole number of seconds up to a day (mostly
/// minutes, so the stepping reference stays quick), sometimes limited to some weekdays.
fn interval_expression() -> impl Strategy<Value = String> {
    let common = select(vec![
        "90m", "1h30m", "15m", "2s", "45s", "7h", "24h", "1h", "25m", "3h20m",
    ])
    .prop_map(str::to_owned);
    let minutes = (1i64..=1_440).prop_map(|m| duration(m * 60));
    let seconds = (1i64..=86_400).prop_map(duration);
    let every = prop_oneof![4 => common, 4 => minutes, 1 => seconds];
    let days = prop_oneof![
        3 => Just(String::new()),
        1 => field(0, 7, 1, &DAY_NAMES).prop_map(|d| format!(" on {d}")),
    ];
    (every, days).prop_map(|(every, days)| format!("@every {every}{days}"))
}

/// Seconds written the way people do: `1h30m`, `45s`, `24h`.
fn duration(seconds: i64) -> String {
    let (h, m, s) = (seconds / 3_600, seconds % 3_600 / 60, seconds % 60);
    [(h, "h"), (m, "m"), (s, "s")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect()
}

/// Asserts that our interval answer is the reference's (never degenerate).
fn assert_interval(
    interval: &str,
    window: Option<(NaiveTime, NaiveTime)>,
    tz: Tz,
    now: DateTime<Utc>,
    failed: bool,
) -> Result<(), TestCaseError> {
    let expected = reference_interval_next(
        &RefInterval::parse(interval),
        ref_window(window).as_ref(),
        tz,
        now,
    );
    let schedule = build(interval, window, tz).expect("generated intervals are valid");
    prop_assert!(matches!(schedule.recurrence(), Recurrence::Interval(_)));
    let answer = schedule.next_run(now, failed).expect("a next run");
    assert_reference(answer, RefAnswer::Next(expected), failed, tz, now)
}

/// Croner's day-of-month extensions, alone or in a list: `L`, `LW`, `15W`, `L,1`.
fn month_day_extension() -> BoxedStrategy<String> {
    let one = prop_oneof![
        Just("L".to_owned()),
        Just("LW".to_owned()),
        (1u32..=31).prop_map(|d| format!("{d}W")),
        // The month's edges, where W must not leave the month.
        select(vec![1u32, 2, 28, 29, 30, 31]).prop_map(|d| format!("{d}W")),
    ];
    prop_oneof![
        3 => one.clone(),
        1 => (one, 1u32..=31).prop_map(|(special, d)| format!("{special},{d}")),
    ]
    .boxed()
}

/// Croner's day-of-week extensions: `5L`, `FRIL`, `MON#2`, `0#5`, and lists of them.
fn weekday_extension() -> BoxedStrategy<String> {
    let weekday =
        (0u32..=7, any::<bool>()).prop_map(|(w, named)| match DAY_NAMES.get(w as usize) {
            Some(name) if named => (*name).to_owned(),
            _ => w.to_string(),
        });
    let one = prop_oneof![
        weekday.clone().prop_map(|w| format!("{w}L")),
        (weekday, 1u32..=5).prop_map(|(w, k)| format!("{w}#{k}")),
    ];
    prop_oneof![
        3 => one.clone(),
        1 => (one.clone(), one).prop_map(|(a, b)| format!("{a},{b}")),
        1 => (weekday_plain(), 1u32..=5).prop_map(|(w, k)| format!("{w},{w}#{k}")),
    ]
    .boxed()
}

fn weekday_plain() -> impl Strategy<Value = u32> {
    0u32..=6
}

fn time_of_day() -> impl Strategy<Value = NaiveTime> {
    (0u32..86_400, any::<bool>()).prop_map(|(s, whole_minute)| {
        let s = if whole_minute { s - s % 60 } else { s };
        NaiveTime::from_num_seconds_from_midnight_opt(s, 0).expect("in range")
    })
}

fn window() -> impl Strategy<Value = Option<(NaiveTime, NaiveTime)>> {
    prop_oneof![
        3 => Just(None),
        1 => time_of_day().prop_map(|t| Some((t, t))),
        8 => (time_of_day(), time_of_day()).prop_map(Some),
    ]
}

fn text(time: NaiveTime) -> String {
    time.format("%H:%M:%S").to_string()
}

fn ref_window(window: Option<(NaiveTime, NaiveTime)>) -> Option<RefWindow> {
    window
        .filter(|(from, to)| from != to)
        .map(|(from, to)| RefWindow::new(from, to))
}

fn build(
    cron: &str,
    window: Option<(NaiveTime, NaiveTime)>,
    tz: Tz,
) -> Result<Schedule, ScheduleError> {
    let (from, to) = (window.map(|w| text(w.0)), window.map(|w| text(w.1)));
    Schedule::parse(cron, from.as_deref(), to.as_deref(), Some(tz.name()))
}

/// Asserts that our answer is the reference's: the time (or `now + 5 min` after a
/// failure) and the degenerate flag.
fn assert_reference(
    answer: NextRun,
    expected: RefAnswer,
    failed: bool,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<(), TestCaseError> {
    let (time, degenerate) = match expected {
        RefAnswer::Next(t) => (t, false),
        RefAnswer::Degenerate(t) => (t, true),
    };
    let time = if failed { now + FAILED_RUN_RETRY } else { time };
    prop_assert_eq!(answer.degenerate, degenerate);
    prop_assert_eq!(
        answer.next_run_time,
        time,
        "got {} expected {} (now {})",
        describe(tz, answer.next_run_time),
        describe(tz, time),
        describe(tz, now),
    );
    Ok(())
}

/// Croner's parser as RES reads cron: a start with a step (`5/15`) runs to the end of the
/// field, which croner accepts only when asked to (robfig/cron and Quartz always do).
fn croner_parse(text: &str) -> Result<croner::Cron, croner::errors::CronError> {
    croner::parser::CronParser::builder()
        .sloppy_ranges(true)
        .build()
        .parse(text)
}

/// Asserts that our cron search and croner's find the same next occurrence.
fn assert_croner(cron: &CronSchedule, tz: Tz, now: DateTime<Utc>) -> Result<(), TestCaseError> {
    let croner = croner_parse(cron.expression()).expect("croner parses it too");
    let ours = cron.next_after(now, Zone::parse(tz.name()).expect("zone"));
    let Ok(theirs) = croner.find_next_occurrence(&now.with_timezone(&tz), false) else {
        // Croner gives up when a year field's years have passed; so must we.
        prop_assert_eq!(
            ours,
            None,
            "croner finds no run (now {})",
            describe(tz, now)
        );
        return Ok(());
    };
    let theirs = theirs.with_timezone(&Utc);
    prop_assert_eq!(
        ours,
        Some(theirs),
        "ours {:?} croner {} (now {})",
        ours.map(|t| describe(tz, t)),
        describe(tz, theirs),
        describe(tz, now),
    );
    Ok(())
}

/// Zones that change their clocks.
const DST_ZONES: [Tz; 5] = [
    Tz::Europe__Berlin,
    Tz::America__New_York,
    Tz::Pacific__Chatham,
    Tz::Australia__Lord_Howe,
    Tz::America__Santiago,
];

/// A zone, one of its clock changes, and an instant from four hours before it to two after.
fn dst_edge() -> impl Strategy<Value = (Tz, DateTime<Utc>, DateTime<Utc>)> {
    select(DST_ZONES.to_vec())
        .prop_flat_map(|tz| (Just(tz), select(zone_transitions(tz).to_vec())))
        .prop_flat_map(|(tz, change)| {
            (
                Just(tz),
                Just(change),
                -4 * 3600i64..2 * 3600,
                any::<bool>(),
            )
        })
        .prop_map(|(tz, change, delta, whole_minute)| {
            let s = change.timestamp() + delta;
            let s = if whole_minute {
                s - s.rem_euclid(60)
            } else {
                s
            };
            let now = DateTime::<Utc>::from_timestamp(s, 0).expect("in range");
            (tz, change, now)
        })
}

/// Expressions aimed at the wall-clock hours around a clock change: fixed times that
/// land in the gap or the overlap, and intervals that cross it.
fn cron_near(tz: Tz, change: DateTime<Utc>) -> BoxedStrategy<String> {
    use chrono::Timelike;
    let hour_before = (change - TimeDelta::hours(1)).with_timezone(&tz).hour();
    let hours: Vec<u32> = (0..4).map(|h| (hour_before + h) % 24).collect();
    prop_oneof![
        (select(hours.clone()), 0u32..60).prop_map(|(h, m)| format!("{m} {h} * * *")),
        (select(hours.clone()), 0u32..60, select(vec![0u32, 30]))
            .prop_map(|(h, m, s)| format!("{s} {m} {h} * * *")),
        select(vec![
            "*/15 * * * *",
            "*/30 * * * *",
            "* * * * *",
            "0 * * * *",
            "*/20 * * * * *"
        ])
        .prop_map(str::to_owned),
        (select(hours.clone()), select(hours), 0u32..60)
            .prop_map(|(a, b, m)| format!("{m} {a},{b} * * *")),
        (select(vec![0u32, 30, 45]), select(vec![2u32, 3]))
            .prop_map(|(m, h)| format!("{m} {h} * * *")),
    ]
    .boxed()
}

/// A window whose edges sit near the wall-clock time of a clock change, or anywhere.
fn window_near(tz: Tz, change: DateTime<Utc>) -> BoxedStrategy<Option<(NaiveTime, NaiveTime)>> {
    let wall = (change - TimeDelta::minutes(30)).with_timezone(&tz).time();
    let near = move |minutes: i64| wall + TimeDelta::minutes(minutes);
    prop_oneof![
        1 => Just(None),
        2 => (-120i64..120, -120i64..120).prop_map(move |(a, b)| Some((near(a), near(b)))),
        1 => window(),
    ]
    .boxed()
}

proptest! {
    // PROPTEST_CASES=50000 runs a deeper search locally.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn next_run_agrees_with_the_reference(
        (tz, now) in zone_and_instant(),
        cron in cron_expression(),
        window in window(),
        failed in prop::bool::weighted(0.1),
    ) {
        let expected = reference_next_run(&RefCron::parse(&cron), ref_window(window).as_ref(), tz, now);
        let schedule = match build(&cron, window, tz) {
            Ok(schedule) => schedule,
            Err(error) => {
                // Only an expression that never matches, with no window, may be refused.
                prop_assert!(matches!(error, ScheduleError::NeverMatches { .. }), "{error}");
                prop_assert_eq!(expected, None);
                return Ok(());
            }
        };
        let answer = schedule.next_run(now, failed);
        let Some(expected) = expected else {
            // Only a year field whose years have passed leaves nothing to find; a failed
            // run is still retried in five minutes.
            prop_assert!(cron.split_whitespace().count() == 7, "the reference found no run");
            match answer {
                Ok(answer) => prop_assert!(failed && answer.next_run_time == now + FAILED_RUN_RETRY),
                Err(error) => prop_assert!(matches!(error, ScheduleError::OutOfRange { .. }), "{error}"),
            }
            return Ok(());
        };
        assert_reference(answer.expect("a next run"), expected, failed, tz, now)?;
    }

    #[test]
    fn dst_edges_agree_with_the_reference_and_croner(
        (tz, cron, window, now) in dst_edge().prop_flat_map(|(tz, change, now)| {
            (Just(tz), cron_near(tz, change), window_near(tz, change), Just(now))
        }),
    ) {
        let expected = reference_next_run(&RefCron::parse(&cron), ref_window(window).as_ref(), tz, now)
            .expect("the reference finds a run");
        let schedule = build(&cron, window, tz).expect("valid schedule");
        let answer = schedule.next_run(now, false).expect("a next run");
        assert_reference(answer, expected, false, tz, now)?;
        let Recurrence::Cron(ours) = schedule.recurrence() else {
            return Err(TestCaseError::fail("a generated cron parsed as an interval"));
        };
        assert_croner(ours, tz, now)?;
    }

    #[test]
    fn intervals_agree_with_the_reference(
        (tz, now) in zone_and_instant(),
        interval in interval_expression(),
        window in window(),
        failed in prop::bool::weighted(0.1),
    ) {
        assert_interval(&interval, window, tz, now, failed)?;
    }

    #[test]
    fn intervals_at_dst_edges_agree_with_the_reference(
        (tz, interval, window, now) in dst_edge().prop_flat_map(|(tz, change, now)| {
            (Just(tz), interval_expression(), window_near(tz, change), Just(now))
        }),
    ) {
        assert_interval(&interval, window, tz, now, false)?;
    }

    #[test]
    fn buffer_one_agrees_with_the_reference(
        (tz, started) in zone_and_instant(),
        run_seconds in prop_oneof![0i64..600, 0i64..4 * 3600],
        cron in prop_oneof![cron_expression(), interval_expression()],
        window in window(),
    ) {
        prop_assume!(build(&cron, window, tz).is_ok());
        let finished = started + TimeDelta::seconds(run_seconds);
        let reference_window = ref_window(window);
        let reference = |now| {
            if cron.starts_with("@every") {
                Some(RefAnswer::Next(reference_interval_next(
                    &RefInterval::parse(&cron),
                    reference_window.as_ref(),
                    tz,
                    now,
                )))
            } else {
                reference_next_run(&RefCron::parse(&cron), reference_window.as_ref(), tz, now)
            }
        };
        // One more run at the finish when an occurrence came due by then and the finish
        // is inside the window; otherwise the schedule's next run after the finish.
        let came_due = matches!(reference(started), Some(RefAnswer::Next(t)) if t <= finished);
        let finish_in_window = reference_window.as_ref().is_none_or(|w| w.contains(tz, finished));
        let expected = if came_due && finish_in_window {
            RefAnswer::Next(finished)
        } else {
            let Some(answer) = reference(finished) else {
                return Ok(());
            };
            answer
        };
        let (from, to) = (window.map(|w| text(w.0)), window.map(|w| text(w.1)));
        let answer = reschedule_run(
            Some(&cron),
            OperationWindow::parse(from.as_deref(), to.as_deref()).expect("valid window"),
            Some(tz.name()),
            TimeDelta::zero(),
            (OverlapPolicy::BufferOne, started),
            finished,
            false,
        );
        prop_assert_eq!(answer.problem, None);
        assert_reference(answer.next_run, expected, false, tz, finished)?;
    }

    #[test]
    fn cron_search_agrees_with_croner(
        (tz, now) in zone_and_instant(),
        cron in cron_expression(),
    ) {
        let ours = CronSchedule::parse(&cron).expect("generated expressions are valid");
        prop_assume!(ours.can_ever_match());
        assert_croner(&ours, tz, now)?;
    }

    #[test]
    fn wall_clock_matching_agrees_with_croner(
        cron in cron_expression(),
        seconds in 0i64..(40 * 366 * 86_400),
    ) {
        let ours = CronSchedule::parse(&cron).expect("generated expressions are valid");
        let croner = croner_parse(&cron).expect("croner parses it too");
        let wall = DateTime::<Utc>::UNIX_EPOCH.naive_utc()
            + TimeDelta::seconds(seconds + utc_seconds(2000) - utc_seconds(1970));
        prop_assert_eq!(ours.matches(wall), croner.is_time_matching(&wall).expect("croner matches"));
    }

    #[test]
    fn deadlines_and_window_membership_agree_with_the_reference(
        (tz, t) in zone_and_instant(),
        (from, to) in (time_of_day(), time_of_day()),
    ) {
        prop_assume!(from != to);
        let reference = RefWindow::new(from, to);
        let window = OperationWindow::new(from, to).expect("from != to");
        let zone = Zone::parse(tz.name()).expect("zone");
        let schedule = Schedule::new(CronSchedule::parse("* * * * *").expect("valid"), Some(window), zone)
            .expect("valid schedule");
        let expected = match reference.containing(tz, t) {
            Some((_, end)) => Deadline::At(end),
            None => Deadline::OutsideWindow { next_start: reference.next_start(tz, t) },
        };
        prop_assert_eq!(schedule.deadline(t), expected, "at {}", describe(tz, t));
        prop_assert_eq!(schedule.in_window(t), reference.contains(tz, t));
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = CronSchedule::parse(&text);
        let _ = Schedule::parse(&text, Some(&text), Some(&text), Some(&text));
    }

    #[test]
    fn cron_like_text_is_accepted_only_where_croner_agrees(
        text in "[0-9*/,\\- ]{1,12}( [0-9*/,\\-A-Za-z#?]{1,6}){4,5}",
    ) {
        if let Ok(ours) = CronSchedule::parse(&text) {
            let croner = croner_parse(&text);
            prop_assert!(croner.is_ok(), "we accept '{}' but croner does not", text);
            let croner = croner.expect("checked above");
            let wall = NaiveDate::from_ymd_opt(2026, 3, 2).and_then(|d| d.and_hms_opt(14, 30, 0)).expect("valid");
            for hours in 0..(24 * 40) {
                let probe = wall + TimeDelta::minutes(hours * 47);
                prop_assert_eq!(ours.matches(probe), croner.is_time_matching(&probe).expect("croner matches"));
            }
        }
    }
}
