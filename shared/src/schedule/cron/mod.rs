//! Cron expressions: crontab syntax with croner's day extensions (`L`, `W`, `#`, `?`, a
//! start with a step), parsed with croner, searched over bitmasks.

mod day_specials;
mod fields;
mod occurrence;
pub(super) mod syntax;

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, Utc};

pub(crate) use fields::{FieldSets, SECONDS_PER_DAY, field_mask};

use super::error::ScheduleError;
use super::zone::Zone;

/// A parsed cron expression: 5 fields, 6 with leading seconds, 7 with seconds and a
/// trailing year (Quartz), or an `@` macro.
///
/// Day-of-month and day-of-week are ORed when both are restricted; weekday 0 and 7 are
/// Sunday. DST follows the Open Cron Pattern Specification, as croner does: a fixed-time
/// expression (one plain value each for second, minute and hour) that falls in a
/// spring-forward gap runs at the first instant after the gap and runs once in a
/// fall-back overlap; any other expression skips the gap and runs in both passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSchedule {
    expression: String,
    sets: FieldSets,
}

impl CronSchedule {
    /// Parses an expression; the error names the field and what is wrong with it.
    pub fn parse(expression: &str) -> Result<CronSchedule, ScheduleError> {
        let invalid = |reason: String| ScheduleError::Cron {
            expression: expression.to_owned(),
            reason,
        };
        let fields = syntax::normalize(expression).map_err(invalid)?;
        let sets = FieldSets::from_fields(&fields).map_err(invalid)?;
        Ok(CronSchedule {
            expression: expression.trim().to_owned(),
            sets,
        })
    }

    /// The expression as written (trimmed).
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether this is a fixed-time expression in the OCPS sense (see the type docs).
    pub fn is_fixed_time(&self) -> bool {
        self.sets.is_fixed_time()
    }

    /// Whether a wall-clock time matches every field.
    pub fn matches(&self, wall: NaiveDateTime) -> bool {
        self.sets.date_matches(wall.date()) && self.sets.time_matches(wall.time())
    }

    /// Whether any calendar date can match (`0 0 30 2 *` never does).
    pub fn can_ever_match(&self) -> bool {
        self.sets.dates_possible()
    }

    /// The first occurrence strictly after `now`, read in `zone`; `None` when the
    /// expression never matches within the next 29 years.
    pub fn next_after(&self, now: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
        occurrence::next_after(&self.sets, zone, now)
    }

    pub(crate) fn sets(&self) -> &FieldSets {
        &self.sets
    }
}

impl FromStr for CronSchedule {
    type Err = ScheduleError;

    fn from_str(expression: &str) -> Result<CronSchedule, ScheduleError> {
        CronSchedule::parse(expression)
    }
}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expression)
    }
}
