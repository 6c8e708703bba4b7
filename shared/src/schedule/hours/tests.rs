use std::collections::BTreeMap;

use super::*;

fn spec(value: serde_json::Value) -> HoursSpec {
    serde_json::from_value(value).expect("a spec")
}

fn problem(value: serde_json::Value) -> String {
    match OpeningHours::from_spec(&spec(value)) {
        Ok(hours) => panic!("accepted: {hours:?}"),
        Err(error) => error.to_string(),
    }
}

fn date(text: &str) -> NaiveDate {
    text.parse().expect("a date")
}

#[test]
fn ranges_of_weekdays_wrap_and_special_days_replace_their_weekday() {
    let hours = OpeningHours::from_spec(&spec(serde_json::json!({
        "week": {"sat-thu": ["16:00-23:00", "09:00-12:00"], "Fri": ["16:00-23:30"]},
        "days": [{"date": "2026-09-23", "name": "National Day"},
                 {"date": "2027-02-08", "until": "2027-02-10", "hours": ["20:00-02:00"]}]
    })))
    .expect("parses");
    let (h, m) = (3600, 60);
    // 2026-09-22 is a Tuesday: sorted split shifts.
    assert_eq!(
        hours.intervals_on(date("2026-09-22")),
        [
            Interval {
                start: 9 * h,
                end: 12 * h
            },
            Interval {
                start: 16 * h,
                end: 23 * h
            }
        ]
    );
    assert_eq!(
        hours.intervals_on(date("2026-09-25")),
        [Interval {
            start: 16 * h,
            end: 23 * h + 30 * m
        }]
    );
    assert!(matches!(hours.day(date("2026-09-23")), Day::Special(d) if d.intervals.is_empty()));
    assert_eq!(
        hours.intervals_on(date("2027-02-10")),
        [Interval {
            start: 20 * h,
            end: 26 * h
        }],
        "an overnight interval ends the next day"
    );
    assert!(hours.has_overnight());
    assert_eq!(hours.weekly(Weekday::Fri).len(), 1);
    assert_eq!(hours.special_days_from(date("2026-09-24")).count(), 3);
}

#[test]
fn midnight_ends_a_day_and_only_then() {
    let hours = OpeningHours::from_spec(&spec(serde_json::json!({
        "week": {"mon": ["00:00-24:00"], "tue": ["18:00-24:00"]}
    })))
    .expect("parses");
    assert_eq!(
        hours.weekly(Weekday::Mon),
        [Interval {
            start: 0,
            end: SECONDS_PER_DAY
        }]
    );
    assert_eq!(hours.weekly(Weekday::Tue)[0].to_string(), "18:00-24:00");
    assert!(
        problem(serde_json::json!({"week": {"mon": ["24:00-02:00"]}}))
            .starts_with("week.mon[0]: invalid from '24:00'")
    );
    assert!(problem(serde_json::json!({"week": {"mon": ["09:00-09:00"]}})).contains("00:00-24:00"));
}

#[test]
fn every_problem_names_its_place() {
    assert_eq!(
        problem(serde_json::json!({"week": {"mon": ["09:00-12:00", "11:00-13:00"]}})),
        "week.mon: 09:00-12:00 overlaps 11:00-13:00"
    );
    assert_eq!(
        problem(serde_json::json!({"week": {"sat-thu": ["09:00-12:00"], "mon": []}})),
        "week.sat-thu: mon is already given by 'mon'"
    );
    assert!(
        problem(serde_json::json!({"week": {"funday": []}}))
            .starts_with("week.funday: 'funday' is not a weekday")
    );
    assert!(
        problem(serde_json::json!({"week": {"mon": ["9-12"]}}))
            .starts_with("week.mon[0]: invalid from '9'")
    );
    assert!(
        problem(serde_json::json!({"week": {"mon": ["09:00"]}}))
            .starts_with("week.mon[0]: '09:00' is not an interval")
    );
    assert_eq!(
        problem(serde_json::json!({"week": {"mon": ["20:00-03:00"], "tue": ["02:00-04:00"]}})),
        "week: mon's last interval runs into tue's first"
    );
    assert_eq!(
        problem(
            serde_json::json!({"days": [{"date": "2027-01-01"}, {"date": "2026-12-31", "until": "2027-01-02"}]})
        ),
        "days[1].date: 2027-01-01 is listed twice"
    );
    assert_eq!(
        problem(serde_json::json!({"days": [{"date": "2027-01-05", "until": "2027-01-02"}]})),
        "days[0].until: 2027-01-02 is before the date 2027-01-05"
    );
    assert!(
        problem(serde_json::json!({"days": [{"date": "2027-01-01", "until": "2029-01-01"}]}))
            .contains("at most 400 days")
    );
}

#[test]
fn stored_hours_that_cannot_be_read_are_closed_every_day() {
    let broken = spec(serde_json::json!({"week": {"mon": ["nonsense"]}}));
    let hours = OpeningHours::from_stored(Some(&broken)).expect("some hours");
    assert!(hours.intervals_on(date("2026-09-21")).is_empty());
    assert!(OpeningHours::from_stored(None).is_none());
}

/// A resolved day as text: date, until, name, calendar.
type Row = (String, Option<String>, Option<String>, Option<String>);

#[test]
fn calendars_fold_in_after_the_branch_s_own_days_each_date_from_the_first_that_lists_it() {
    let branch = spec(serde_json::json!({
        "week": {"mon-sun": ["09:00-17:00"]},
        "days": [{"date": "2027-03-11", "name": "Stocktake", "hours": ["09:00-12:00"]}],
        "calendars": ["holidays", "ramadan", "nowhere"]
    }));
    let calendars: BTreeMap<String, Vec<DaySpec>> = serde_json::from_value(serde_json::json!({
        "holidays": [{"date": "2027-03-10", "until": "2027-03-12", "name": "Eid"}],
        "ramadan": [{"date": "2027-02-08", "until": "2027-03-10", "name": "Ramadan", "hours": ["20:00-02:00"]}]
    }))
    .expect("calendars");
    let resolved = branch.resolved(&calendars);
    assert!(resolved.calendars.is_empty());
    let days: Vec<Row> = resolved
        .days
        .iter()
        .map(|d| {
            (
                d.date.to_string(),
                d.until.map(|u| u.to_string()),
                d.name.clone(),
                d.calendar.clone(),
            )
        })
        .collect();
    assert_eq!(
        days,
        [
            (
                "2027-02-08".into(),
                Some("2027-03-09".into()),
                Some("Ramadan".into()),
                Some("ramadan".into())
            ),
            (
                "2027-03-10".into(),
                None,
                Some("Eid".into()),
                Some("holidays".into())
            ),
            ("2027-03-11".into(), None, Some("Stocktake".into()), None),
            (
                "2027-03-12".into(),
                None,
                Some("Eid".into()),
                Some("holidays".into())
            ),
        ],
        "the branch's own day wins, then the earlier calendar; ranges split around them"
    );
    let hours = OpeningHours::from_spec(&resolved).expect("parses");
    assert_eq!(hours.intervals_on(date("2027-03-11")).len(), 1);
    assert!(hours.intervals_on(date("2027-03-12")).is_empty());
}
