//! The schedule contract, rule by rule, with the rows from the original system's docs.

use chrono::{DateTime, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use res_shared::schedule::{
    Blocker, Deadline, OperationWindow, RuleState, RuleStatus, Schedule, ScheduleError, Zone,
    reschedule,
};

/// A wall-clock time in a zone, as the instant it first names.
fn at(tz: &str, wall: &str) -> DateTime<Utc> {
    let zone: Tz = tz.parse().expect("test zone");
    let naive = NaiveDateTime::parse_from_str(wall, "%Y-%m-%d %H:%M:%S")
        .or_else(|_| NaiveDateTime::parse_from_str(wall, "%Y-%m-%d %H:%M"))
        .expect("test wall-clock time");
    zone.from_local_datetime(&naive)
        .earliest()
        .expect("the test time exists")
        .with_timezone(&Utc)
}

fn riyadh(wall: &str) -> DateTime<Utc> {
    at("Asia/Riyadh", wall)
}

fn utc(text: &str) -> DateTime<Utc> {
    text.parse().expect("test instant")
}

fn schedule(cron: &str, window: Option<(&str, &str)>, tz: Option<&str>) -> Schedule {
    Schedule::parse(cron, window.map(|w| w.0), window.map(|w| w.1), tz).expect("valid schedule")
}

fn next(cron: &str, window: Option<(&str, &str)>, now: DateTime<Utc>) -> DateTime<Utc> {
    next_in(cron, window, None, now)
}

fn next_in(
    cron: &str,
    window: Option<(&str, &str)>,
    tz: Option<&str>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let answer = schedule(cron, window, tz)
        .next_run(now, false)
        .expect("a next run");
    assert!(!answer.degenerate, "{cron} {window:?} is not degenerate");
    answer.next_run_time
}

const DAY: Option<(&str, &str)> = Some(("08:00", "18:00"));
const NIGHT: Option<(&str, &str)> = Some(("22:00", "06:00"));

// The table from the original system's documentation (Asia/Riyadh).

#[test]
fn row_normal_half_hour_inside_the_window() {
    let now = riyadh("2026-03-02 14:00");
    assert_eq!(next("*/30 * * * *", DAY, now), riyadh("2026-03-02 14:30"));
}

#[test]
fn row_end_of_window_moves_to_next_morning() {
    let now = riyadh("2026-03-02 17:45");
    assert_eq!(next("*/30 * * * *", DAY, now), riyadh("2026-03-03 08:00"));
}

#[test]
fn row_overnight_window_runs_at_midnight() {
    let now = riyadh("2026-03-02 23:00");
    assert_eq!(next("0 * * * *", NIGHT, now), riyadh("2026-03-03 00:00"));
}

#[test]
fn row_outside_window_waits_for_the_morning() {
    let now = riyadh("2026-03-02 20:00");
    assert_eq!(next("*/15 * * * *", DAY, now), riyadh("2026-03-03 08:00"));
}

#[test]
fn row_daily_rule_runs_once_a_day_not_at_window_start() {
    let now = riyadh("2026-03-02 10:00");
    assert_eq!(next("0 9 * * *", DAY, now), riyadh("2026-03-03 09:00"));
}

#[test]
fn row_failed_run_retries_after_five_minutes() {
    let now = riyadh("2026-03-02 14:32");
    let answer = schedule("*/30 * * * *", DAY, None)
        .next_run(now, true)
        .expect("a next run");
    assert_eq!(answer.next_run_time, riyadh("2026-03-02 14:37"));
}

// Rule 2: exactly five minutes, to the second.

#[test]
fn failed_run_keeps_the_seconds() {
    let now = riyadh("2026-03-02 14:32:10");
    let answer = schedule("*/30 * * * *", DAY, None)
        .next_run(now, true)
        .expect("a next run");
    assert_eq!(answer.next_run_time, riyadh("2026-03-02 14:37:10"));
}

#[test]
fn failed_run_ignores_the_window() {
    let now = riyadh("2026-03-02 17:58");
    let answer = schedule("*/30 * * * *", DAY, None)
        .next_run(now, true)
        .expect("a next run");
    assert_eq!(answer.next_run_time, riyadh("2026-03-02 18:03"));
}

// Rule 3: strictly after now; window start inclusive, end exclusive.

#[test]
fn an_occurrence_at_now_is_not_the_next_one() {
    let now = riyadh("2026-03-02 14:30");
    assert_eq!(next("*/30 * * * *", DAY, now), riyadh("2026-03-02 15:00"));
    let just_before = riyadh("2026-03-02 14:29:59");
    assert_eq!(
        next("*/30 * * * *", DAY, just_before),
        riyadh("2026-03-02 14:30")
    );
}

#[test]
fn sub_second_now_still_moves_strictly_forward() {
    let now = riyadh("2026-03-02 14:30") + chrono::TimeDelta::milliseconds(250);
    assert_eq!(next("*/30 * * * *", DAY, now), riyadh("2026-03-02 15:00"));
}

#[test]
fn window_start_is_inclusive() {
    let now = riyadh("2026-03-02 07:00");
    assert_eq!(next("*/30 * * * *", DAY, now), riyadh("2026-03-02 08:00"));
}

#[test]
fn window_end_is_exclusive() {
    let now = riyadh("2026-03-02 17:30");
    assert_eq!(next("0 * * * *", DAY, now), riyadh("2026-03-03 08:00"));
}

#[test]
fn overnight_window_skips_the_day() {
    let now = riyadh("2026-03-02 05:45");
    assert_eq!(next("*/30 * * * *", NIGHT, now), riyadh("2026-03-02 22:00"));
    let late = riyadh("2026-03-02 22:10");
    assert_eq!(
        next("*/30 * * * *", NIGHT, late),
        riyadh("2026-03-02 22:30")
    );
}

#[test]
fn equal_bounds_or_no_window_mean_no_restriction() {
    let now = riyadh("2026-03-02 20:00");
    assert_eq!(next("0 21 * * *", None, now), riyadh("2026-03-02 21:00"));
    let open = Some(("08:00", "08:00"));
    assert_eq!(next("0 21 * * *", open, now), riyadh("2026-03-02 21:00"));
}

#[test]
fn windows_with_seconds() {
    let window = Some(("08:00:30", "08:01:30"));
    let now = riyadh("2026-03-02 07:00");
    assert_eq!(next("* * * * *", window, now), riyadh("2026-03-02 08:01"));
}

// Rule 1: cron syntax.

#[test]
fn weekdays_one_to_five_are_monday_to_friday() {
    // 2026-03-06 is a Friday.
    let now = riyadh("2026-03-06 10:00");
    assert_eq!(next("0 9 * * 1-5", DAY, now), riyadh("2026-03-09 09:00"));
    assert_eq!(
        next("0 9 * * MON-FRI", DAY, now),
        riyadh("2026-03-09 09:00")
    );
}

#[test]
fn zero_and_seven_are_sunday() {
    let now = riyadh("2026-03-02 10:00");
    assert_eq!(next("0 9 * * 0", DAY, now), riyadh("2026-03-08 09:00"));
    assert_eq!(next("0 9 * * 7", DAY, now), riyadh("2026-03-08 09:00"));
    assert_eq!(next("0 9 * * SUN", DAY, now), riyadh("2026-03-08 09:00"));
}

#[test]
fn day_of_month_and_weekday_are_ored_when_both_restricted() {
    // The 15th or any Friday: Friday 2026-03-06 comes first.
    let now = riyadh("2026-03-02 10:00");
    assert_eq!(next("0 9 15 * FRI", DAY, now), riyadh("2026-03-06 09:00"));
    // Only day-of-month restricted: the 15th.
    assert_eq!(next("0 9 15 * *", DAY, now), riyadh("2026-03-15 09:00"));
}

#[test]
fn month_names_lists_ranges_and_steps() {
    let now = riyadh("2026-03-02 10:00");
    assert_eq!(
        next("0 9 1 JUN,SEP *", DAY, now),
        riyadh("2026-06-01 09:00")
    );
    assert_eq!(
        next("10-40/15 9 * * *", DAY, now),
        riyadh("2026-03-03 09:10")
    );
}

#[test]
fn six_fields_have_leading_seconds() {
    let now = riyadh("2026-03-02 14:00");
    assert_eq!(
        next("*/20 * * * * *", DAY, now),
        riyadh("2026-03-02 14:00:20")
    );
    assert_eq!(
        next("30 15 14 * * *", DAY, now),
        riyadh("2026-03-02 14:15:30")
    );
}

#[test]
fn macros() {
    let now = riyadh("2026-03-02 14:10");
    assert_eq!(next("@hourly", None, now), riyadh("2026-03-02 15:00"));
    assert_eq!(next("@daily", None, now), riyadh("2026-03-03 00:00"));
    assert_eq!(next("@weekly", None, now), riyadh("2026-03-08 00:00"));
    assert_eq!(next("@monthly", None, now), riyadh("2026-04-01 00:00"));
    assert_eq!(next("@yearly", None, now), riyadh("2027-01-01 00:00"));
}

#[test]
fn leap_day_rules_wait_for_leap_years() {
    let now = riyadh("2026-03-02 10:00");
    assert_eq!(next("0 9 29 2 *", DAY, now), riyadh("2028-02-29 09:00"));
}

// Rule 4: degenerate rules.

#[test]
fn a_cron_that_never_fires_inside_the_window_is_degenerate() {
    let rule = schedule("0 7 * * *", DAY, None);
    assert!(rule.is_degenerate());
    let answer = rule
        .next_run(riyadh("2026-03-02 10:00"), false)
        .expect("a next run");
    assert!(answer.degenerate);
    assert_eq!(answer.next_run_time, riyadh("2026-03-03 08:00"));
    let early = rule
        .next_run(riyadh("2026-03-02 06:00"), false)
        .expect("a next run");
    assert_eq!(early.next_run_time, riyadh("2026-03-02 08:00"));
}

#[test]
fn the_window_end_itself_is_degenerate() {
    let rule = schedule("0 18 * * *", DAY, None);
    assert!(rule.is_degenerate());
}

#[test]
fn an_impossible_date_with_a_window_is_degenerate() {
    let rule = schedule("0 0 30 2 *", DAY, None);
    let answer = rule
        .next_run(riyadh("2026-03-02 08:00"), false)
        .expect("a next run");
    assert!(answer.degenerate);
    assert_eq!(answer.next_run_time, riyadh("2026-03-03 08:00"));
}

#[test]
fn overnight_degenerate_rule_opens_tonight() {
    let rule = schedule("0 12 * * *", NIGHT, None);
    let answer = rule
        .next_run(riyadh("2026-03-02 23:00"), false)
        .expect("a next run");
    assert!(answer.degenerate);
    assert_eq!(answer.next_run_time, riyadh("2026-03-03 22:00"));
}

#[test]
fn an_impossible_date_without_a_window_is_an_error() {
    let error = Schedule::parse("0 0 30 2 *", None, None, None).expect_err("never matches");
    assert!(matches!(error, ScheduleError::NeverMatches { .. }));
    assert!(
        error
            .to_string()
            .starts_with("cron '0 0 30 2 *' never matches")
    );
}

#[test]
fn failed_runs_still_report_a_degenerate_rule() {
    let answer = schedule("0 7 * * *", DAY, None)
        .next_run(riyadh("2026-03-02 10:00"), true)
        .expect("a next run");
    assert!(answer.degenerate);
    assert_eq!(answer.next_run_time, riyadh("2026-03-02 10:05"));
}

// Rule 5: the runner's fallback path.

#[test]
fn fallback_without_a_cron_waits_thirty_minutes() {
    let now = utc("2026-03-02T11:00:00Z");
    let answer = reschedule(None, None, None, TimeDelta::zero(), now, false);
    assert_eq!(answer.next_run.next_run_time, utc("2026-03-02T11:30:00Z"));
    assert_eq!(
        answer.problem.as_deref(),
        Some("the rule has no cron expression")
    );
}

#[test]
fn fallback_with_an_invalid_cron_waits_thirty_minutes_and_says_why() {
    let now = utc("2026-03-02T11:00:00Z");
    let answer = reschedule(
        Some("*/0 * * * *"),
        None,
        None,
        TimeDelta::zero(),
        now,
        false,
    );
    assert_eq!(answer.next_run.next_run_time, utc("2026-03-02T11:30:00Z"));
    assert_eq!(
        answer.problem.as_deref(),
        Some("invalid cron '*/0 * * * *': minute step must be >= 1")
    );
    let bad_zone = reschedule(
        Some("0 * * * *"),
        None,
        Some("Mars/Base"),
        TimeDelta::zero(),
        now,
        false,
    );
    assert_eq!(bad_zone.next_run.next_run_time, utc("2026-03-02T11:30:00Z"));
}

#[test]
fn fallback_after_a_failure_still_retries_in_five_minutes() {
    let now = utc("2026-03-02T11:00:00Z");
    let broken = reschedule(Some("nonsense"), None, None, TimeDelta::zero(), now, true);
    assert_eq!(broken.next_run.next_run_time, utc("2026-03-02T11:05:00Z"));
    let valid = reschedule(
        Some("*/30 * * * *"),
        None,
        None,
        TimeDelta::zero(),
        now,
        true,
    );
    assert_eq!(valid.next_run.next_run_time, utc("2026-03-02T11:05:00Z"));
    assert_eq!(valid.problem, None);
}

#[test]
fn fallback_with_a_valid_schedule_equals_the_schedule() {
    let window = OperationWindow::parse(Some("08:00"), Some("18:00")).expect("valid window");
    for now in [
        "2026-03-02T11:00:00Z",
        "2026-03-02T14:50:00Z",
        "2026-03-02T20:00:00Z",
    ] {
        let now = utc(now);
        let local = reschedule(
            Some("*/30 * * * *"),
            window,
            None,
            TimeDelta::zero(),
            now,
            false,
        );
        let cloud = schedule("*/30 * * * *", DAY, None)
            .next_run(now, false)
            .expect("a next run");
        assert_eq!(local.next_run, cloud);
        assert_eq!(local.problem, None);
    }
}

// Rule 6: deadlines.

#[test]
fn deadline_is_the_end_of_the_window_that_day() {
    let rule = schedule("*/30 * * * *", DAY, None);
    assert_eq!(
        rule.deadline(riyadh("2026-03-02 10:00")),
        Deadline::At(riyadh("2026-03-02 18:00"))
    );
}

#[test]
fn overnight_deadline_is_the_next_morning_after_the_evening_start() {
    let rule = schedule("0 * * * *", NIGHT, None);
    assert_eq!(
        rule.deadline(riyadh("2026-03-02 23:00")),
        Deadline::At(riyadh("2026-03-03 06:00"))
    );
    assert_eq!(
        rule.deadline(riyadh("2026-03-03 01:00")),
        Deadline::At(riyadh("2026-03-03 06:00"))
    );
}

#[test]
fn no_window_means_no_deadline() {
    let rule = schedule("0 * * * *", None, None);
    assert_eq!(
        rule.deadline(riyadh("2026-03-02 23:00")),
        Deadline::Unbounded
    );
}

#[test]
fn a_start_outside_the_window_reports_the_next_opening() {
    let rule = schedule("0 * * * *", DAY, None);
    assert_eq!(
        rule.deadline(riyadh("2026-03-02 19:00")),
        Deadline::OutsideWindow {
            next_start: riyadh("2026-03-03 08:00")
        }
    );
}

// Rule 7: DST, in zones that have it.

const BERLIN: Option<&str> = Some("Europe/Berlin");

#[test]
fn fixed_time_in_a_spring_gap_runs_right_after_it() {
    // Berlin skips 02:00-03:00 on 2026-03-29.
    let now = at("Europe/Berlin", "2026-03-29 00:00");
    let next = next_in("30 2 * * *", None, BERLIN, now);
    assert_eq!(next, utc("2026-03-29T01:00:00Z"));
    assert_eq!(next, at("Europe/Berlin", "2026-03-29 03:00"));
}

#[test]
fn interval_crons_skip_the_spring_gap() {
    let now = at("Europe/Berlin", "2026-03-29 01:45");
    assert_eq!(
        next_in("*/30 * * * *", None, BERLIN, now),
        at("Europe/Berlin", "2026-03-29 03:00")
    );
    let two_values = next_in("0,30 2 * * *", None, BERLIN, now);
    assert_eq!(two_values, at("Europe/Berlin", "2026-03-30 02:00"));
}

#[test]
fn fixed_time_runs_once_in_a_fall_back_overlap() {
    // Berlin repeats 02:00-03:00 on 2026-10-25 (first pass CEST, second CET).
    let first_pass = utc("2026-10-25T00:30:00Z");
    let now = at("Europe/Berlin", "2026-10-25 00:00");
    assert_eq!(next_in("30 2 * * *", None, BERLIN, now), first_pass);
    let after_first = utc("2026-10-25T00:31:00Z");
    assert_eq!(
        next_in("30 2 * * *", None, BERLIN, after_first),
        at("Europe/Berlin", "2026-10-26 02:30")
    );
}

#[test]
fn interval_crons_run_in_both_passes_of_an_overlap() {
    let now = utc("2026-10-25T00:45:00Z"); // 02:45 CEST, first pass
    let second_pass_start = utc("2026-10-25T01:00:00Z"); // 02:00 CET
    assert_eq!(
        next_in("*/30 * * * *", None, BERLIN, now),
        second_pass_start
    );
    let in_second_pass = utc("2026-10-25T01:10:00Z"); // 02:10 CET
    assert_eq!(
        next_in("*/30 * * * *", None, BERLIN, in_second_pass),
        utc("2026-10-25T01:30:00Z")
    );
}

#[test]
fn a_window_start_in_the_gap_moves_to_the_end_of_the_gap() {
    let window = Some(("02:30", "04:00"));
    let now = at("Europe/Berlin", "2026-03-29 01:00");
    assert_eq!(
        next_in("*/30 * * * *", window, BERLIN, now),
        at("Europe/Berlin", "2026-03-29 03:00")
    );
}

#[test]
fn an_ambiguous_window_boundary_takes_the_first_instant() {
    let window = Some(("02:30", "04:00"));
    let now = utc("2026-10-25T00:10:00Z"); // 02:10 CEST
    assert_eq!(
        next_in("*/30 * * * *", window, BERLIN, now),
        utc("2026-10-25T00:30:00Z")
    );
    // Ending at the ambiguous 02:30 closes the window at its first pass.
    let closing = Some(("01:00", "02:30"));
    let late = utc("2026-10-25T00:20:00Z"); // 02:20 CEST
    assert_eq!(
        next_in("*/15 * * * *", closing, BERLIN, late),
        at("Europe/Berlin", "2026-10-26 01:00")
    );
}

#[test]
fn overnight_deadline_across_a_fall_back_is_real_elapsed_time() {
    // New York falls back at 02:00 EDT on 2026-11-01.
    let rule = schedule("0 * * * *", NIGHT, Some("America/New_York"));
    assert_eq!(
        rule.deadline(at("America/New_York", "2026-10-31 23:00")),
        Deadline::At(utc("2026-11-01T11:00:00Z"))
    );
}

// Rule 8: readiness.

fn ready_state() -> RuleState {
    RuleState {
        is_active: true,
        is_archived: false,
        is_force_stopped: false,
        is_paused: false,
        run_requested: false,
        is_currently_running: false,
        branch_is_active: true,
        rule_status: RuleStatus::Active,
        next_run_time: Some(riyadh("2026-03-02 14:00")),
        paused_until: None,
        window: OperationWindow::parse(Some("08:00"), Some("18:00"))
            .expect("valid window")
            .map(Into::into),
        zone: Zone::DEFAULT,
    }
}

#[test]
fn a_due_rule_inside_its_window_is_ready() {
    let state = ready_state();
    let now = riyadh("2026-03-02 14:00");
    assert!(state.is_ready(now));
    assert!(state.blockers(now).is_empty());
    let never_scheduled = RuleState {
        next_run_time: None,
        ..ready_state()
    };
    assert!(never_scheduled.is_ready(now));
}

#[test]
fn every_blocker_is_reported() {
    let state = RuleState {
        is_active: false,
        is_archived: true,
        is_force_stopped: true,
        is_paused: false,
        run_requested: false,
        is_currently_running: true,
        branch_is_active: false,
        rule_status: RuleStatus::Draft,
        next_run_time: Some(riyadh("2026-03-02 21:00")),
        ..ready_state()
    };
    let now = riyadh("2026-03-02 20:00");
    assert!(!state.is_ready(now));
    assert_eq!(
        state.blockers(now),
        vec![
            Blocker::Inactive,
            Blocker::Archived,
            Blocker::ForceStopped,
            Blocker::AlreadyRunning,
            Blocker::BranchInactive,
            Blocker::RuleNotActive {
                status: RuleStatus::Draft
            },
            Blocker::NotDue {
                next_run_time: riyadh("2026-03-02 21:00")
            },
            Blocker::OutsideWindow {
                next_start: Some(riyadh("2026-03-03 08:00"))
            },
        ]
    );
}

#[test]
fn each_flag_alone_blocks() {
    let now = riyadh("2026-03-02 14:00");
    let variants = [
        RuleState {
            is_active: false,
            ..ready_state()
        },
        RuleState {
            is_archived: true,
            ..ready_state()
        },
        RuleState {
            is_force_stopped: true,
            is_paused: false,
            run_requested: false,
            ..ready_state()
        },
        RuleState {
            is_currently_running: true,
            ..ready_state()
        },
        RuleState {
            branch_is_active: false,
            ..ready_state()
        },
        RuleState {
            rule_status: RuleStatus::Inactive,
            ..ready_state()
        },
        RuleState {
            next_run_time: Some(riyadh("2026-03-02 14:00:01")),
            ..ready_state()
        },
    ];
    for state in variants {
        assert!(!state.is_ready(now), "{state:?}");
        assert_eq!(state.blockers(now).len(), 1, "{state:?}");
    }
    let outside = riyadh("2026-03-02 18:00");
    assert!(!ready_state().is_ready(outside));
}

#[test]
fn a_paused_execution_decides_when_the_rule_is_due() {
    let now = riyadh("2026-03-02 14:00");
    let waiting = RuleState {
        paused_until: Some(riyadh("2026-03-02 14:10")),
        ..ready_state()
    };
    assert_eq!(
        waiting.blockers(now),
        vec![Blocker::Paused {
            resume_at: riyadh("2026-03-02 14:10")
        }]
    );
    // Once the pause is over the rule is due, even if next_run_time lies ahead.
    let resumable = RuleState {
        paused_until: Some(riyadh("2026-03-02 13:50")),
        next_run_time: Some(riyadh("2026-03-02 16:00")),
        ..ready_state()
    };
    assert!(resumable.is_ready(now));
}

#[test]
fn run_now_is_due_at_once_and_outside_its_window_but_not_past_other_blockers() {
    let night = riyadh("2026-03-02 23:00");
    let requested = RuleState {
        run_requested: true,
        next_run_time: Some(riyadh("2026-03-03 09:00")),
        ..ready_state()
    };
    assert!(requested.is_ready(night), "{:?}", requested.blockers(night));
    assert!(requested.blockers(night).is_empty());
    let paused = RuleState {
        is_paused: true,
        ..requested.clone()
    };
    assert_eq!(paused.blockers(night), vec![Blocker::PausedByOperator]);
    assert!(!paused.is_ready(night));
    let running = RuleState {
        is_currently_running: true,
        ..requested
    };
    assert_eq!(running.blockers(night), vec![Blocker::AlreadyRunning]);
    let operator_paused = RuleState {
        is_paused: true,
        ..ready_state()
    };
    assert!(!operator_paused.is_ready(riyadh("2026-03-02 14:00")));
}

#[test]
fn due_exactly_now_is_ready() {
    let state = ready_state();
    assert!(state.is_ready(riyadh("2026-03-02 14:00")));
    assert!(!state.is_ready(riyadh("2026-03-02 13:59:59")));
}

// Errors name the field.

#[test]
fn errors_name_what_was_wrong() {
    let error = |cron: &str, from: Option<&str>, to: Option<&str>, tz: Option<&str>| {
        Schedule::parse(cron, from, to, tz)
            .expect_err("invalid input")
            .to_string()
    };
    assert_eq!(
        error("*/0 * * * *", None, None, None),
        "invalid cron '*/0 * * * *': minute step must be >= 1"
    );
    assert_eq!(
        error("0 * * * *", Some("25:00"), Some("18:00"), None),
        "invalid from '25:00': hour must be 00-23 (24:00 is allowed as the end of the day)"
    );
    assert_eq!(
        error("0 * * * *", Some("08:00"), Some("8pm"), None),
        "invalid to '8pm': expected HH:MM or HH:MM:SS"
    );
    assert_eq!(
        error("0 * * * *", None, None, Some("Asia/Riyad")),
        "unknown time zone 'Asia/Riyad' (expected an IANA name such as Asia/Riyadh)"
    );
}

// Interval schedules (`@every`): a grid from each window opening, or from local midnight.

#[test]
fn interval_row_runs_on_the_grid_from_the_window_opening() {
    // 08:00, 09:30, 11:00, 12:30, 14:00, 15:30, 17:00.
    let now = riyadh("2026-03-02 14:00");
    assert_eq!(next("@every 90m", DAY, now), riyadh("2026-03-02 15:30"));
    let now = riyadh("2026-03-02 07:10");
    assert_eq!(next("@every 90m", DAY, now), riyadh("2026-03-02 08:00"));
    let now = riyadh("2026-03-02 08:00");
    assert_eq!(next("@every 90m", DAY, now), riyadh("2026-03-02 09:30"));
}

#[test]
fn interval_row_end_of_window_moves_to_the_next_opening() {
    // 17:00 + 90 min would be 18:30, past the window's end: the next run is tomorrow's
    // opening, not a shortened step.
    let now = riyadh("2026-03-02 17:00");
    assert_eq!(next("@every 90m", DAY, now), riyadh("2026-03-03 08:00"));
    // A grid time exactly at the end is outside it (the end is exclusive).
    let now = riyadh("2026-03-02 16:00");
    assert_eq!(next("@every 2h", DAY, now), riyadh("2026-03-03 08:00"));
}

#[test]
fn interval_row_overnight_window_keeps_its_grid_past_midnight() {
    // 22:00, 23:30, 01:00, 02:30, 04:00, 05:30.
    let now = riyadh("2026-03-02 23:45");
    assert_eq!(next("@every 90m", NIGHT, now), riyadh("2026-03-03 01:00"));
    let now = riyadh("2026-03-03 05:30");
    assert_eq!(next("@every 90m", NIGHT, now), riyadh("2026-03-03 22:00"));
}

#[test]
fn interval_row_without_a_window_starts_each_day_at_midnight() {
    // 00:00, 07:00, 14:00, 21:00, then 00:00 again: three hours after 21:00, not seven.
    let now = riyadh("2026-03-02 21:00");
    assert_eq!(next("@every 7h", None, now), riyadh("2026-03-03 00:00"));
    let now = riyadh("2026-03-02 13:59:59");
    assert_eq!(next("@every 7h", None, now), riyadh("2026-03-02 14:00"));
}

#[test]
fn interval_row_longer_than_the_window_runs_once_at_each_opening() {
    let now = riyadh("2026-03-02 08:00");
    assert_eq!(
        next("@every 12h", Some(("08:00", "10:00")), now),
        riyadh("2026-03-03 08:00")
    );
}

#[test]
fn interval_row_days_limit_the_openings() {
    // 2026-03-06 is a Friday: the next weekday opening is Monday's.
    let now = riyadh("2026-03-06 07:00");
    assert_eq!(
        next("@every 90m on mon-thu", DAY, now),
        riyadh("2026-03-09 08:00")
    );
    // An overnight occurrence belongs to the day it opens: Thursday's runs on past midnight.
    let now = riyadh("2026-03-06 00:10");
    assert_eq!(
        next("@every 90m on thu", NIGHT, now),
        riyadh("2026-03-06 01:00")
    );
}

#[test]
fn interval_row_dst_day_counts_elapsed_time_from_the_opening() {
    // Berlin skips 02:00-03:00 on 2026-03-29. From midnight every 90 minutes of elapsed
    // time: 00:00, 01:30, then 04:00 CEST (three real hours after midnight = 90 + 90 min).
    let now = at("Europe/Berlin", "2026-03-29 01:30");
    assert_eq!(
        next_in("@every 90m", None, BERLIN, now),
        at("Europe/Berlin", "2026-03-29 04:00")
    );
    // A window opening inside the gap opens at the gap's end, and the grid starts there.
    let now = at("Europe/Berlin", "2026-03-29 01:00");
    assert_eq!(
        next_in("@every 1h", Some(("02:30", "06:00")), BERLIN, now),
        at("Europe/Berlin", "2026-03-29 03:00")
    );
    // On 2026-10-25 02:00-03:00 happens twice; an hourly grid from midnight runs in both
    // passes because each is a new hour of elapsed time.
    let first_two = at("Europe/Berlin", "2026-10-25 02:00");
    let second_two = first_two + TimeDelta::hours(1);
    assert_eq!(next_in("@every 1h", None, BERLIN, first_two), second_two);
}

#[test]
fn interval_errors_name_what_is_wrong() {
    for (text, reason) in [
        (
            "@every 0m",
            "'0m' is zero; the interval must be at least 1s",
        ),
        ("@every 90x", "unknown unit 'x'"),
        ("@every 25h", "longer than a day"),
        ("@every 90m on someday", "'someday' is not a weekday name"),
    ] {
        let error = Schedule::parse(text, None, None, None).expect_err("invalid interval");
        assert!(
            matches!(error, ScheduleError::Interval { .. }),
            "{text}: {error:?}"
        );
        assert!(error.to_string().contains(reason), "{text}: {error}");
    }
}

#[test]
fn an_unusable_interval_reschedules_like_an_unusable_cron() {
    let now = riyadh("2026-03-02 14:00");
    let answer = reschedule(Some("@every 0m"), None, None, TimeDelta::zero(), now, false);
    assert_eq!(answer.next_run.next_run_time, now + TimeDelta::minutes(30));
    assert!(
        answer
            .problem
            .is_some_and(|p| p.starts_with("invalid interval '@every 0m'"))
    );
    let answer = reschedule(
        Some("@every 90m"),
        None,
        None,
        TimeDelta::zero(),
        now,
        false,
    );
    assert_eq!(answer.next_run.next_run_time, riyadh("2026-03-02 15:00"));
    assert_eq!(answer.problem, None);
}

// The cron dialects people bring (croner's meaning), Asia/Riyadh.

#[test]
fn dialect_rows_last_days_and_nearest_weekdays() {
    // May 2026: the 31st is a Sunday, the 29th a Friday; the 15th a Friday.
    let now = riyadh("2026-05-20 10:00");
    assert_eq!(next("0 9 L * *", None, now), riyadh("2026-05-31 09:00"));
    assert_eq!(next("0 9 LW * *", None, now), riyadh("2026-05-29 09:00"));
    // August 2026: the 15th is a Saturday, so 15W is Friday the 14th; the 1st is a
    // Saturday too, and 1W moves forward to Monday the 3rd (it never leaves the month).
    let now = riyadh("2026-07-31 10:00");
    assert_eq!(next("0 9 15W * *", None, now), riyadh("2026-08-14 09:00"));
    assert_eq!(next("0 9 1W * *", None, now), riyadh("2026-08-03 09:00"));
    // L in February is the 28th, or the 29th in a leap year.
    let now = riyadh("2027-02-01 00:00");
    assert_eq!(next("0 0 L 2 *", None, now), riyadh("2027-02-28 00:00"));
    let now = riyadh("2028-02-01 00:00");
    assert_eq!(next("0 0 L 2 *", None, now), riyadh("2028-02-29 00:00"));
}

#[test]
fn dialect_rows_nth_and_last_weekdays() {
    // May 2026 starts on a Friday: the first Monday is the 4th, the last Friday the 29th.
    let now = riyadh("2026-05-01 00:00");
    assert_eq!(next("0 9 * * MON#1", None, now), riyadh("2026-05-04 09:00"));
    assert_eq!(next("0 9 * * 5L", None, now), riyadh("2026-05-29 09:00"));
    assert_eq!(next("0 9 * * FRIL", None, now), riyadh("2026-05-29 09:00"));
    // A fifth Friday exists in May 2026 (29th) but not in June: the next is in July (31st).
    let now = riyadh("2026-05-30 00:00");
    assert_eq!(next("0 9 * * 5#5", None, now), riyadh("2026-07-31 09:00"));
    // Both day fields restricted: either one (crontab's OR), as croner reads it.
    let now = riyadh("2026-05-01 00:00");
    assert_eq!(
        next("0 9 20 * MON#1", None, now),
        riyadh("2026-05-04 09:00")
    );
}

#[test]
fn dialect_rows_any_and_start_with_step() {
    let now = riyadh("2026-03-02 14:07");
    assert_eq!(next("0/15 * ? * *", None, now), riyadh("2026-03-02 14:15"));
    assert_eq!(next("5/15 * * * ?", None, now), riyadh("2026-03-02 14:20"));
    assert_eq!(next("0 0 8/6 ? * *", None, now), riyadh("2026-03-02 20:00"));
}

#[test]
fn dialect_degenerate_dates_are_found_when_the_schedule_is_built() {
    for cron in ["0 0 30W 2 *", "0 0 31W 4,6,9,11 *"] {
        let error = Schedule::parse(cron, None, None, None).expect_err("never matches");
        assert!(
            matches!(error, ScheduleError::NeverMatches { .. }),
            "{cron}: {error}"
        );
        let answer = schedule(cron, DAY, None)
            .next_run(riyadh("2026-03-02 14:00"), false)
            .expect("the window's next opening");
        assert!(answer.degenerate, "{cron}");
    }
    // A fifth Monday of February comes only every 28 years, and is still found.
    let next = next("0 0 * 2 MON#5", None, riyadh("2026-03-01 00:00"));
    assert_eq!(next, riyadh("2044-02-29 00:00"));
}

#[test]
fn dialect_rows_a_year_field() {
    let now = riyadh("2026-03-02 14:00");
    assert_eq!(
        next("0 0 12 1 1 ? 2030", None, now),
        riyadh("2030-01-01 12:00")
    );
    // Its last year has passed: no run without a window, degenerate with one.
    let after = riyadh("2030-01-01 12:00");
    let error = schedule("0 0 12 1 1 ? 2030", None, None)
        .next_run(after, false)
        .expect_err("no run left");
    assert!(matches!(error, ScheduleError::OutOfRange { .. }), "{error}");
    let answer = schedule("0 0 12 1 1 ? 2030", DAY, None)
        .next_run(after, false)
        .expect("the window's next opening");
    assert!(answer.degenerate);
    assert_eq!(answer.next_run_time, riyadh("2030-01-02 08:00"));
}
