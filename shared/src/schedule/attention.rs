//! The failure policy: a rule that keeps failing stops retrying every five minutes, goes
//! back to its schedule and is marked as needing attention, until a run succeeds or an
//! operator resumes it.

use super::reschedule::Rescheduled;

/// Consecutive failures after which a rule needs attention, unless its brand rule says
/// otherwise.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 3;

/// What a finished run does to the rule's failure state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterRun {
    /// Failures in a row, this run included (0 after a success).
    pub consecutive_failures: u32,
    /// Schedule the failed-run retry (`now + 5 min`) rather than the next occurrence.
    pub retry_soon: bool,
    /// The rule needs an operator: it failed `threshold` times in a row.
    pub needs_attention: bool,
}

/// Failures in a row in words: "failed once", "failed 3 times in a row".
pub fn failures_in_words(consecutive_failures: u32) -> String {
    match consecutive_failures {
        1 => "failed once".to_owned(),
        n => format!("failed {n} times in a row"),
    }
}

/// The failure state after a run that `failed` (or not), given the failures in a row
/// before it and the rule's threshold (at least 1).
pub fn after_run(failures_before: u32, failed: bool, threshold: u32) -> AfterRun {
    if !failed {
        return AfterRun {
            consecutive_failures: 0,
            retry_soon: false,
            needs_attention: false,
        };
    }
    let consecutive_failures = failures_before.saturating_add(1);
    let needs_attention = consecutive_failures >= threshold.max(1);
    AfterRun {
        consecutive_failures,
        retry_soon: !needs_attention,
        needs_attention,
    }
}

/// Why a rule's schedule needs an operator, if it does: it cannot be used, or it never
/// fires inside the operation window. Said the same after a run and by the sweeper.
pub fn schedule_attention(next: &Rescheduled) -> Option<String> {
    // A rule whose dates ended has run its course: nothing for an operator to fix.
    if next.ended.is_some() {
        return None;
    }
    if let Some(problem) = &next.problem {
        return Some(format!("the schedule cannot be used: {problem}"));
    }
    next.next_run
        .degenerate
        .then(|| "the schedule never fires inside the operation window".to_owned())
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    #[test]
    fn failures_read_in_words() {
        assert_eq!(failures_in_words(1), "failed once");
        assert_eq!(failures_in_words(3), "failed 3 times in a row");
    }

    #[test]
    fn the_third_failure_in_a_row_stops_the_quick_retries_and_a_success_clears_it() {
        let first = after_run(0, true, 3);
        assert!(first.retry_soon && !first.needs_attention);
        let second = after_run(first.consecutive_failures, true, 3);
        assert!(second.retry_soon && !second.needs_attention);
        let third = after_run(second.consecutive_failures, true, 3);
        assert_eq!(
            third,
            AfterRun {
                consecutive_failures: 3,
                retry_soon: false,
                needs_attention: true
            }
        );
        let fourth = after_run(third.consecutive_failures, true, 3);
        assert!(
            !fourth.retry_soon && fourth.needs_attention,
            "stays on the schedule"
        );
        assert_eq!(after_run(7, false, 3).consecutive_failures, 0);
        assert!(after_run(0, true, 1).needs_attention, "a threshold of 1");
        assert!(after_run(0, true, 0).needs_attention, "0 counts as 1");
        assert_eq!(after_run(u32::MAX, true, 3).consecutive_failures, u32::MAX);
    }

    #[test]
    fn a_rule_whose_dates_ended_needs_nobody() {
        use crate::schedule::{OverlapPolicy, RuleSchedule, RuleTiming, TimingSpec};
        let spec: TimingSpec =
            serde_json::from_value(serde_json::json!({"valid_until": "2026-03-13"}))
                .expect("a timing");
        let rule = RuleSchedule::new(RuleTiming {
            id: uuid::Uuid::from_u128(1),
            cron: Some("0 * * * *"),
            from: None,
            to: None,
            zone: Some("UTC"),
            jitter_seconds: 0,
            overlap: OverlapPolicy::Skip,
            hours: None,
            spec: Some(&spec),
        });
        let during = rule.reschedule("2026-03-10T10:30:00Z".parse().expect("t"), false);
        assert_eq!(during.ended, None);
        let after = rule.reschedule("2026-03-14T00:30:00Z".parse().expect("t"), false);
        assert_eq!(after.ended, chrono::NaiveDate::from_ymd_opt(2026, 3, 13));
        assert!(after.problem.is_some(), "no run is left");
        assert_eq!(
            schedule_attention(&after),
            None,
            "ended, not needing attention"
        );
    }

    #[test]
    fn unusable_and_never_firing_schedules_need_attention() {
        let now = chrono::Utc::now();
        let bad = super::super::reschedule(
            Some("61 * * * *"),
            None,
            None,
            TimeDelta::zero(),
            now,
            false,
        );
        let reason = schedule_attention(&bad).unwrap_or_default();
        assert!(
            reason.starts_with("the schedule cannot be used: "),
            "{reason}"
        );
        let window = super::super::OperationWindow::parse(Some("08:00"), Some("09:00"))
            .ok()
            .flatten();
        let never = super::super::reschedule(
            Some("30 12 * * *"),
            window,
            None,
            TimeDelta::zero(),
            now,
            false,
        );
        assert_eq!(
            schedule_attention(&never).as_deref(),
            Some("the schedule never fires inside the operation window")
        );
        let fine = super::super::reschedule(
            Some("*/30 * * * *"),
            None,
            None,
            TimeDelta::zero(),
            now,
            false,
        );
        assert_eq!(schedule_attention(&fine), None);
    }
}
