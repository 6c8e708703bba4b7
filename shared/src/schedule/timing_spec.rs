//! What a branch rule adds to its cron or interval, as documents, rows and plans carry it:
//! a window from its branch's opening hours or a week of its own, validity dates, and what
//! happens to runs missed while RES was down.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::hours::{HoursError, HoursSpec, OpeningHours};
use super::timetable::{MAX_OFFSET_SECONDS, Restriction, Validity};
use super::window::OperationWindow;

/// A branch rule's timing beyond its cron and daily window; all of it optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TimingSpec {
    /// Run only while the branch is open (widened by the offsets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub while_open: Option<WhileOpen>,
    /// The rule's own window by weekday (`sun-thu: ["08:00-18:00"]`) instead of one daily
    /// window; weekdays not named are closed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub week: BTreeMap<String, Vec<String>>,
    /// The first local date the rule runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = Date))]
    pub valid_from: Option<NaiveDate>,
    /// The last local date the rule runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = Date))]
    pub valid_until: Option<NaiveDate>,
    /// What happens to a run missed while neither the runner nor the cloud could make it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUp>,
}

/// "While open": from `before_seconds` ahead of each opening to `after_seconds` past each
/// closing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WhileOpen {
    /// Seconds before each opening (at most 12 h).
    #[serde(default)]
    pub before_seconds: u32,
    /// Seconds after each closing (at most 12 h).
    #[serde(default)]
    pub after_seconds: u32,
}

/// A missed run's fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum CatchUp {
    /// Missed runs are not made; the rule waits for its next time.
    Skip,
    /// One run when RES is back, if the latest missed time is at most this old.
    Once {
        /// The oldest missed time still worth a run.
        max_age_seconds: u32,
    },
}

impl TimingSpec {
    /// Whether the spec changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == TimingSpec::default()
    }

    /// Whether a runner must understand opening hours to honour it (anything but
    /// `catch_up`, which an older runner treats as it always did).
    pub fn needs_hours(&self) -> bool {
        self.while_open.is_some()
            || !self.week.is_empty()
            || self.valid_from.is_some()
            || self.valid_until.is_some()
    }

    /// The validity dates.
    pub fn validity(&self) -> Validity {
        Validity {
            first: self.valid_from,
            last: self.valid_until,
        }
    }

    /// The restriction by time of day: opening hours (the branch's `hours`, closed
    /// without), the rule's own week, or its daily `window`; the first problem is named.
    pub fn restriction(
        &self,
        window: Option<OperationWindow>,
        hours: Option<&Arc<OpeningHours>>,
    ) -> Result<Option<Restriction>, HoursError> {
        self.check()?;
        if let Some(open) = self.while_open {
            return Ok(Some(Restriction::Hours {
                hours: hours.cloned().unwrap_or_default(),
                before: open.before_seconds,
                after: open.after_seconds,
            }));
        }
        if !self.week.is_empty() {
            let week = OpeningHours::from_spec(&HoursSpec {
                week: self.week.clone(),
                ..HoursSpec::default()
            })?;
            return Ok(Some(Restriction::Hours {
                hours: Arc::new(week),
                before: 0,
                after: 0,
            }));
        }
        Ok(window.map(Restriction::Daily))
    }

    /// The spec's own consistency: offsets in range, dates in order, one kind of window.
    pub fn check(&self) -> Result<(), HoursError> {
        let invalid = |field: &str, reason: String| HoursError {
            field: field.to_owned(),
            reason,
        };
        if let Some(open) = self.while_open {
            for (field, seconds) in [
                ("while_open.before_seconds", open.before_seconds),
                ("while_open.after_seconds", open.after_seconds),
            ] {
                if seconds > MAX_OFFSET_SECONDS {
                    return Err(invalid(
                        field,
                        format!("{seconds} s is more than 12 h ({MAX_OFFSET_SECONDS} s)"),
                    ));
                }
            }
            if !self.week.is_empty() {
                return Err(invalid(
                    "week",
                    "give either while_open or a week of the rule's own, not both".to_owned(),
                ));
            }
        }
        if let (Some(first), Some(last)) = (self.valid_from, self.valid_until)
            && last < first
        {
            return Err(invalid(
                "valid_until",
                format!("{last} is before valid_from {first}"),
            ));
        }
        Ok(())
    }
}
