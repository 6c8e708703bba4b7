//! Opening hours as documents and plans write them: weekdays (or ranges of them) to
//! intervals `HH:MM-HH:MM`, and special days listed by date. [`super::OpeningHours`] is the
//! parsed form every schedule question reads.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// A branch's opening hours as written: its week and its special days.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HoursSpec {
    /// `mon`…`sun`, or a range such as `sat-thu` (wrapping past Sunday), to intervals such
    /// as `09:00-12:00`; an interval whose end is before its start ends the next day
    /// (`20:00-02:00`), one that ends where it starts is refused (the whole day is
    /// `00:00-24:00`), and `24:00` is midnight at the end. A weekday not named is closed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub week: BTreeMap<String, Vec<String>>,
    /// Dates whose hours replace the week's: closed (no `hours`) or their own intervals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DaySpec>,
    /// Brand calendars whose days apply after `days`, in this order (a plan sends each
    /// calendar once, with its brand); resolving the hours folds them in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calendars: Vec<String>,
}

/// A special day, or a range of them, in the branch's zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DaySpec {
    /// The (first) date.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Date))]
    pub date: NaiveDate,
    /// The last date of a range, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = Date))]
    pub until: Option<NaiveDate>,
    /// What people call it ("National Day"), for the words that explain a schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The calendar it came from, when a brand calendar gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// The day's intervals; none means closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hours: Vec<String>,
}

/// The longest range a resolved entry is split over.
const MAX_RANGE_DAYS: usize = 400;

impl HoursSpec {
    /// Whether the spec says nothing (no week, no days): a branch with no opening hours.
    pub fn is_empty(&self) -> bool {
        self.week.is_empty() && self.days.is_empty() && self.calendars.is_empty()
    }

    /// The hours with their calendars folded in: the spec's own days first, then each named
    /// calendar's (from `calendars`) in order, each date from the first entry that lists
    /// it; a range is split around dates an earlier entry gave. The functions resolve a
    /// branch's hours so when a document is applied, a runner when its plan arrives.
    pub fn resolved(&self, calendars: &BTreeMap<String, Vec<DaySpec>>) -> HoursSpec {
        let mut sources: Vec<DaySpec> = self.days.clone();
        for name in &self.calendars {
            for day in calendars.get(name).into_iter().flatten() {
                sources.push(DaySpec {
                    calendar: Some(name.clone()),
                    ..day.clone()
                });
            }
        }
        let mut taken: BTreeSet<NaiveDate> = BTreeSet::new();
        let mut days = Vec::new();
        for day in sources {
            let last = day.until.unwrap_or(day.date).max(day.date);
            let mut run: Option<(NaiveDate, NaiveDate)> = None;
            for date in day
                .date
                .iter_days()
                .take_while(|d| *d <= last)
                .take(MAX_RANGE_DAYS)
            {
                if taken.insert(date) {
                    run = Some(run.map_or((date, date), |(first, _)| (first, date)));
                } else if let Some((first, end)) = run.take() {
                    days.push(piece(&day, first, end));
                }
            }
            if let Some((first, end)) = run {
                days.push(piece(&day, first, end));
            }
        }
        days.sort_by_key(|d| d.date);
        HoursSpec {
            week: self.week.clone(),
            days,
            calendars: Vec::new(),
        }
    }
}

fn piece(day: &DaySpec, first: NaiveDate, last: NaiveDate) -> DaySpec {
    DaySpec {
        date: first,
        until: (last > first).then_some(last),
        ..day.clone()
    }
}
