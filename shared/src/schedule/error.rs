//! What can be wrong with a schedule's inputs.

/// An input to the schedule rules was unusable; the message names the input and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error("invalid cron '{expression}': {reason}")]
    Cron {
        /// The expression as given.
        expression: String,
        /// What is wrong with it, naming the field.
        reason: String,
    },
    /// The `@every` interval schedule does not parse.
    #[error("invalid interval '{expression}': {reason}")]
    Interval {
        /// The expression as given.
        expression: String,
        /// What is wrong with it, naming the part.
        reason: String,
    },
    /// The `@opening` / `@closing` schedule does not parse.
    #[error("invalid opening-hours schedule '{expression}': {reason}")]
    Anchor {
        /// The expression as given.
        expression: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An `@opening` / `@closing` schedule on a branch with no opening hours.
    #[error("'{expression}' runs at opening or closing, but the branch has no opening hours")]
    NoOpeningHours {
        /// The expression as given.
        expression: String,
    },
    /// A window boundary is not a wall-clock time.
    #[error("invalid {field} '{value}': {reason}")]
    WindowTime {
        /// Which boundary: `from` or `to`.
        field: &'static str,
        /// The text as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Only one end of the operation window was given.
    #[error("operation window needs both from and to, but only {given} was given")]
    HalfWindow {
        /// The boundary that was given.
        given: &'static str,
    },
    /// The time zone is not an IANA name the tz database knows.
    #[error("unknown time zone '{0}' (expected an IANA name such as Asia/Riyadh)")]
    TimeZone(String),
    /// Without a window to fall back on, the expression can never fire.
    #[error(
        "cron '{expression}' never matches any date (e.g. 30 February) and there is no operation window to fall back on"
    )]
    NeverMatches {
        /// The expression as given.
        expression: String,
    },
    /// The next run lies beyond the calendar range the rules can represent.
    #[error("no run time found for schedule '{expression}' after {after}")]
    OutOfRange {
        /// The expression as given.
        expression: String,
        /// The instant the search started from (RFC 3339).
        after: String,
    },
}
