//! What a report does to its rule, decided from the locked rule's schedule and counters and
//! the report alone, before anything is written: when the run ran, the next run, the
//! failure policy and whether an operator is needed.

use chrono::{DateTime, Utc};
use res_shared::schedule::{AfterRun, RuleSchedule, after_run, schedule_attention};
use res_shared::wire::SetNextRunTimeRequest;

/// How the reported run was held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// By a claim made at `claimed_at`.
    Claimed { claimed_at: DateTime<Utc> },
    /// Offline, without a claim (the report says when it started and ended).
    Offline,
    /// By nobody the cloud knows: the legacy form, which names no execution.
    Unknown,
}

/// The rule's state a report is judged against, at database time `now`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuleFacts {
    pub(crate) now: DateTime<Utc>,
    pub(crate) next_run_time: Option<DateTime<Utc>>,
    pub(crate) failures_in_a_row: u32,
    pub(crate) threshold: u32,
}

/// The decided effect of a report on its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunOutcome {
    /// The run's `(started, finished)`, when the report says.
    pub(crate) times: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// When the run counts as finished: the next run is computed from here.
    pub(crate) finished_at: DateTime<Utc>,
    pub(crate) policy: AfterRun,
    pub(crate) next_run_time: DateTime<Utc>,
    pub(crate) degenerate: bool,
    /// What is wrong with the schedule, when the fixed delay was used.
    pub(crate) problem: Option<String>,
    /// Why the rule needs an operator after this run, if it does.
    pub(crate) attention: Option<String>,
}

/// Decides what `request`, a finished run held as `held`, does to a rule with `schedule`.
pub(crate) fn run_outcome(
    schedule: &RuleSchedule,
    rule: RuleFacts,
    held: Held,
    request: &SetNextRunTimeRequest,
) -> RunOutcome {
    let failed = request.is_last_run_failed;
    // An offline run is scheduled from when it ended, as the runner did locally; a report
    // arriving late never moves the rule earlier than it already is.
    let offline = request.offline.as_ref().filter(|_| held == Held::Offline);
    // A claimed run is scheduled from when its runner says it ended (held between its
    // claim and now), so a report delivered late gets the answer it would have got on time.
    let times = match (offline, held) {
        (Some(o), _) => Some((o.started_at, o.finished_at.min(rule.now))),
        (None, Held::Claimed { claimed_at }) => reported_times(request, claimed_at, rule.now),
        (None, _) => None,
    };
    let finished_at = times.map_or(rule.now, |(_, finished)| finished);
    let policy = after_run(rule.failures_in_a_row, failed, rule.threshold);
    // The run was live from its claim (or its offline start): under buffer_one an
    // occurrence that came due meanwhile starts one more run at once.
    let started = match (held, offline) {
        (Held::Claimed { claimed_at }, _) => claimed_at,
        (Held::Offline, Some(o)) => o.started_at,
        _ => finished_at,
    };
    let next = schedule.reschedule_after(started, finished_at, policy.retry_soon);
    let attention =
        attention_reason(&policy, request.error.as_deref()).or_else(|| schedule_attention(&next));
    let next_run_time = match (offline, rule.next_run_time) {
        (Some(_), Some(current)) => next.next_run.next_run_time.max(current),
        _ => next.next_run.next_run_time,
    };
    RunOutcome {
        times,
        finished_at,
        policy,
        next_run_time,
        degenerate: next.next_run.degenerate,
        problem: next.problem,
        attention,
    }
}

/// A claimed run's `(started, finished)` as its report gives them, held inside what the
/// cloud knows: not before the claim, not after now (a runner's clock may run ahead), and
/// the start not after the end. `None` when the report gives no end (an older runner).
pub(crate) fn reported_times(
    request: &SetNextRunTimeRequest,
    claimed_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let finished = request.finished_at?.clamp(claimed_at, now.max(claimed_at));
    let started = request
        .started_at
        .unwrap_or(claimed_at)
        .clamp(claimed_at, finished);
    Some((started, finished))
}

/// Why the rule needs an operator for its failures, if it does: it failed too often in a
/// row (a schedule that cannot be used is the other reason, judged from the next run).
fn attention_reason(policy: &AfterRun, error: Option<&str>) -> Option<String> {
    if !policy.needs_attention {
        return None;
    }
    let last = error
        .and_then(|e| e.lines().next())
        .map(|line| line.chars().take(200).collect::<String>())
        .unwrap_or_else(|| "no error message".to_owned());
    let failed = res_shared::schedule::failures_in_words(policy.consecutive_failures);
    Some(format!(
        "{failed} (last: {last}); retrying on the schedule instead of every 5 minutes"
    ))
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveTime, TimeDelta};
    use res_shared::schedule::{OverlapPolicy, RuleTiming};
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    fn every_ten_minutes(overlap: OverlapPolicy) -> RuleSchedule {
        RuleSchedule::new(RuleTiming {
            id: Uuid::nil(),
            cron: Some("*/10 * * * *"),
            from: NaiveTime::from_hms_opt(8, 0, 0),
            to: NaiveTime::from_hms_opt(18, 0, 0),
            zone: Some("UTC"),
            jitter_seconds: 0,
            overlap,
            hours: None,
            spec: None,
        })
    }

    fn facts(now: &str) -> RuleFacts {
        RuleFacts {
            now: at(now),
            next_run_time: None,
            failures_in_a_row: 0,
            threshold: 3,
        }
    }

    fn report(body: serde_json::Value) -> SetNextRunTimeRequest {
        let mut base = json!({"branch_rule_id": Uuid::nil(), "is_last_run_failed": false});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), body.as_object()) {
            base.extend(extra.clone());
        }
        serde_json::from_value(base).expect("a report")
    }

    #[test]
    fn a_late_claimed_report_is_scheduled_from_when_its_run_ended() {
        let claimed_at = at("2026-03-02T09:00:00Z");
        let request = report(json!({
            "started_at": "2026-03-02T09:00:05Z", "finished_at": "2026-03-02T09:03:00Z"
        }));
        let held = Held::Claimed { claimed_at };
        let late = run_outcome(
            &every_ten_minutes(OverlapPolicy::Skip),
            facts("2026-03-02T09:47:00Z"),
            held,
            &request,
        );
        assert_eq!(late.finished_at, at("2026-03-02T09:03:00Z"));
        assert_eq!(late.next_run_time, at("2026-03-02T09:10:00Z"));
        assert_eq!(
            late.times,
            Some((at("2026-03-02T09:00:05Z"), at("2026-03-02T09:03:00Z")))
        );
        let ahead = report(json!({"finished_at": "2026-03-02T12:00:00Z"}));
        let clamped = run_outcome(
            &every_ten_minutes(OverlapPolicy::Skip),
            facts("2026-03-02T09:05:00Z"),
            held,
            &ahead,
        );
        assert_eq!(
            clamped.times,
            Some((claimed_at, at("2026-03-02T09:05:00Z"))),
            "a runner's clock running ahead is held to the cloud's now"
        );
    }

    #[test]
    fn buffer_one_counts_from_the_claim_and_offline_never_moves_the_rule_earlier() {
        let claimed_at = at("2026-03-02T09:00:00Z");
        let long = run_outcome(
            &every_ten_minutes(OverlapPolicy::BufferOne),
            facts("2026-03-02T09:14:00Z"),
            Held::Claimed { claimed_at },
            &report(json!({})),
        );
        assert_eq!(
            long.next_run_time,
            at("2026-03-02T09:14:00Z"),
            "09:10 came due"
        );
        let offline = report(json!({"offline": {
            "runner_id": "site", "started_at": "2026-03-02T09:00:00Z",
            "finished_at": "2026-03-02T09:01:00Z"
        }}));
        let rule = RuleFacts {
            next_run_time: Some(at("2026-03-02T09:30:00Z")),
            ..facts("2026-03-02T09:20:00Z")
        };
        let kept = run_outcome(
            &every_ten_minutes(OverlapPolicy::Skip),
            rule,
            Held::Offline,
            &offline,
        );
        assert_eq!(kept.next_run_time, at("2026-03-02T09:30:00Z"));
        assert_eq!(kept.finished_at, at("2026-03-02T09:01:00Z"));
    }

    #[test]
    fn the_threshold_s_failure_needs_an_operator_and_names_the_error() {
        let rule = RuleFacts {
            failures_in_a_row: 2,
            ..facts("2026-03-02T09:05:00Z")
        };
        let request = report(json!({"is_last_run_failed": true, "error": "camera 3 gone\nstack"}));
        let third = run_outcome(
            &every_ten_minutes(OverlapPolicy::Skip),
            rule,
            Held::Unknown,
            &request,
        );
        let reason = third.attention.expect("flagged");
        assert!(reason.contains("(last: camera 3 gone)"), "{reason}");
        assert_eq!(
            third.next_run_time,
            at("2026-03-02T09:10:00Z"),
            "on schedule"
        );
        let second = run_outcome(
            &every_ten_minutes(OverlapPolicy::Skip),
            RuleFacts {
                failures_in_a_row: 1,
                ..rule
            },
            Held::Unknown,
            &request,
        );
        assert_eq!(second.attention, None);
        assert_eq!(
            second.next_run_time,
            at("2026-03-02T09:05:00Z") + TimeDelta::minutes(5)
        );
    }
}
