//! Claims the cloud has forgotten. A database failover that promotes a replica behind the
//! primary loses the commits it had not yet received: a claim made just before it, with
//! whatever the run had recorded. The run still happened (or is still happening) here, so
//! it is not stopped; its heartbeats are dropped, its violations travel with its report,
//! and the report, refused as naming an unknown execution, is sent again as a run without
//! a claim (an offline run, under the same execution id), which the functions record
//! without moving the rule's next run earlier (docs/faults.md, database failover).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use res_shared::wire::{OfflineRun, OfflineViolation, SetNextRunTimeRequest};
use uuid::Uuid;

/// Violations of claimed runs whose reports are not delivered yet, by execution: what the
/// report must carry should the cloud have forgotten the claim. Kept in memory only (a
/// restart before delivery loses them; the run itself is still recorded).
#[derive(Debug, Default)]
pub(crate) struct RunViolations(Mutex<HashMap<Uuid, Vec<OfflineViolation>>>);

impl RunViolations {
    /// Keeps a finished run's violations until its report is delivered or refused.
    pub(crate) fn keep(&self, execution_id: Uuid, violations: Vec<OfflineViolation>) {
        if !violations.is_empty() {
            self.lock().insert(execution_id, violations);
        }
    }

    /// The run's violations, no longer kept.
    pub(crate) fn take(&self, execution_id: Uuid) -> Vec<OfflineViolation> {
        self.lock().remove(&execution_id).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Vec<OfflineViolation>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A claimed run's report as the report of a run without a claim, by `runner_id`, with its
/// `violations`; `None` for a report that is not a claimed run's. Times the report leaves
/// out (an older outbox) are `now`.
pub(crate) fn as_offline_run(
    request: &SetNextRunTimeRequest,
    runner_id: &str,
    violations: Vec<OfflineViolation>,
    now: DateTime<Utc>,
) -> Option<SetNextRunTimeRequest> {
    if request.offline.is_some() || request.execution_id.is_none() {
        return None;
    }
    let finished_at = request.finished_at.unwrap_or(now);
    let started_at = request.started_at.unwrap_or(finished_at).min(finished_at);
    Some(SetNextRunTimeRequest {
        offline: Some(OfflineRun {
            runner_id: runner_id.to_owned(),
            started_at,
            finished_at,
            violations,
        }),
        started_at: None,
        finished_at: None,
        ..request.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    fn legacy_report() -> SetNextRunTimeRequest {
        serde_json::from_value(serde_json::json!({
            "branch_rule_id": Uuid::new_v4(), "is_last_run_failed": false
        }))
        .expect("a report")
    }

    fn claimed_report() -> SetNextRunTimeRequest {
        SetNextRunTimeRequest {
            execution_id: Some(Uuid::new_v4()),
            claim_token: Some("token".into()),
            started_at: Some(at("2026-11-27T10:00:01Z")),
            finished_at: Some(at("2026-11-27T10:00:09Z")),
            ..legacy_report()
        }
    }

    fn violation(key: &str) -> OfflineViolation {
        OfflineViolation {
            kind: "queue".into(),
            details: serde_json::json!({}),
            idempotency_key: key.into(),
        }
    }

    #[test]
    fn a_claimed_runs_report_becomes_an_offline_run_with_its_times_and_violations() {
        let report = claimed_report();
        let now = at("2026-11-27T10:05:00Z");
        let offline = as_offline_run(&report, "site-1", vec![violation("a")], now)
            .expect("a claimed run's report");
        assert_eq!(offline.execution_id, report.execution_id);
        assert_eq!(offline.claim_token, report.claim_token);
        assert_eq!((offline.started_at, offline.finished_at), (None, None));
        let run = offline.offline.expect("offline");
        assert_eq!(run.runner_id, "site-1");
        assert_eq!(run.started_at, at("2026-11-27T10:00:01Z"));
        assert_eq!(run.finished_at, at("2026-11-27T10:00:09Z"));
        assert_eq!(run.violations, vec![violation("a")]);
    }

    #[test]
    fn a_report_without_times_ends_now_and_offline_reports_stay_as_they_are() {
        let now = at("2026-11-27T10:05:00Z");
        let bare = SetNextRunTimeRequest {
            started_at: None,
            finished_at: None,
            ..claimed_report()
        };
        let run = as_offline_run(&bare, "site-1", Vec::new(), now)
            .and_then(|r| r.offline)
            .expect("offline");
        assert_eq!((run.started_at, run.finished_at), (now, now));
        let offline = as_offline_run(&bare, "site-1", Vec::new(), now).expect("offline");
        assert!(as_offline_run(&offline, "site-1", Vec::new(), now).is_none());
        assert!(as_offline_run(&legacy_report(), "site-1", Vec::new(), now).is_none());
    }

    #[test]
    fn violations_are_kept_until_taken() {
        let kept = RunViolations::default();
        let id = Uuid::new_v4();
        kept.keep(id, vec![violation("a"), violation("b")]);
        kept.keep(Uuid::new_v4(), Vec::new());
        assert_eq!(kept.take(id).len(), 2);
        assert!(kept.take(id).is_empty());
        assert!(kept.lock().is_empty());
    }
}
