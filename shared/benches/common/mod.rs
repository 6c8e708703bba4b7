//! Inputs and the naive baseline shared by the benchmarks.

use std::str::FromStr;

use chrono::{DateTime, NaiveTime, Timelike, Utc};
use chrono_tz::Tz;
use res_shared::schedule::{Schedule, ScheduleError};

/// Croner occurrences the naive search looks at before giving up. A degenerate rule never
/// lands in its window, so without a cap the naive search would not end.
pub const NAIVE_CAP: usize = 2_000;

/// One benchmark input: a rule and the instant to answer from.
#[derive(Clone)]
pub struct Case {
    pub name: &'static str,
    pub cron: &'static str,
    pub window: Option<(&'static str, &'static str)>,
    pub tz: &'static str,
    pub now: &'static str,
}

impl Case {
    pub fn schedule(&self) -> Result<Schedule, ScheduleError> {
        Schedule::parse(
            self.cron,
            self.window.map(|w| w.0),
            self.window.map(|w| w.1),
            Some(self.tz),
        )
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.now.parse().expect("benchmark instants are valid")
    }

    pub fn naive(&self) -> Naive {
        let window = self.window.map(|(from, to)| {
            let time = |t: &str| NaiveTime::parse_from_str(t, "%H:%M").expect("window time");
            (time(from), time(to))
        });
        Naive {
            cron: croner::Cron::from_str(self.cron).expect("croner parses benchmark rules"),
            window,
            tz: self.tz.parse().expect("benchmark zone"),
        }
    }
}

/// The approach the original system described: walk croner's occurrences one by one until
/// one falls inside the window (checked on the wall clock).
pub struct Naive {
    cron: croner::Cron,
    window: Option<(NaiveTime, NaiveTime)>,
    tz: Tz,
}

impl Naive {
    /// The first occurrence inside the window, or `None` after [`NAIVE_CAP`] occurrences
    /// (or when croner itself gives up on an impossible date).
    pub fn next_run(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = now.with_timezone(&self.tz);
        self.cron
            .iter_after(start)
            .take(NAIVE_CAP)
            .find(|t| self.admits(t.time()))
            .map(|t| t.with_timezone(&Utc))
    }

    fn admits(&self, time: NaiveTime) -> bool {
        let time = time.with_nanosecond(0).unwrap_or(time);
        match self.window {
            None => true,
            Some((from, to)) if from <= to => from <= time && time < to,
            Some((from, to)) => time >= from || time < to,
        }
    }
}

/// Rules like the ones branches run every day, each inside or at the edge of its window.
pub const COMMON: &[Case] = &[
    Case {
        name: "half_hourly_inside",
        cron: "*/30 * * * *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T11:00:00Z",
    },
    Case {
        name: "half_hourly_end_of_window",
        cron: "*/30 * * * *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T14:45:00Z",
    },
    Case {
        name: "hourly_overnight",
        cron: "0 * * * *",
        window: Some(("22:00", "06:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T20:00:00Z",
    },
    Case {
        name: "quarter_hourly_outside",
        cron: "*/15 * * * *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T17:00:00Z",
    },
    Case {
        name: "daily_nine",
        cron: "0 9 * * *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T07:00:00Z",
    },
    Case {
        name: "weekdays_friday_evening",
        cron: "0 9 * * MON-FRI",
        window: Some(("08:00", "18:00")),
        tz: "Europe/Berlin",
        now: "2026-03-06T17:00:00Z",
    },
];

/// The slowest shapes: degenerate rules, leap days, sparse dates, DST changes.
pub const HARD: &[Case] = &[
    Case {
        name: "last_friday_5L",
        cron: "0 9 * * 5L",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T11:00:00Z",
    },
    Case {
        name: "nearest_weekday_15W",
        cron: "30 8 15W * *",
        window: Some(("08:00", "18:00")),
        tz: "Europe/Berlin",
        now: "2026-03-16T11:00:00Z",
    },
    Case {
        name: "second_monday_and_last_day",
        cron: "0 10 L * MON#2",
        window: None,
        tz: "America/New_York",
        now: "2026-03-02T11:00:00Z",
    },
    Case {
        name: "degenerate_before_window",
        cron: "0 7 * * *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T11:00:00Z",
    },
    Case {
        name: "degenerate_impossible_date",
        cron: "0 0 30 2 *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2026-03-02T11:00:00Z",
    },
    Case {
        name: "leap_day",
        cron: "0 9 29 2 *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2029-03-01T00:00:00Z",
    },
    Case {
        name: "leap_day_across_2100",
        cron: "0 9 29 2 *",
        window: Some(("08:00", "18:00")),
        tz: "Asia/Riyadh",
        now: "2096-03-01T00:00:00Z",
    },
    Case {
        name: "yearly_last_minute",
        cron: "59 23 31 12 *",
        window: Some(("23:00", "00:00")),
        tz: "Pacific/Chatham",
        now: "2026-01-01T00:00:00Z",
    },
    Case {
        name: "fixed_time_in_dst_gap",
        cron: "30 2 * * *",
        window: Some(("02:00", "04:00")),
        tz: "Europe/Berlin",
        now: "2026-03-28T23:00:00Z",
    },
    Case {
        name: "interval_in_dst_overlap",
        cron: "*/20 * * * * *",
        window: Some(("01:00", "04:00")),
        tz: "America/New_York",
        now: "2026-11-01T05:59:50Z",
    },
    Case {
        name: "window_only_on_weekends_of_june",
        cron: "* 10 * JUN SAT",
        window: Some(("10:30", "10:31")),
        tz: "America/Santiago",
        now: "2026-07-01T00:00:00Z",
    },
];
