//! Runs tied to a branch's opening hours: `@opening +10m` (ten minutes after each opening),
//! `@closing -15m`, `@closing +15m` — once per opening interval, on the days it opens.

use std::fmt;

use chrono::{DateTime, Days, NaiveTime, TimeDelta, Utc};

use super::error::ScheduleError;
use super::hours::OpeningHours;
use super::interval::parse_duration;
use super::timetable::{MAX_OFFSET_SECONDS, SEARCH_DAYS, Validity};
use super::zone::Zone;

/// Which end of an opening interval a run is tied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// The interval's start.
    Opening,
    /// The interval's end.
    Closing,
}

/// A parsed `@opening` / `@closing` schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorSchedule {
    expression: String,
    edge: Edge,
    /// Seconds after the edge (negative: before it).
    offset: i64,
}

impl AnchorSchedule {
    /// Whether `text` is written as an opening or closing schedule.
    pub fn is_anchor(text: &str) -> bool {
        let head = text.trim_start().to_ascii_lowercase();
        head.starts_with("@opening") || head.starts_with("@closing")
    }

    /// Parses `@opening`, `@opening +10m`, `@closing -15m`, `@closing +1h30m`.
    pub fn parse(expression: &str) -> Result<AnchorSchedule, ScheduleError> {
        let trimmed = expression.trim();
        let invalid = |reason: String| ScheduleError::Anchor {
            expression: trimmed.to_owned(),
            reason,
        };
        let lower = trimmed.to_ascii_lowercase();
        let (edge, rest) = if let Some(rest) = lower.strip_prefix("@opening") {
            (Edge::Opening, rest)
        } else if let Some(rest) = lower.strip_prefix("@closing") {
            (Edge::Closing, rest)
        } else {
            return Err(invalid(
                "starts with '@opening' or '@closing' (e.g. '@opening +10m')".to_owned(),
            ));
        };
        let rest: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
        let offset = match rest.chars().next() {
            None => 0,
            Some(sign @ ('+' | '-')) => {
                let seconds = parse_duration(&rest[1..]).map_err(invalid)?;
                if seconds > i64::from(MAX_OFFSET_SECONDS) {
                    return Err(invalid(format!(
                        "the offset '{}' is longer than 12h",
                        &rest[1..]
                    )));
                }
                if sign == '-' { -seconds } else { seconds }
            }
            Some(_) => {
                return Err(invalid(format!(
                    "unexpected '{rest}': write an offset such as '+10m' or '-15m'"
                )));
            }
        };
        Ok(AnchorSchedule {
            expression: trimmed.to_owned(),
            edge,
            offset,
        })
    }

    /// The expression as written (trimmed).
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The edge runs are tied to.
    pub fn edge(&self) -> Edge {
        self.edge
    }

    /// Seconds after the edge (negative: before).
    pub fn offset_seconds(&self) -> i64 {
        self.offset
    }

    /// The first run strictly after `now` under `hours`, on a valid date.
    pub(crate) fn next_after(
        &self,
        now: DateTime<Utc>,
        hours: &OpeningHours,
        validity: Validity,
        zone: Zone,
    ) -> Option<DateTime<Utc>> {
        let back = 1 + u64::from(hours.has_overnight());
        let mut date = zone.local(now).date().checked_sub_days(Days::new(back))?;
        if let Some(first) = validity.first.filter(|first| *first > date) {
            date = first;
        }
        let mut best: Option<DateTime<Utc>> = None;
        for _ in 0..SEARCH_DAYS {
            let midnight = date.and_time(NaiveTime::MIN);
            if let Some(best) = best {
                // No run of this date or later can come before the one found.
                let earliest = zone.boundary(midnight)
                    - TimeDelta::seconds(i64::from(MAX_OFFSET_SECONDS))
                    - TimeDelta::hours(3);
                if earliest > best {
                    break;
                }
            }
            if validity.last.is_some_and(|last| date > last) {
                break;
            }
            if validity.contains(date) {
                for interval in hours.intervals_on(date) {
                    let edge = match self.edge {
                        Edge::Opening => interval.start,
                        Edge::Closing => interval.end,
                    };
                    let at =
                        zone.boundary(midnight + TimeDelta::seconds(i64::from(edge) + self.offset));
                    if at > now && best.is_none_or(|best| at < best) {
                        best = Some(at);
                    }
                }
            }
            date = date.succ_opt()?;
        }
        best
    }

    /// "at opening + 10 min", "15 min before closing".
    pub fn in_words(&self) -> String {
        let edge = match self.edge {
            Edge::Opening => "opening",
            Edge::Closing => "closing",
        };
        let minutes =
            |seconds: i64| super::hours::words::amount(u32::try_from(seconds).unwrap_or(0));
        match self.offset {
            0 => format!("at each {edge}"),
            o if o > 0 => format!("{} after each {edge}", minutes(o)),
            o => format!("{} before each {edge}", minutes(-o)),
        }
    }
}

impl fmt::Display for AnchorSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expression)
    }
}
