//! Opening hours against a brute-force oracle. The oracle knows the generated week and
//! special days as plain data (never the parser), finds each wall-clock boundary by walking
//! every minute of two years in the zone, and answers by scanning lists; the rules answer
//! with their spans, hops and grids. Berlin and New York cross DST twice a year, Riyadh
//! never.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Datelike, Days, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc};
use proptest::prelude::*;
use res_shared::schedule::{
    DaySpec, HoursSpec, OpeningHours, OperationWindow, Recurrence, Restriction, Schedule,
    Timetable, Validity, WindowPosition, Zone,
};

const ZONES: [&str; 3] = ["Europe/Berlin", "America/New_York", "Asia/Riyadh"];
const DAY: u32 = 1_440;
const WEEKDAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

fn first_civil() -> NaiveDateTime {
    date(2025, 12, 20).and_time(NaiveTime::MIN)
}

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).expect("a date")
}

/// For each civil minute from `first_civil`, the first instant whose wall clock reads that
/// minute or later — what a window edge means, found by walking every minute.
struct Boundaries {
    zone: Zone,
    first: Vec<DateTime<Utc>>,
}

impl Boundaries {
    fn of(name: &str) -> &'static Boundaries {
        static TABLES: OnceLock<Vec<Boundaries>> = OnceLock::new();
        let tables = TABLES.get_or_init(|| {
            ZONES
                .iter()
                .map(|name| {
                    let zone = Zone::parse(name).expect("a zone");
                    let base = first_civil();
                    let mut first = Vec::new();
                    let mut t = base.and_utc() - TimeDelta::hours(15);
                    let end = date(2028, 1, 10).and_time(NaiveTime::MIN).and_utc();
                    while t < end {
                        let wall = (zone.local(t) - base).num_minutes();
                        while (first.len() as i64) <= wall {
                            first.push(t);
                        }
                        t += TimeDelta::minutes(1);
                    }
                    Boundaries { zone, first }
                })
                .collect()
        });
        let index = ZONES.iter().position(|z| *z == name).expect("a known zone");
        &tables[index]
    }

    fn at(&self, civil: NaiveDateTime) -> DateTime<Utc> {
        let minute = (civil - first_civil()).num_minutes();
        self.first[usize::try_from(minute).expect("after the first civil minute")]
    }
}

/// Generated hours as plain data: minutes after the opening day's midnight.
#[derive(Debug, Clone)]
struct Model {
    week: [Vec<(u32, u32)>; 7],
    days: BTreeMap<NaiveDate, Vec<(u32, u32)>>,
    before: u32,
    after: u32,
    first: Option<NaiveDate>,
    last: Option<NaiveDate>,
    /// Instead of the hours: a daily window `from`–`to` (minutes; `to` past `DAY` is
    /// overnight), limited only by the validity dates.
    daily: Option<[(u32, u32); 1]>,
}

impl Model {
    fn intervals(&self, day: NaiveDate) -> &[(u32, u32)] {
        match &self.daily {
            Some(daily) => daily,
            None => self.hours_on(day),
        }
    }

    /// The hours' intervals of `day`, daily window or not.
    fn hours_on(&self, day: NaiveDate) -> &[(u32, u32)] {
        self.days
            .get(&day)
            .unwrap_or(&self.week[day.weekday().num_days_from_monday() as usize])
    }

    fn valid(&self, day: NaiveDate) -> bool {
        self.first.is_none_or(|f| day >= f) && self.last.is_none_or(|l| day <= l)
    }

    fn spec(&self) -> HoursSpec {
        let text = |list: &[(u32, u32)]| -> Vec<String> {
            list.iter()
                .map(|(s, e)| format!("{}-{}", clock(*s), end_clock(*e)))
                .collect()
        };
        HoursSpec {
            week: self
                .week
                .iter()
                .enumerate()
                .filter(|(_, list)| !list.is_empty())
                .map(|(i, list)| (WEEKDAYS[i].to_owned(), text(list)))
                .collect(),
            days: self
                .days
                .iter()
                .map(|(d, list)| DaySpec {
                    date: *d,
                    until: None,
                    name: Some("special".into()),
                    calendar: None,
                    hours: text(list),
                })
                .collect(),
            calendars: Vec::new(),
        }
    }

    fn timetable(&self) -> Timetable {
        let validity = Validity {
            first: self.first,
            last: self.last,
        };
        if let Some([(from, to)]) = self.daily {
            let time = |m: u32| NaiveTime::from_hms_opt(m / 60 % 24, m % 60, 0).expect("a time");
            let window = OperationWindow::new(time(from), time(to)).expect("a window");
            return Timetable::new(Some(Restriction::Daily(window)), validity).expect("restricted");
        }
        let hours = OpeningHours::from_spec(&self.spec()).expect("generated hours parse");
        Timetable::new(
            Some(Restriction::Hours {
                hours: Arc::new(hours),
                before: self.before * 60,
                after: self.after * 60,
            }),
            Validity {
                first: self.first,
                last: self.last,
            },
        )
        .expect("a restriction")
    }

    /// Every span, unmerged and none empty, with its opening day, by the oracle's boundaries.
    fn raw_spans(&self, b: &Boundaries) -> Vec<(DateTime<Utc>, DateTime<Utc>, NaiveDate)> {
        let mut spans = Vec::new();
        let mut day = date(2025, 12, 25);
        while day < date(2027, 12, 31) {
            if self.valid(day) {
                let midnight = day.and_time(NaiveTime::MIN);
                for (s, e) in self.intervals(day) {
                    let start = b.at(midnight + minutes(*s as i64 - self.before as i64));
                    let end = b.at(midnight + minutes(*e as i64 + self.after as i64));
                    if start < end {
                        spans.push((start, end, day));
                    }
                }
            }
            day = day.succ_opt().expect("a day");
        }
        spans.sort();
        spans
    }
}

fn minutes(n: i64) -> TimeDelta {
    TimeDelta::minutes(n)
}

fn clock(m: u32) -> String {
    format!("{:02}:{:02}", m / 60 % 24, m % 60)
}

fn end_clock(m: u32) -> String {
    if m == DAY { "24:00".into() } else { clock(m) }
}

fn merged(
    raw: &[(DateTime<Utc>, DateTime<Utc>, NaiveDate)],
) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let mut out: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for (s, e, _) in raw {
        match out.last_mut() {
            Some((_, end)) if *s <= *end => *end = (*end).max(*e),
            _ => out.push((*s, *e)),
        }
    }
    out
}

fn unmerged(
    raw: &[(DateTime<Utc>, DateTime<Utc>, NaiveDate)],
) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    raw.iter().map(|(s, e, _)| (*s, *e)).collect()
}

fn oracle_locate(
    spans: &[(DateTime<Utc>, DateTime<Utc>)],
    t: DateTime<Utc>,
) -> Option<WindowPosition> {
    spans.iter().find(|(_, e)| *e > t).map(|(s, e)| {
        if *s <= t {
            WindowPosition::Inside { end: *e }
        } else {
            WindowPosition::Outside { next_start: *s }
        }
    })
}

fn open_at(spans: &[(DateTime<Utc>, DateTime<Utc>)], t: DateTime<Utc>) -> bool {
    matches!(oracle_locate(spans, t), Some(WindowPosition::Inside { .. }))
}

/// One day's intervals: up to two, the second after the first, either maybe overnight.
fn day_hours() -> impl Strategy<Value = Vec<(u32, u32)>> {
    (
        0u32..3,
        0u32..48,
        1u32..30,
        1u32..12,
        1u32..30,
        prop::bool::ANY,
    )
        .prop_map(|(count, start, length, gap, length2, whole)| {
            if whole && count == 1 {
                return vec![(0, DAY)];
            }
            let first = (start * 30, start * 30 + length * 30);
            let second_start = first.1 + gap * 30;
            let second = (second_start, second_start + length2 * 30);
            match count {
                0 => Vec::new(),
                1 => vec![first],
                _ if second.0 < DAY => vec![first, second],
                _ => vec![first],
            }
        })
}

fn model() -> impl Strategy<Value = Model> {
    (
        prop::array::uniform7(day_hours()),
        prop::collection::btree_map(0u64..700, day_hours(), 0..60),
        (0u32..13).prop_map(|n| n * 10),
        (0u32..13).prop_map(|n| n * 10),
        prop::option::of(0u64..500),
        prop::option::of(0u64..300),
        prop::option::weighted(0.25, (0u32..48, 1u32..47)),
    )
        .prop_map(|(mut week, days, before, after, first, length, daily)| {
            // An overnight interval must end before the next day's first opens.
            for i in 0..7 {
                let next_first = week[(i + 1) % 7].first().map_or(DAY, |(s, _)| *s);
                if let Some(last) = week[i].last_mut() {
                    last.1 = last.1.min(DAY + next_first).max(last.0 + 30);
                    if last.1 > DAY + next_first {
                        week[i].pop();
                    }
                }
            }
            let base = date(2026, 1, 1);
            let first = first.map(|d| base + Days::new(d));
            let (before, after) = if daily.is_some() {
                (0, 0)
            } else {
                (before, after)
            };
            Model {
                week,
                days: days
                    .into_iter()
                    .map(|(d, list)| (base + Days::new(d), list))
                    .collect(),
                before,
                after,
                first,
                last: first.zip(length).map(|(f, l)| f + Days::new(l)),
                daily: daily.map(|(from, length)| [(from * 30, from * 30 + length * 30)]),
            }
        })
        .prop_filter("hours the parser accepts", |m| {
            OpeningHours::from_spec(&m.spec()).is_ok()
        })
}

fn instants() -> impl Strategy<Value = Vec<DateTime<Utc>>> {
    prop::collection::vec(0i64..(640 * 1_440), 12).prop_map(|offsets| {
        let base = date(2026, 1, 10).and_time(NaiveTime::MIN).and_utc();
        offsets
            .into_iter()
            .map(|m| base + TimeDelta::minutes(m) + TimeDelta::seconds(m % 7 * 9))
            .collect()
    })
}

const CRONS: [&str; 6] = [
    "*/15 * * * *",
    "0 * * * *",
    "30 9 * * *",
    "0 10 1 * *",
    "*/5 8-20 * * 1-5",
    "0 3 * * 0",
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(48),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Inside or outside, the end and the next opening; a cron inside the hours; `@every`
    /// inside the hours; runs at opening and closing — each as the oracle finds it.
    #[test]
    fn opening_hours_answer_as_the_oracle(
        model in model(),
        zone in 0usize..3,
        times in instants(),
        cron in 0usize..CRONS.len(),
        every in prop::sample::select(vec![45i64, 90, 240]),
        edge in prop::sample::select(vec!["@opening", "@opening +10m", "@closing -15m", "@closing +15m"]),
    ) {
        let b = Boundaries::of(ZONES[zone]);
        let timetable = model.timetable();
        let raw = model.raw_spans(b);
        // Opening hours' spans that touch are one; a daily window's occurrences stay apart,
        // as they are without dates.
        let spans = if model.daily.is_some() { unmerged(&raw) } else { merged(&raw) };
        for t in &times {
            let t = *t;
            prop_assert_eq!(timetable.locate(t, b.zone), oracle_locate(&spans, t), "locate {}", t);
            prop_assert_eq!(
                timetable.next_start_after(t, b.zone),
                spans.iter().find(|(s, _)| *s > t).map(|(s, _)| *s),
                "next start after {}", t
            );
        }

        // A cron inside the hours: the first cron time after `now` that is open.
        let recurrence = Recurrence::parse(CRONS[cron]).expect("a cron");
        let Recurrence::Cron(expression) = &recurrence else { unreachable!() };
        let schedule = Schedule::in_timetable(recurrence.clone(), Some(timetable.clone()), None, b.zone)
            .expect("a schedule");
        for t in &times {
            let answer = schedule.next_run(*t, false);
            if schedule.is_degenerate() {
                // It runs at each opening; with none left (the dates ended), not at all.
                prop_assert_eq!(
                    answer.ok().map(|next| next.next_run_time),
                    spans.iter().find(|(s, _)| *s > *t).map(|(s, _)| *s)
                );
                continue;
            }
            // The oracle's spans end with 2027: beyond that it knows nothing.
            let horizon = (*t + TimeDelta::days(300)).min(date(2027, 12, 24).and_time(NaiveTime::MIN).and_utc());
            let mut candidate = *t;
            let mut oracle = None;
            for _ in 0..100_000 {
                let Some(next) = expression.next_after(candidate, b.zone) else { break };
                if next > horizon { break; }
                if open_at(&spans, next) { oracle = Some(next); break; }
                candidate = next;
            }
            match (answer, oracle) {
                (Ok(next), Some(expected)) => prop_assert_eq!(next.next_run_time, expected, "cron {} after {}", CRONS[cron], t),
                (Ok(next), None) => prop_assert!(next.next_run_time > horizon, "cron {} after {}: {:?}", CRONS[cron], t, next),
                (Err(_), Some(expected)) => prop_assert!(false, "cron {} after {}: none, oracle {}", CRONS[cron], t, expected),
                (Err(_), None) => {}
            }
        }

        // `@every` inside the hours: a grid from each span's start, merged spans one grid,
        // a span looked back for a week before the day asked about.
        let interval = Schedule::in_timetable(
            Recurrence::parse(&format!("@every {every}m")).expect("an interval"),
            Some(timetable.clone()),
            None,
            b.zone,
        ).expect("a schedule");
        for t in &times {
            let step = TimeDelta::minutes(every);
            let floor = b.zone.local(*t).date() - Days::new(7);
            let recent: Vec<_> = raw.iter().filter(|(_, _, d)| *d >= floor).copied().collect();
            let grids = if model.daily.is_some() { unmerged(&recent) } else { merged(&recent) };
            let oracle = grids.iter().filter(|(_, e)| *e > *t).filter_map(|(s, e)| {
                let run = if *s > *t { *s } else {
                    let k = (*t - *s).num_seconds() / step.num_seconds() + 1;
                    *s + step * i32::try_from(k).expect("small")
                };
                (run < *e).then_some(run)
            }).min();
            prop_assert_eq!(interval.next_run(*t, false).ok().map(|n| n.next_run_time), oracle, "@every {}m after {}", every, t);
        }

        // At opening or closing: one run per interval, on valid days.
        let hours = Arc::new(OpeningHours::from_spec(&model.spec()).expect("parses"));
        let anchored = Schedule::in_timetable(
            Recurrence::parse(edge).expect("an anchor"),
            Timetable::new(None, Validity { first: model.first, last: model.last }),
            Some(hours),
            b.zone,
        ).expect("a schedule");
        let (closing, offset) = match edge {
            "@opening" => (false, 0),
            "@opening +10m" => (false, 10),
            "@closing -15m" => (true, -15),
            _ => (true, 15),
        };
        for t in &times {
            let mut oracle: Option<DateTime<Utc>> = None;
            let mut day = date(2025, 12, 25);
            while day < date(2027, 12, 31) {
                if model.valid(day) {
                    for (s, e) in model.hours_on(day) {
                        let edge_minute = if closing { *e } else { *s };
                        let at = b.at(day.and_time(NaiveTime::MIN) + minutes(edge_minute as i64 + offset));
                        if at > *t && oracle.is_none_or(|o| at < o) { oracle = Some(at); }
                    }
                }
                day = day.succ_opt().expect("a day");
            }
            let answer = anchored.next_run(*t, false).ok().map(|n| n.next_run_time);
            let horizon = (*t + TimeDelta::days(390)).min(date(2027, 12, 24).and_time(NaiveTime::MIN).and_utc());
            if oracle.is_some_and(|o| o < horizon) {
                prop_assert_eq!(answer, oracle, "{} after {}", edge, t);
            } else {
                prop_assert!(answer.is_none_or(|a| a >= horizon), "{} after {}: {:?}", edge, t, answer);
            }
        }
    }
}

/// The days of the year a Riyadh branch of the example is closed, and its Friday and
/// Ramadan hours, asked as a brand admin would.
#[test]
fn a_riyadh_branch_s_week_holidays_and_ramadan() {
    let spec: HoursSpec = serde_json::from_value(serde_json::json!({
        "week": {"sat-thu": ["09:00-12:00", "16:00-23:00"], "fri": ["16:00-23:30"]},
        "days": [
            {"date": "2027-02-08", "until": "2027-03-09", "name": "Ramadan", "hours": ["20:00-02:00"]},
            {"date": "2027-03-10", "until": "2027-03-12", "name": "Eid al-Fitr"},
            {"date": "2026-09-23", "name": "National Day"}
        ]
    }))
    .expect("a spec");
    let hours = Arc::new(OpeningHours::from_spec(&spec).expect("parses"));
    let zone = Zone::parse("Asia/Riyadh").expect("zone");
    let open = Timetable::new(
        Some(Restriction::Hours {
            hours: hours.clone(),
            before: 0,
            after: 0,
        }),
        Validity::default(),
    )
    .expect("a timetable");
    let at = |text: &str| -> DateTime<Utc> { text.parse().expect("an instant") };
    // National Day (a Wednesday): closed; the next opening is Thursday 09:00 (06:00Z).
    assert_eq!(
        open.locate(at("2026-09-23T08:00:00Z"), zone),
        Some(WindowPosition::Outside {
            next_start: at("2026-09-24T06:00:00Z")
        })
    );
    // Friday: 16:00–23:30 only.
    assert!(!open.admits(at("2026-09-25T07:00:00Z"), zone));
    assert_eq!(
        open.locate(at("2026-09-25T14:00:00Z"), zone),
        Some(WindowPosition::Inside {
            end: at("2026-09-25T20:30:00Z")
        })
    );
    // Ramadan: 20:00 to 02:00 the next morning.
    assert_eq!(
        open.locate(at("2027-02-10T22:00:00Z"), zone),
        Some(WindowPosition::Inside {
            end: at("2027-02-10T23:00:00Z")
        })
    );
    // Eid: closed three days; open again on the 13th at 09:00.
    assert_eq!(
        open.next_start_after(at("2027-03-09T23:30:00Z"), zone),
        Some(at("2027-03-13T06:00:00Z"))
    );
    // Ten minutes after each opening.
    let shelves = Schedule::in_timetable(
        Recurrence::parse("@opening +10m").expect("an anchor"),
        None,
        Some(hours),
        zone,
    )
    .expect("a schedule");
    let next = |t: &str| shelves.next_run(at(t), false).expect("a run").next_run_time;
    assert_eq!(next("2026-09-24T05:00:00Z"), at("2026-09-24T06:10:00Z"));
    assert_eq!(next("2026-09-24T06:10:00Z"), at("2026-09-24T13:10:00Z"));
    assert_eq!(
        next("2026-09-22T21:00:00Z"),
        at("2026-09-24T06:10:00Z"),
        "not on National Day"
    );
}

fn at(zone: &str, text: &str) -> (Zone, DateTime<Utc>) {
    (
        Zone::parse(zone).expect("a zone"),
        text.parse().expect("an instant"),
    )
}

fn hours(json: serde_json::Value) -> Arc<OpeningHours> {
    let spec: HoursSpec = serde_json::from_value(json).expect("a spec");
    Arc::new(OpeningHours::from_spec(&spec).expect("parses"))
}

fn next(schedule: &Schedule, after: DateTime<Utc>) -> String {
    schedule
        .next_run(after, false)
        .map(|n| n.next_run_time.to_rfc3339())
        .unwrap_or_else(|e| e.to_string())
}

/// `expression` while open by `week`, from `before` seconds ahead of each opening.
fn while_open(expression: &str, week: serde_json::Value, before: u32, zone: Zone) -> Schedule {
    let timetable = Timetable::new(
        Some(Restriction::Hours {
            hours: hours(serde_json::json!({ "week": week })),
            before,
            after: 0,
        }),
        Validity::default(),
    );
    Schedule::in_timetable(
        Recurrence::parse(expression).expect("a recurrence"),
        timetable,
        None,
        zone,
    )
    .expect("a schedule")
}

/// docs/schedule.md: spans that overlap are one, and an `@every` grid starts afresh at each
/// span's start — not two grids at once.
#[test]
fn every_runs_one_grid_across_spans_that_overlap() {
    let (zone, ten) = at("Asia/Riyadh", "2026-03-02T07:00:00Z");
    let week = serde_json::json!({"sun-sat": ["09:00-12:00", "13:00-18:00"]});
    let schedule = while_open("@every 90m", week, 2 * 3600, zone);
    // 07:00–18:00 Riyadh (04:00–15:00Z): 07:00, 08:30, 10:00, 11:30, 13:00…
    assert_eq!(next(&schedule, ten), "2026-03-02T08:30:00+00:00");
    let (_, half_past_eleven) = at("Asia/Riyadh", "2026-03-02T08:30:00Z");
    assert_eq!(
        next(&schedule, half_past_eleven),
        "2026-03-02T10:00:00+00:00"
    );
}

#[test]
fn every_runs_one_grid_across_spans_that_touch() {
    let (zone, _) = at("UTC", "2026-03-01T00:00:00Z");
    let week = serde_json::json!({"thu": ["21:00-01:00"], "fri": ["01:00-05:00"]});
    let schedule = while_open("@every 90m", week.clone(), 0, zone);
    // Thursday 2026-03-05 21:00 to Friday 05:00: 21:00, 22:30, 00:00, 01:30, 03:00, 04:30.
    let (_, t) = at("UTC", "2026-03-06T00:30:00Z");
    assert_eq!(next(&schedule, t), "2026-03-06T01:30:00+00:00");
    let (_, t) = at("UTC", "2026-03-06T03:00:00Z");
    assert_eq!(next(&schedule, t), "2026-03-06T04:30:00+00:00");
    // `on fri`: the grid starts with Friday's part.
    let friday = while_open("@every 90m on fri", week, 0, zone);
    let (_, t) = at("UTC", "2026-03-05T20:00:00Z");
    assert_eq!(next(&friday, t), "2026-03-06T01:00:00+00:00");
}

/// A validity that excludes nothing answers as no validity: at St John's DST gap the
/// overnight occurrence ends where the next opens, and each still opens.
#[test]
fn a_validity_that_excludes_nothing_changes_no_answer() {
    let (zone, from) = at("America/St_Johns", "2026-03-08T02:30:00Z");
    let window = OperationWindow::new(
        NaiveTime::from_hms_opt(3, 0, 0).expect("03:00"),
        NaiveTime::from_hms_opt(2, 0, 0).expect("02:00"),
    )
    .expect("a window");
    let cron = || Recurrence::parse("*/30 2 * * SAT,SUN").expect("a cron");
    let plain = Schedule::in_timetable(
        cron(),
        Timetable::new(Some(Restriction::Daily(window)), Validity::default()),
        None,
        zone,
    )
    .expect("a schedule");
    let until = Schedule::in_timetable(
        cron(),
        Timetable::new(
            Some(Restriction::Daily(window)),
            Validity {
                first: None,
                last: Some(date(2026, 3, 13)),
            },
        ),
        None,
        zone,
    )
    .expect("a schedule");
    assert!(plain.is_degenerate() && until.is_degenerate());
    assert_eq!(next(&plain, from), "2026-03-08T05:30:00+00:00");
    assert_eq!(next(&until, from), next(&plain, from));
}
