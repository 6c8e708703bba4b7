//! How a report meets the execution it names: a pure decision over the locked row.

use res_shared::wire::{ExecutionStatus, SetNextRunTimeResponse};

use crate::db::executions::ExecutionRow;

/// What a superseded report leaves in `executions.report` instead of an answer: the run's
/// status and results are its own, but the rule was not rescheduled by it.
pub(crate) fn superseded_note() -> serde_json::Value {
    serde_json::json!({"superseded": true})
}

/// How a report meets its execution.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Judgement {
    /// The execution is live and the token owns it: finish it.
    Finish,
    /// The same execution was reported before: answer as then, change nothing.
    Replay(Box<SetNextRunTimeResponse>),
    /// The lease ran out before this report arrived (the runner lost the functions, not
    /// its work): keep what it reports.
    Late,
    /// A late report stored before, after a retry had taken the rule: answer as then.
    Superseded,
    /// The token does not own the execution any more.
    Stale(String),
}

/// Judges a report carrying `claim_token` against the execution it names.
pub(crate) fn judge(execution: &ExecutionRow, claim_token: &str) -> Judgement {
    let id = execution.id;
    if execution.claim_token != claim_token {
        return Judgement::Stale(format!("the claim token does not own execution {id}"));
    }
    if execution.status.is_live() {
        return Judgement::Finish;
    }
    match execution
        .report
        .as_ref()
        .and_then(|r| serde_json::from_value::<SetNextRunTimeResponse>(r.clone()).ok())
    {
        Some(answer) => Judgement::Replay(Box::new(answer)),
        None if execution.report.as_ref() == Some(&superseded_note()) => Judgement::Superseded,
        None if execution.report.is_none() && execution.status == ExecutionStatus::Crashed => {
            Judgement::Late
        }
        None => Judgement::Stale(format!(
            "execution {id} is already {} and was not finished by a report",
            execution.status
        )),
    }
}

/// A late report (its execution crashed and took no report) meets the rule's latest
/// execution: it is the rule's run unless a retry took the rule since.
pub(crate) fn late_is_superseded(execution: &ExecutionRow, latest: Option<&ExecutionRow>) -> bool {
    latest.is_some_and(|latest| latest.id != execution.id)
}

/// Why the legacy form (no execution named) is refused, if it is: it finishes no
/// execution, so it must not reschedule a rule under a run that still holds it (that run's
/// runner would go on heartbeating a run the rule no longer knows).
pub(crate) fn legacy_refusal(latest: Option<&ExecutionRow>) -> Option<String> {
    latest.filter(|e| e.status.holds_rule()).map(|live| {
        format!(
            "execution {} of this rule is {}; it is finished by its own report \
             (execution_id and claim_token), not by the legacy form",
            live.id, live.status
        )
    })
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;

    fn execution(status: &str, report: Option<serde_json::Value>) -> ExecutionRow {
        ExecutionRow {
            id: Uuid::new_v4(),
            branch_rule_id: Uuid::new_v4(),
            status: ExecutionStatus::parse(status).expect("a status name"),
            attempt: 1,
            claim_token: "mine".to_owned(),
            lease_expires_at: Utc::now(),
            report,
            resume_at: None,
            root_id: Uuid::new_v4(),
            runner_id: "r".to_owned(),
            offline: false,
            scheduled_at: Utc::now(),
        }
    }

    #[test]
    fn a_live_execution_with_its_token_is_finished() {
        assert_eq!(
            judge(&execution("running", None), "mine"),
            Judgement::Finish
        );
        assert_eq!(
            judge(&execution("scheduled", None), "mine"),
            Judgement::Finish
        );
    }

    #[test]
    fn another_token_is_stale() {
        assert!(matches!(
            judge(&execution("running", None), "theirs"),
            Judgement::Stale(_)
        ));
    }

    #[test]
    fn a_reported_execution_replays_its_answer() {
        let answer = SetNextRunTimeResponse {
            branch_rule_id: Uuid::new_v4(),
            next_run_time: Utc::now(),
            last_run_time: Utc::now(),
            is_currently_running: false,
            run_count: 3,
            degenerate: false,
            warnings: vec![],
            revision: Some(7),
        };
        let stored = serde_json::to_value(&answer).expect("serialisable");
        assert_eq!(
            judge(&execution("completed", Some(stored)), "mine"),
            Judgement::Replay(Box::new(answer))
        );
    }

    #[test]
    fn a_crashed_execution_takes_its_late_report_only_with_its_token() {
        assert_eq!(judge(&execution("crashed", None), "mine"), Judgement::Late);
        assert!(matches!(
            judge(&execution("crashed", None), "theirs"),
            Judgement::Stale(_)
        ));
        assert!(matches!(
            judge(&execution("paused", None), "mine"),
            Judgement::Stale(_)
        ));
    }

    #[test]
    fn a_superseded_report_delivered_again_is_superseded_again_only_with_its_token() {
        for status in ["completed", "failed"] {
            assert_eq!(
                judge(&execution(status, Some(superseded_note())), "mine"),
                Judgement::Superseded
            );
            assert!(matches!(
                judge(&execution(status, Some(superseded_note())), "theirs"),
                Judgement::Stale(_)
            ));
        }
    }

    #[test]
    fn a_late_report_is_superseded_only_by_another_execution() {
        let late = execution("crashed", None);
        let retry = execution("scheduled", None);
        assert!(!late_is_superseded(&late, Some(&late)));
        assert!(!late_is_superseded(&late, None));
        assert!(late_is_superseded(&late, Some(&retry)));
    }

    #[test]
    fn the_legacy_form_is_refused_only_under_a_run_that_holds_the_rule() {
        for holding in ["scheduled", "running", "paused"] {
            let live = execution(holding, None);
            let refusal = legacy_refusal(Some(&live)).expect("refused");
            assert!(refusal.contains(&live.id.to_string()) && refusal.contains(holding));
        }
        for ended in ["completed", "failed", "crashed", "cancelled"] {
            assert_eq!(
                legacy_refusal(Some(&execution(ended, None))),
                None,
                "{ended}"
            );
        }
        assert_eq!(legacy_refusal(None), None);
    }
}
