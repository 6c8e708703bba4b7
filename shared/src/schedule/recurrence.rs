//! What a rule's stored schedule text says: a cron expression or an `@every` interval.
//! Both live in the same column, so everything that reads a cron reads an interval too.

use std::fmt;
use std::str::FromStr;

use super::anchor::AnchorSchedule;
use super::cron::CronSchedule;
use super::error::ScheduleError;
use super::interval::IntervalSchedule;

/// How a rule recurs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recurrence {
    /// A cron expression.
    Cron(CronSchedule),
    /// A fixed interval anchored to each window opening (or local midnight).
    Interval(IntervalSchedule),
    /// Once per opening interval, tied to its opening or closing.
    Anchor(AnchorSchedule),
}

impl Recurrence {
    /// Parses a stored schedule text: `@every …` is an interval, anything else a cron.
    pub fn parse(text: &str) -> Result<Recurrence, ScheduleError> {
        if AnchorSchedule::is_anchor(text) {
            AnchorSchedule::parse(text).map(Recurrence::Anchor)
        } else if IntervalSchedule::is_interval(text) {
            IntervalSchedule::parse(text).map(Recurrence::Interval)
        } else {
            CronSchedule::parse(text).map(Recurrence::Cron)
        }
    }

    /// The text as written (trimmed).
    pub fn expression(&self) -> &str {
        match self {
            Recurrence::Cron(cron) => cron.expression(),
            Recurrence::Interval(interval) => interval.expression(),
            Recurrence::Anchor(anchor) => anchor.expression(),
        }
    }
}

impl FromStr for Recurrence {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Recurrence, ScheduleError> {
        Recurrence::parse(text)
    }
}

impl From<CronSchedule> for Recurrence {
    fn from(cron: CronSchedule) -> Recurrence {
        Recurrence::Cron(cron)
    }
}

impl From<IntervalSchedule> for Recurrence {
    fn from(interval: IntervalSchedule) -> Recurrence {
        Recurrence::Interval(interval)
    }
}

impl fmt::Display for Recurrence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expression())
    }
}
