//! Opening hours as documents and plans write them: weekdays (or ranges of them) to
//! intervals `HH:MM-HH:MM`, and special days listed by date. [`super::OpeningHours`] is the
//! parsed form every schedule question reads.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// A branch's opening hours as written: its week and its special days.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HoursSpec {
    /// `mon`…`sun`, or a range such as `sat-thu` (wrapping past Sunday), to intervals such
    /// as `09:00-12:00`; an interval whose end is not after its start ends the next day
    /// (`20:00-02:00`), and `24:00` is midnight at the end. A weekday not named is closed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub week: BTreeMap<String, Vec<String>>,
    /// Dates whose hours replace the week's: closed (no `hours`) or their own intervals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DaySpec>,
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

impl HoursSpec {
    /// Whether the spec says nothing (no week, no days): a branch with no opening hours.
    pub fn is_empty(&self) -> bool {
        self.week.is_empty() && self.days.is_empty()
    }
}
