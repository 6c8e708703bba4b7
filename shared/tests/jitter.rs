//! Jitter: each branch rule runs a fixed offset after its cron time, and the window still
//! bounds every run.

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use proptest::sample::select;
use res_shared::schedule::{Deadline, MAX_JITTER_SECONDS, Schedule, jitter_offset, reschedule};
use uuid::Uuid;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("instant")
}

fn schedule(cron: &str, window: Option<(&str, &str)>, tz: &str, offset: i64) -> Schedule {
    Schedule::parse(cron, window.map(|w| w.0), window.map(|w| w.1), Some(tz))
        .expect("valid")
        .with_offset(TimeDelta::seconds(offset))
}

fn next(schedule: &Schedule, now: &str) -> DateTime<Utc> {
    schedule
        .next_run(at(now), false)
        .expect("a next run")
        .next_run_time
}

#[test]
fn a_run_happens_its_offset_after_the_cron_time_even_when_asked_between_the_two() {
    let hourly = schedule("0 * * * *", None, "UTC", 37);
    assert_eq!(
        next(&hourly, "2026-03-02T09:59:00Z"),
        at("2026-03-02T10:00:37Z")
    );
    // The 10:00 cron time has passed, its run has not.
    assert_eq!(
        next(&hourly, "2026-03-02T10:00:10Z"),
        at("2026-03-02T10:00:37Z")
    );
    assert_eq!(
        next(&hourly, "2026-03-02T10:00:37Z"),
        at("2026-03-02T11:00:37Z")
    );
}

#[test]
fn an_offset_that_would_cross_the_window_end_runs_in_the_windows_last_second() {
    // Every 30 minutes, 08:00–18:00 Riyadh (UTC+3).
    let twenty = schedule(
        "*/30 * * * *",
        Some(("08:00", "18:00")),
        "Asia/Riyadh",
        20 * 60,
    );
    // At 17:05 the 17:00 cron time's run (17:20) is still ahead.
    assert_eq!(
        next(&twenty, "2026-03-02T14:05:00Z"),
        at("2026-03-02T14:20:00Z")
    );
    let forty = schedule(
        "*/30 * * * *",
        Some(("08:00", "18:00")),
        "Asia/Riyadh",
        40 * 60,
    );
    // 16:30 + 40 min = 17:10, inside.
    assert_eq!(
        next(&forty, "2026-03-02T13:50:00Z"),
        at("2026-03-02T14:10:00Z")
    );
    // After 17:40 (17:00's run), 17:30 + 40 min would be 18:10, outside: 17:59:59.
    assert_eq!(
        next(&forty, "2026-03-02T14:40:00Z"),
        at("2026-03-02T14:59:59Z")
    );
    // Then the next morning's first cron time, moved: 08:40.
    assert_eq!(
        next(&forty, "2026-03-02T14:59:59Z"),
        at("2026-03-03T05:40:00Z")
    );
}

#[test]
fn an_overnight_window_bounds_the_offset_at_its_morning_end() {
    // 22:00–02:00 UTC, at 01:00 with an hour's offset: 02:00 is the (exclusive) end.
    let late = schedule("0 1 * * *", Some(("22:00", "02:00")), "UTC", 3_600);
    assert_eq!(
        next(&late, "2026-03-02T00:00:00Z"),
        at("2026-03-02T01:59:59Z")
    );
    let early = schedule("0 23 * * *", Some(("22:00", "02:00")), "UTC", 3_600);
    assert_eq!(
        next(&early, "2026-03-02T12:00:00Z"),
        at("2026-03-03T00:00:00Z")
    );
}

#[test]
fn across_a_dst_change_the_offset_is_elapsed_time() {
    // Berlin springs forward at 02:00 CET on 2026-03-29 (00:30 UTC is 01:30 CET).
    let berlin = schedule("30 1 * * *", None, "Europe/Berlin", 3_600);
    // 01:30 CET + one hour of real time = 01:30 UTC = 03:30 CEST on the wall clock.
    assert_eq!(
        next(&berlin, "2026-03-29T00:00:00Z"),
        at("2026-03-29T01:30:00Z")
    );
    // A window to 03:00 local ends at 01:00 UTC that day: the run is kept inside it.
    let windowed = schedule(
        "30 1 * * *",
        Some(("00:00", "03:00")),
        "Europe/Berlin",
        3_600,
    );
    assert_eq!(
        next(&windowed, "2026-03-29T00:00:00Z"),
        at("2026-03-29T00:59:59Z")
    );
    // Falling back on 2026-10-25 (03:00 CEST becomes 02:00 CET): 01:30 CEST is 23:30 UTC.
    assert_eq!(
        next(&berlin, "2026-10-24T23:00:00Z"),
        at("2026-10-25T00:30:00Z")
    );
}

#[test]
fn a_failed_run_is_retried_in_five_minutes_without_the_offset() {
    let hourly = schedule("0 * * * *", None, "UTC", 1_800);
    let retry = hourly
        .next_run(at("2026-03-02T10:12:00Z"), true)
        .expect("a retry");
    assert_eq!(retry.next_run_time, at("2026-03-02T10:17:00Z"));
}

#[test]
fn reschedule_applies_the_rule_s_offset() {
    let id = Uuid::from_u128(42);
    let offset = jitter_offset(id, 60);
    assert_eq!(offset, TimeDelta::seconds(42));
    let next = reschedule(
        Some("0 * * * *"),
        None,
        Some("UTC"),
        offset,
        at("2026-03-02T10:00:42Z"),
        false,
    );
    assert_eq!(next.next_run.next_run_time, at("2026-03-02T11:00:42Z"));
}

fn cron_times() -> impl Strategy<Value = &'static str> {
    select(vec![
        "* * * * * *",
        "*/15 * * * *",
        "0 * * * *",
        "30 1 * * *",
        "0 9 * * 1-5",
        "*/7 8-18 * * *",
        "0 0 1 * *",
    ])
}

fn windows() -> impl Strategy<Value = Option<(&'static str, &'static str)>> {
    select(vec![
        None,
        Some(("08:00", "18:00")),
        Some(("22:00", "02:00")),
        Some(("01:00", "03:30")),
        Some(("09:00", "09:05")),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Every jittered run is after `now`, inside the window, and its cron time's run:
    /// the cron time plus the offset, or the window's last second when that would leave it.
    #[test]
    fn jittered_runs_stay_inside_the_window_and_follow_their_cron_time(
        cron in cron_times(),
        window in windows(),
        tz in select(vec!["UTC", "Europe/Berlin", "America/New_York", "Asia/Riyadh", "Australia/Lord_Howe"]),
        jitter in 1u32..=MAX_JITTER_SECONDS,
        id in any::<u128>(),
        now_seconds in 1_767_225_600i64..1_830_297_600i64,
    ) {
        let offset = jitter_offset(Uuid::from_u128(id), jitter);
        prop_assert!(offset >= TimeDelta::zero() && offset < TimeDelta::seconds(i64::from(jitter)));
        let Ok(plain) = Schedule::parse(cron, window.map(|w| w.0), window.map(|w| w.1), Some(tz)) else {
            return Ok(());
        };
        prop_assume!(!plain.is_degenerate());
        let jittered = plain.clone().with_offset(offset);
        let now = DateTime::from_timestamp(now_seconds, 0).expect("instant");
        let run = jittered.next_run(now, false).expect("a run").next_run_time;
        prop_assert!(run > now);
        prop_assert!(plain.in_window(run), "{run} is outside the window");
        // Its cron time: the last one at or before the run, no earlier than the offset.
        let earliest = run - offset - TimeDelta::seconds(1);
        let cron_time = plain.next_run(earliest, false).expect("a cron time").next_run_time;
        prop_assert!(cron_time <= run);
        let expected = match plain.deadline(cron_time) {
            Deadline::At(end) if cron_time + offset >= end => (end - TimeDelta::seconds(1)).max(cron_time),
            _ => cron_time + offset,
        };
        prop_assert_eq!(run, expected, "cron time {}", cron_time);
    }
}
