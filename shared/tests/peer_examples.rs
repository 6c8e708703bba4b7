//! The examples of other cron libraries' own test suites, through RES's schedule rules
//! (the code `res-runner next-run` answers with). Where a library's policy differs from
//! RES's, the example is left out with the reason; where only the field layout differs
//! (robfig/cron v1 reads five fields as seconds to month), it is written in RES's layout
//! with the same meaning.

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use res_shared::schedule::{Schedule, ScheduleError};

fn at(tz: Tz, y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    tz.with_ymd_and_hms(y, mo, d, h, mi, s)
        .earliest()
        .expect("the example's time exists")
        .with_timezone(&Utc)
}

fn next(cron: &str, tz: Tz, after: DateTime<Utc>) -> DateTime<Utc> {
    Schedule::parse(cron, None, None, Some(tz.name()))
        .unwrap_or_else(|e| panic!("{cron}: {e}"))
        .next_run(after, false)
        .unwrap_or_else(|e| panic!("{cron}: {e}"))
        .next_run_time
}

const UTC: Tz = Tz::UTC;

/// robfig/cron v1 `spec_test.go`, `TestNext` (times in UTC).
#[test]
fn robfig_next() {
    let jul9 = |h, mi, s| at(UTC, 2012, 7, 9, h, mi, s);
    let cases = [
        (jul9(14, 45, 0), "0 0/15 * * * *", jul9(15, 0, 0)),
        (jul9(14, 59, 0), "0 0/15 * * * *", jul9(15, 0, 0)),
        (jul9(14, 59, 59), "0 0/15 * * * *", jul9(15, 0, 0)),
        (jul9(15, 45, 0), "0 20-35/15 * * * *", jul9(16, 20, 0)),
        (
            jul9(23, 46, 0),
            "0 */15 * * * *",
            at(UTC, 2012, 7, 10, 0, 0, 0),
        ),
        (
            jul9(23, 45, 0),
            "0 20-35/15 * * * *",
            at(UTC, 2012, 7, 10, 0, 20, 0),
        ),
        (
            jul9(23, 35, 51),
            "15/35 20-35/15 * * * *",
            at(UTC, 2012, 7, 10, 0, 20, 15),
        ),
        (
            jul9(23, 35, 51),
            "15/35 20-35/15 1/2 * * *",
            at(UTC, 2012, 7, 10, 1, 20, 15),
        ),
        (
            jul9(23, 35, 51),
            "15/35 20-35/15 10-12 * * *",
            at(UTC, 2012, 7, 10, 10, 20, 15),
        ),
        (
            jul9(23, 35, 51),
            "15/35 20-35/15 1/2 */2 * *",
            at(UTC, 2012, 7, 11, 1, 20, 15),
        ),
        (
            jul9(23, 35, 51),
            "15/35 20-35/15 * 9-20 * *",
            at(UTC, 2012, 7, 10, 0, 20, 15),
        ),
        (
            jul9(23, 35, 51),
            "15/35 20-35/15 * 9-20 Jul *",
            at(UTC, 2012, 7, 10, 0, 20, 15),
        ),
        (
            jul9(23, 35, 0),
            "0 0 0 9 Apr-Oct ?",
            at(UTC, 2012, 8, 9, 0, 0, 0),
        ),
        (
            jul9(23, 35, 0),
            "0 0 0 * Feb Mon",
            at(UTC, 2013, 2, 4, 0, 0, 0),
        ),
        (
            jul9(23, 35, 0),
            "0 0 0 * Feb Mon/2",
            at(UTC, 2013, 2, 1, 0, 0, 0),
        ),
        (
            at(UTC, 2012, 12, 31, 23, 59, 45),
            "0 * * * * *",
            at(UTC, 2013, 1, 1, 0, 0, 0),
        ),
        (
            jul9(23, 35, 0),
            "0 0 0 29 Feb ?",
            at(UTC, 2016, 2, 29, 0, 0, 0),
        ),
    ];
    for (after, cron, expected) in cases {
        assert_eq!(next(cron, UTC, after), expected, "{cron} after {after}");
    }
    // EDT -> EST: 02:30 happens once on 4 November 2012 (after the repeated hour).
    let ny = Tz::America__New_York;
    let after = Utc
        .with_ymd_and_hms(2012, 11, 4, 4, 0, 0)
        .single()
        .expect("instant");
    let expected = Utc
        .with_ymd_and_hms(2012, 11, 4, 7, 30, 0)
        .single()
        .expect("instant");
    assert_eq!(next("0 30 2 04 Nov ?", ny, after), expected);
    // Unsatisfiable: robfig answers the zero time, RES refuses the rule when it is built.
    for cron in ["0 0 0 30 Feb ?", "0 0 0 31 Apr ?"] {
        let error = Schedule::parse(cron, None, None, Some("UTC")).expect_err("never matches");
        assert!(
            matches!(error, ScheduleError::NeverMatches { .. }),
            "{cron}"
        );
    }
    // Left out, different policies:
    // - "0 0 0 */5 Apr,Aug,Oct Mon" and "0 0 0 */5 Oct Mon": robfig counts a day field
    //   starting with '*' (*/5) as unrestricted and ANDs; RES, like croner, ORs every
    //   field that is not exactly '*' (Aug 1 2012 is day 1 of */5).
    // - "0 30 2 11 Mar ?" (a time in the spring-forward gap): robfig skips the day, RES
    //   runs at the gap's end (OCPS, croner); "0 30 1 04 Nov ?" from 01:45 EDT: robfig
    //   runs in the second pass of the repeated hour, RES runs a fixed time once, in the
    //   first pass.
}

/// robfig/cron v1 `spec_test.go`, `TestActivation`: whether a time is an occurrence,
/// asked as "is the next run after one second before it this time?".
#[test]
fn robfig_activation() {
    let cases = [
        (at(UTC, 2012, 7, 9, 15, 0, 0), "0 0/15 * * * *", true),
        (at(UTC, 2012, 7, 9, 15, 45, 0), "0 0/15 * * * *", true),
        (at(UTC, 2012, 7, 9, 15, 40, 0), "0 0/15 * * * *", false),
        (at(UTC, 2012, 7, 9, 15, 5, 0), "0 5/15 * * * *", true),
        (at(UTC, 2012, 7, 9, 15, 20, 0), "0 5/15 * * * *", true),
        (at(UTC, 2012, 7, 9, 15, 50, 0), "0 5/15 * * * *", true),
        (at(UTC, 2012, 7, 15, 15, 0, 0), "0 0/15 * * Jul *", true),
        (at(UTC, 2012, 7, 15, 15, 0, 0), "0 0/15 * * Jun *", false),
        (at(UTC, 2012, 7, 15, 8, 30, 0), "0 30 08 ? Jul Sun", true),
        (at(UTC, 2012, 7, 15, 8, 30, 0), "0 30 08 15 Jul ?", true),
        (at(UTC, 2012, 7, 16, 8, 30, 0), "0 30 08 ? Jul Sun", false),
        (at(UTC, 2012, 7, 16, 8, 30, 0), "0 30 08 15 Jul ?", false),
        (at(UTC, 2012, 7, 9, 15, 0, 0), "@hourly", true),
        (at(UTC, 2012, 7, 9, 15, 4, 0), "@hourly", false),
        (at(UTC, 2012, 7, 9, 15, 0, 0), "@daily", false),
        (at(UTC, 2012, 7, 9, 0, 0, 0), "@daily", true),
        (at(UTC, 2012, 7, 9, 0, 0, 0), "@weekly", false),
        (at(UTC, 2012, 7, 8, 0, 0, 0), "@weekly", true),
        (at(UTC, 2012, 7, 8, 1, 0, 0), "@weekly", false),
        (at(UTC, 2012, 7, 8, 0, 0, 0), "@monthly", false),
        (at(UTC, 2012, 7, 1, 0, 0, 0), "@monthly", true),
        (at(UTC, 2012, 7, 15, 0, 0, 0), "0 * * 1,15 * Sun", true),
        (at(UTC, 2012, 6, 15, 0, 0, 0), "0 * * 1,15 * Sun", true),
        (at(UTC, 2012, 8, 1, 0, 0, 0), "0 * * 1,15 * Sun", true),
        (at(UTC, 2012, 7, 15, 0, 0, 0), "0 * * * * Mon", false),
        (at(UTC, 2012, 7, 9, 0, 0, 0), "0 * * 1,15 * *", false),
        (at(UTC, 2012, 7, 15, 0, 0, 0), "0 * * 1,15 * *", true),
        (at(UTC, 2012, 7, 15, 0, 0, 0), "0 * * */2 * Sun", true),
    ];
    for (time, cron, expected) in cases {
        let fires = next(cron, UTC, time - chrono::TimeDelta::seconds(1)) == time;
        assert_eq!(fires, expected, "{cron} at {time}");
    }
    // Left out: "0 * * */10 * Sun" on Sunday 15 July (robfig ANDs a '*/10' day field).
}

/// croner's own tests of its day extensions.
#[test]
fn croner_day_extensions() {
    let tz = Tz::Europe__Berlin;
    assert_eq!(
        next("0 9 L 2 *", tz, at(tz, 2023, 2, 1, 0, 0, 0)),
        at(tz, 2023, 2, 28, 9, 0, 0)
    );
    assert_eq!(
        next("0 9 L 2 *", tz, at(tz, 2024, 2, 1, 0, 0, 0)),
        at(tz, 2024, 2, 29, 9, 0, 0)
    );
    for cron in ["0 0 * * FRI#L", "0 0 * * FRIl", "0 0 * * 5L"] {
        assert_eq!(
            next(cron, tz, at(tz, 2023, 12, 28, 0, 0, 0)),
            at(tz, 2023, 12, 29, 0, 0, 0),
            "{cron}"
        );
    }
    assert_eq!(
        sequence("0 0 0 * * 7L", tz, at(tz, 2024, 10, 1, 0, 0, 0), 3),
        [
            at(tz, 2024, 10, 27, 0, 0, 0),
            at(tz, 2024, 11, 24, 0, 0, 0),
            at(tz, 2024, 12, 29, 0, 0, 0),
        ]
    );
    // Left out: "0 0 * * 6-7#L" — croner puts # on a range; RES takes # and L on one
    // weekday only (Quartz's and EventBridge's rule), and says so.
}

/// The next `n` runs after `start`, in `tz`.
fn sequence(cron: &str, tz: Tz, start: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let mut after = start;
    (0..n)
        .map(|_| {
            after = next(cron, tz, after);
            after
        })
        .collect()
}

/// croniter's `test_croniter.py` `get_next` examples (naive times, read here as UTC).
/// croniter's optional seconds field comes last; RES's comes first, so those examples are
/// written with it in front.
#[test]
fn croniter_next() {
    let t = |y, mo, d, h, mi, s| at(UTC, y, mo, d, h, mi, s);
    let cases = [
        // testSecondSec, testSecondRepeat ('* * * * * 15,25', '* * * * * */15').
        (
            "15,25 * * * * *",
            t(2012, 4, 6, 13, 26, 10),
            vec![
                t(2012, 4, 6, 13, 26, 15),
                t(2012, 4, 6, 13, 26, 25),
                t(2012, 4, 6, 13, 27, 15),
            ],
        ),
        (
            "*/15 * * * * *",
            t(2012, 4, 6, 13, 26, 36),
            vec![
                t(2012, 4, 6, 13, 26, 45),
                t(2012, 4, 6, 13, 27, 0),
                t(2012, 4, 6, 13, 27, 15),
            ],
        ),
        // testMinute, testHour, testDay.
        (
            "*/5 * * * *",
            t(2010, 1, 23, 12, 18, 0),
            vec![t(2010, 1, 23, 12, 20, 0)],
        ),
        (
            "0 */3 * * *",
            t(2010, 1, 24, 12, 2, 0),
            vec![
                t(2010, 1, 24, 15, 0, 0),
                t(2010, 1, 24, 18, 0, 0),
                t(2010, 1, 24, 21, 0, 0),
                t(2010, 1, 25, 0, 0, 0),
            ],
        ),
        (
            "0 0 */3 * *",
            t(2010, 2, 24, 12, 9, 0),
            vec![
                t(2010, 2, 25, 0, 0, 0),
                t(2010, 2, 28, 0, 0, 0),
                t(2010, 3, 1, 0, 0, 0),
            ],
        ),
        (
            "0 0 * * *",
            t(1996, 2, 27, 0, 0, 0),
            vec![t(1996, 2, 28, 0, 0, 0), t(1996, 2, 29, 0, 0, 0)],
        ),
        // testWeekDay: a weekday alone, and ORed with a day of the month.
        (
            "0 0 * * sat",
            t(2010, 2, 25, 0, 0, 0),
            vec![t(2010, 2, 27, 0, 0, 0), t(2010, 3, 6, 0, 0, 0)],
        ),
        (
            "0 0 1 * wed",
            t(2010, 1, 25, 0, 0, 0),
            vec![
                t(2010, 1, 27, 0, 0, 0),
                t(2010, 2, 1, 0, 0, 0),
                t(2010, 2, 3, 0, 0, 0),
            ],
        ),
        // testNthWeekDay.
        (
            "0 0 * * sat#1",
            t(2010, 2, 25, 0, 0, 0),
            vec![t(2010, 3, 6, 0, 0, 0), t(2010, 4, 3, 0, 0, 0)],
        ),
        (
            "0 0 * * wed#5",
            t(2010, 1, 25, 0, 0, 0),
            vec![
                t(2010, 3, 31, 0, 0, 0),
                t(2010, 6, 30, 0, 0, 0),
                t(2010, 9, 29, 0, 0, 0),
            ],
        ),
        // testMonth, testLastDayOfMonth.
        (
            "0 0 1 * *",
            t(2010, 1, 25, 0, 0, 0),
            vec![t(2010, 2, 1, 0, 0, 0), t(2010, 3, 1, 0, 0, 0)],
        ),
        (
            "0 0 l * *",
            t(2015, 9, 4, 0, 0, 0),
            vec![
                t(2015, 9, 30, 0, 0, 0),
                t(2015, 10, 31, 0, 0, 0),
                t(2015, 11, 30, 0, 0, 0),
                t(2015, 12, 31, 0, 0, 0),
            ],
        ),
        // testSundayToThursdayWithAlphaConversion (a Wednesday).
        (
            "30 22 * * sun-thu",
            t(2010, 8, 25, 15, 56, 0),
            vec![t(2010, 8, 25, 22, 30, 0)],
        ),
    ];
    for (cron, start, expected) in cases {
        assert_eq!(
            sequence(cron, UTC, start, expected.len()),
            expected,
            "{cron} from {start}"
        );
    }
    // Left out: '0 0 29-L * *' (croniter's range ending at L; RES takes L alone or in a
    // list) and day_or=False (croniter's AND of the day fields; RES ORs, as crontab).
}

/// More of croniter's `get_next` examples: bug reports, month lists, ranges with steps.
#[test]
fn croniter_next_bugs_and_ranges() {
    let t = |y, mo, d, h, mi, s| at(UTC, y, mo, d, h, mi, s);
    let cases = [
        // testISOWeekday: 7 is Sunday.
        (
            "0 0 * * 7",
            t(2010, 2, 25, 0, 0, 0),
            vec![t(2010, 2, 28, 0, 0, 0), t(2010, 3, 7, 0, 0, 0)],
        ),
        // testBug2, testBug3 (sub-second start), testBug57 (start with a step).
        (
            "0 * * 3 *",
            t(2012, 1, 1, 0, 0, 0),
            vec![
                t(2012, 3, 1, 0, 0, 0),
                t(2012, 3, 1, 1, 0, 0),
                t(2012, 3, 1, 2, 0, 0),
            ],
        ),
        (
            "00 03 16,30 * *",
            t(2013, 3, 1, 12, 17, 34) + chrono::TimeDelta::microseconds(257_877),
            vec![
                t(2013, 3, 16, 3, 0, 0),
                t(2013, 3, 30, 3, 0, 0),
                t(2013, 4, 16, 3, 0, 0),
            ],
        ),
        (
            "0 4/6 * * *",
            t(2012, 2, 24, 0, 0, 0),
            vec![t(2012, 2, 24, 4, 0, 0)],
        ),
        (
            "0 0/6 * * *",
            t(2012, 2, 24, 0, 0, 0),
            vec![t(2012, 2, 24, 6, 0, 0)],
        ),
        // test_multiple_months.
        (
            "0 0 1 3,6,9,12 *",
            t(2016, 3, 1, 0, 0, 0),
            vec![t(2016, 6, 1, 0, 0, 0)],
        ),
        (
            "0 0 1 3,6,9,12 *",
            t(2016, 2, 15, 0, 0, 0),
            vec![t(2016, 3, 1, 0, 0, 0)],
        ),
        (
            "0 0 1 3,6,9,12 *",
            t(2016, 12, 3, 10, 0, 0),
            vec![t(2017, 3, 1, 0, 0, 0)],
        ),
        // test_rangeGenerator.
        (
            "1-9/2 0 1 * *",
            t(2013, 3, 4, 0, 0, 0),
            vec![
                t(2013, 4, 1, 0, 1, 0),
                t(2013, 4, 1, 0, 3, 0),
                t(2013, 4, 1, 0, 5, 0),
                t(2013, 4, 1, 0, 7, 0),
                t(2013, 4, 1, 0, 9, 0),
            ],
        ),
    ];
    for (cron, start, expected) in cases {
        assert_eq!(
            sequence(cron, UTC, start, expected.len()),
            expected,
            "{cron} from {start}"
        );
    }
    // test_bug34: croniter fails to find a date; RES refuses the rule when it is built.
    let error = Schedule::parse("* * 31 2 *", None, None, Some("UTC")).expect_err("never");
    assert!(matches!(error, ScheduleError::NeverMatches { .. }));
}

/// croniter's time-zone examples around clock changes, where its policy is RES's (an
/// interval expression skips the gap and runs in both passes of the overlap).
#[test]
fn croniter_daylight_saving() {
    let offset = |tz: Tz, t: DateTime<Utc>| {
        use chrono::Offset;
        t.with_timezone(&tz).offset().fix().local_minus_utc()
    };
    // testTimezoneWinterTime: Athens falls back at 04:00 EEST to 03:00 EET.
    let athens = Tz::Europe__Athens;
    let runs = sequence("*/30 * * * *", athens, at(athens, 2013, 10, 27, 2, 0, 0), 7);
    let walls: Vec<(String, i32)> = runs
        .iter()
        .map(|t| {
            (
                t.with_timezone(&athens).format("%H:%M").to_string(),
                offset(athens, *t),
            )
        })
        .collect();
    let expected: Vec<(String, i32)> = [
        ("02:30", 10800),
        ("03:00", 10800),
        ("03:30", 10800),
        ("03:00", 7200),
        ("03:30", 7200),
        ("04:00", 7200),
        ("04:30", 7200),
    ]
    .iter()
    .map(|(w, o)| ((*w).to_owned(), *o))
    .collect();
    assert_eq!(walls, expected);
    // testTimezoneSummerTime: 03:00 EET jumps to 04:00 EEST.
    let runs = sequence("*/30 * * * *", athens, at(athens, 2013, 3, 31, 1, 0, 0), 5);
    let walls: Vec<String> = runs
        .iter()
        .map(|t| t.with_timezone(&athens).format("%H:%M%z").to_string())
        .collect();
    assert_eq!(
        walls,
        [
            "01:30+0200",
            "02:00+0200",
            "02:30+0200",
            "04:00+0300",
            "04:30+0300"
        ]
    );
    // test_std_dst: Warsaw, 2017.
    let warsaw = Tz::Europe__Warsaw;
    assert_eq!(
        next("0 0 * * *", warsaw, at(warsaw, 2017, 3, 26, 0, 0, 0)),
        at(warsaw, 2017, 3, 27, 0, 0, 0)
    );
    assert_eq!(
        next("0 * * * *", warsaw, at(warsaw, 2017, 3, 26, 1, 0, 0)),
        at(warsaw, 2017, 3, 26, 3, 0, 0)
    );
    assert_eq!(
        next("0 0 * * *", warsaw, at(warsaw, 2017, 10, 29, 0, 0, 0)),
        at(warsaw, 2017, 10, 30, 0, 0, 0)
    );
    assert_eq!(
        next("0 * * * *", warsaw, at(warsaw, 2017, 10, 29, 1, 59, 0)),
        at(warsaw, 2017, 10, 29, 2, 0, 0)
    );
    for hour in [3, 4, 5] {
        assert_eq!(
            next("0 * * * *", warsaw, at(warsaw, 2017, 10, 29, hour, 0, 0)),
            at(warsaw, 2017, 10, 29, hour + 1, 0, 0)
        );
    }
    // test_std_dst2: São Paulo falls back at midnight (18 Feb 2018 00:00 → 17 Feb 23:00).
    let sao_paulo = Tz::America__Sao_Paulo;
    let midnight = Utc
        .with_ymd_and_hms(2018, 2, 18, 3, 0, 0)
        .single()
        .expect("instant");
    for hour in [21, 22, 23] {
        assert_eq!(
            next(
                "0 0 * * *",
                sao_paulo,
                at(sao_paulo, 2018, 2, 17, hour, 0, 0)
            ),
            midnight,
            "from {hour}:00"
        );
    }
    assert_eq!(
        next("0 0 * * *", sao_paulo, midnight),
        Utc.with_ymd_and_hms(2018, 2, 19, 3, 0, 0)
            .single()
            .expect("instant")
    );
}

/// croner's own iteration examples (its tests run in the local zone; here Berlin).
#[test]
fn croner_iterations() {
    let tz = Tz::Europe__Berlin;
    let t = |y, mo, d, h, mi, s| at(tz, y, mo, d, h, mi, s);
    // test_wrap_month_and_year.
    assert_eq!(
        sequence("0 0 15 * * *", tz, t(2023, 12, 31, 16, 0, 0), 1),
        [t(2024, 1, 1, 15, 0, 0)]
    );
    // test_weekday_pattern_correct_weekdays.
    assert_eq!(
        sequence("0 0 0 * * 5,6", tz, t(2022, 2, 17, 0, 0, 0), 6),
        [
            t(2022, 2, 18, 0, 0, 0),
            t(2022, 2, 19, 0, 0, 0),
            t(2022, 2, 25, 0, 0, 0),
            t(2022, 2, 26, 0, 0, 0),
            t(2022, 3, 4, 0, 0, 0),
            t(2022, 3, 5, 0, 0, 0),
        ]
    );
    // test_weekday_pattern_combined_with_day_of_month: the 2nd or a Saturday.
    assert_eq!(
        sequence("59 59 23 2 * 6", tz, t(2022, 1, 31, 0, 0, 0), 6),
        [
            t(2022, 2, 2, 23, 59, 59),
            t(2022, 2, 5, 23, 59, 59),
            t(2022, 2, 12, 23, 59, 59),
            t(2022, 2, 19, 23, 59, 59),
            t(2022, 2, 26, 23, 59, 59),
            t(2022, 3, 2, 23, 59, 59),
        ]
    );
    // test_weekday_pattern_alone.
    assert_eq!(
        sequence("15 9 * * mon", tz, t(2022, 2, 28, 23, 59, 0), 3),
        [
            t(2022, 3, 7, 9, 15, 0),
            t(2022, 3, 14, 9, 15, 0),
            t(2022, 3, 21, 9, 15, 0)
        ]
    );
    // test_handling_different_month_lengths.
    for (start, last) in [
        (t(2023, 2, 1, 0, 0, 0), t(2023, 2, 28, 0, 0, 0)),
        (t(2024, 2, 1, 0, 0, 0), t(2024, 2, 29, 0, 0, 0)),
        (t(2023, 4, 1, 0, 0, 0), t(2023, 4, 30, 0, 0, 0)),
    ] {
        assert_eq!(sequence("0 0 L * *", tz, start, 1), [last]);
    }
    // test_cron_iterator_non_standard_intervals_with_offset.
    assert_eq!(
        sequence("7-59/29 2-23/13 * * *", tz, t(2023, 1, 1, 0, 0, 0), 2),
        [t(2023, 1, 1, 2, 7, 0), t(2023, 1, 1, 2, 36, 0)]
    );
    // Left out: test_unusual_cron_expression_end_month_start_month_mon ("0 0 */31,1-7
    // */1 MON"): RES refuses a step wider than its field ('*/31' in day-of-month selects
    // only the 1st), and says so.
    let error = Schedule::parse("0 0 */31,1-7 */1 MON", None, None, None).expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("day-of-month step 31 is larger than 30"),
        "{error}"
    );
}
