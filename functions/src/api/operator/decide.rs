//! What an operator's action on a rule does, decided from the rule's state before any write.

use chrono::{DateTime, Utc};
use res_shared::wire::ErrorCode;
use res_shared::wire::{ExecutionStatus, RuleAction};
use uuid::Uuid;

use crate::error::ApiError;

/// What the decision needs to know about the rule, read under its row lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleFacts {
    /// The branch rule, its branch and its rule definition are all active and not archived.
    pub(crate) enabled: bool,
    pub(crate) is_paused: bool,
    pub(crate) is_force_stopped: bool,
    pub(crate) run_requested: bool,
    pub(crate) needs_attention: bool,
    /// The rule's latest execution, when it still holds the rule: live (with an unexpired
    /// lease) or paused at a delay node.
    pub(crate) holder: Option<(Uuid, ExecutionStatus)>,
}

/// The change to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    RequestRun,
    Pause,
    /// Clear the pause, the force-stop and the need for attention, and take the next run
    /// from the schedule.
    Resume,
    /// Set the force-stop and stop whatever holds the rule.
    ForceStop {
        stop: Option<(Uuid, ExecutionStatus)>,
    },
}

/// Decides an action, or refuses it (409) with a code and a message saying why.
pub(crate) fn decide(action: RuleAction, facts: &RuleFacts) -> Result<Effect, ApiError> {
    match action {
        RuleAction::RunNow => {
            if let Some((id, status)) = facts.holder {
                let code = if status == ExecutionStatus::Paused {
                    ErrorCode::ExecutionPaused
                } else {
                    ErrorCode::Running
                };
                return Err(ApiError::conflict(
                    code,
                    format!(
                        "execution {id} of this rule is {}; cancel it first",
                        status.as_str()
                    ),
                ));
            }
            if facts.is_force_stopped {
                return Err(ApiError::conflict(
                    ErrorCode::ForceStopped,
                    "the rule is force-stopped; resume it first",
                ));
            }
            if facts.is_paused {
                return Err(ApiError::conflict(
                    ErrorCode::Paused,
                    "the rule is paused; resume it first",
                ));
            }
            if !facts.enabled {
                return Err(ApiError::conflict(
                    ErrorCode::Inactive,
                    "the rule, its branch or its rule definition is inactive or archived",
                ));
            }
            if facts.run_requested {
                return Err(ApiError::conflict(
                    ErrorCode::RunRequested,
                    "a run-now request of this rule is already waiting for a runner",
                ));
            }
            Ok(Effect::RequestRun)
        }
        RuleAction::Pause => Ok(Effect::Pause),
        RuleAction::Resume
            if facts.is_paused || facts.is_force_stopped || facts.needs_attention =>
        {
            Ok(Effect::Resume)
        }
        RuleAction::Resume => Err(ApiError::conflict(
            ErrorCode::NotPaused,
            "the rule is neither paused, force-stopped nor in need of attention",
        )),
        RuleAction::ForceStop => Ok(Effect::ForceStop { stop: facts.holder }),
    }
}

/// How an execution that holds its rule is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A running execution is asked to stop: its runner ends it (`cancelled`) at the next
    /// node.
    Request,
    /// A scheduled or paused execution has no runner at work: it is cancelled at once.
    Now,
}

impl Stop {
    pub(crate) fn of(status: ExecutionStatus) -> Stop {
        if status == ExecutionStatus::Running {
            Stop::Request
        } else {
            Stop::Now
        }
    }
}

/// Decides cancelling execution `id`, now in `status`: how it stops, or refused (409
/// `finished`) when it no longer holds its rule.
pub(crate) fn decide_cancel(id: Uuid, status: ExecutionStatus) -> Result<Stop, ApiError> {
    if !status.holds_rule() {
        return Err(ApiError::conflict(
            ErrorCode::Finished,
            format!("execution {id} already ended {}", status.as_str()),
        ));
    }
    Ok(Stop::of(status))
}

/// The holder of a rule from its latest execution at database time `now`.
pub(crate) fn holder(
    latest: Option<(Uuid, ExecutionStatus, DateTime<Utc>)>,
    now: DateTime<Utc>,
) -> Option<(Uuid, ExecutionStatus)> {
    latest.and_then(|(id, status, lease_expires_at)| {
        // A live status whose lease ran out is a crash nobody has recorded yet.
        let expired = status.is_live() && lease_expires_at <= now;
        (status.holds_rule() && !expired).then_some((id, status))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle() -> RuleFacts {
        RuleFacts {
            enabled: true,
            is_paused: false,
            is_force_stopped: false,
            run_requested: false,
            needs_attention: false,
            holder: None,
        }
    }

    fn code(result: Result<Effect, ApiError>) -> &'static str {
        match result {
            Err(ApiError::Conflict { code, .. }) => code.as_str(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn run_now_is_refused_while_anything_holds_or_blocks_the_rule() {
        assert_eq!(
            decide(RuleAction::RunNow, &idle()).ok(),
            Some(Effect::RequestRun)
        );
        let id = Uuid::new_v4();
        let running = RuleFacts {
            holder: Some((id, ExecutionStatus::Running)),
            ..idle()
        };
        assert_eq!(code(decide(RuleAction::RunNow, &running)), "running");
        let paused_run = RuleFacts {
            holder: Some((id, ExecutionStatus::Paused)),
            ..idle()
        };
        assert_eq!(
            code(decide(RuleAction::RunNow, &paused_run)),
            "execution_paused"
        );
        let paused = RuleFacts {
            is_paused: true,
            ..idle()
        };
        assert_eq!(code(decide(RuleAction::RunNow, &paused)), "paused");
        let stopped = RuleFacts {
            is_force_stopped: true,
            ..idle()
        };
        assert_eq!(code(decide(RuleAction::RunNow, &stopped)), "force_stopped");
        let inactive = RuleFacts {
            enabled: false,
            ..idle()
        };
        assert_eq!(code(decide(RuleAction::RunNow, &inactive)), "inactive");
        let waiting = RuleFacts {
            run_requested: true,
            ..idle()
        };
        assert_eq!(code(decide(RuleAction::RunNow, &waiting)), "run_requested");
    }

    #[test]
    fn resume_needs_a_pause_or_stop_and_force_stop_stops_the_holder() {
        assert_eq!(code(decide(RuleAction::Resume, &idle())), "not_paused");
        let paused = RuleFacts {
            is_paused: true,
            ..idle()
        };
        assert_eq!(
            decide(RuleAction::Resume, &paused).ok(),
            Some(Effect::Resume)
        );
        let failing = RuleFacts {
            needs_attention: true,
            ..idle()
        };
        assert_eq!(
            decide(RuleAction::Resume, &failing).ok(),
            Some(Effect::Resume)
        );
        let id = Uuid::new_v4();
        let running = RuleFacts {
            holder: Some((id, ExecutionStatus::Running)),
            ..idle()
        };
        assert_eq!(
            decide(RuleAction::ForceStop, &running).ok(),
            Some(Effect::ForceStop {
                stop: Some((id, ExecutionStatus::Running))
            })
        );
    }

    #[test]
    fn an_expired_lease_does_not_hold_the_rule_but_a_paused_execution_does() {
        let now = Utc::now();
        let id = Uuid::new_v4();
        let later = now + chrono::TimeDelta::seconds(30);
        let earlier = now - chrono::TimeDelta::seconds(30);
        assert_eq!(
            holder(Some((id, ExecutionStatus::Running, later)), now),
            Some((id, ExecutionStatus::Running))
        );
        assert_eq!(
            holder(Some((id, ExecutionStatus::Running, earlier)), now),
            None
        );
        assert_eq!(
            holder(Some((id, ExecutionStatus::Paused, earlier)), now),
            Some((id, ExecutionStatus::Paused))
        );
        assert_eq!(
            holder(Some((id, ExecutionStatus::Completed, later)), now),
            None
        );
    }

    #[test]
    fn a_cancel_asks_a_running_execution_ends_a_waiting_one_and_refuses_an_ended_one() {
        let id = Uuid::from_u128(7);
        assert_eq!(
            decide_cancel(id, ExecutionStatus::Running).ok(),
            Some(Stop::Request)
        );
        for waiting in [ExecutionStatus::Scheduled, ExecutionStatus::Paused] {
            assert_eq!(decide_cancel(id, waiting).ok(), Some(Stop::Now));
        }
        for ended in ExecutionStatus::ALL
            .into_iter()
            .filter(|status| !status.holds_rule())
        {
            let refused = decide_cancel(id, ended).expect_err("already ended");
            assert!(
                matches!(
                    refused,
                    ApiError::Conflict {
                        code: ErrorCode::Finished,
                        ..
                    }
                ),
                "{ended}: {refused:?}"
            );
        }
    }
}
