//! Rule actions at one branch, or at every branch of one of `fleet`'s attention groups with
//! one reason. A group action calls the same function per branch as a single action does, so
//! each refusal is that function's, listed by branch; an unreachable service stops it.

use chrono::{DateTime, TimeDelta, Utc};
use res_client::{CloudError, FunctionsClient};
use res_shared::untrusted::Untrusted;
use res_shared::wire::{
    self, AcknowledgeRequest, AcknowledgeResponse, AttentionKind, FleetSummaryRequest,
    RuleActionResponse, RuleSummary,
};
use serde::Serialize;
use uuid::Uuid;

use crate::cli::{GroupableAction, RuleAction};
use crate::render;
use crate::resolve::{self, Unresolved};

/// What is asked of each branch rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    Rule(wire::RuleAction),
    Acknowledge { hours: u32 },
}

/// A function's answer to one action.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Answer {
    Rule(RuleActionResponse),
    Acknowledged(AcknowledgeResponse),
}

impl Act {
    /// The past tense a result is printed with.
    fn done(self) -> &'static str {
        match self {
            Act::Rule(wire::RuleAction::RunNow) => "run requested",
            Act::Rule(wire::RuleAction::Pause) => "paused",
            Act::Rule(wire::RuleAction::Resume) => "resumed",
            Act::Rule(wire::RuleAction::ForceStop) => "force-stopped",
            Act::Acknowledge { .. } => "acknowledged",
        }
    }

    async fn call(
        self,
        client: &FunctionsClient,
        branch_rule_id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Answer, CloudError> {
        let reason = reason.to_owned();
        Ok(match self {
            Act::Rule(action) => {
                Answer::Rule(client.rule_action(action, branch_rule_id, &reason).await?)
            }
            Act::Acknowledge { hours } => Answer::Acknowledged(
                client
                    .call(&AcknowledgeRequest {
                        branch_rule_id,
                        reason,
                        until: now + TimeDelta::hours(i64::from(hours)),
                    })
                    .await?,
            ),
        })
    }
}

/// Runs the action at the rule's branch, or at its group's branches with `--group`.
pub(crate) async fn run(
    client: &FunctionsClient,
    act: Act,
    asked: &GroupableAction,
    json: bool,
    now: DateTime<Utc>,
) -> Result<String, Unresolved> {
    match asked.group {
        Some(kind) => at_group(client, act, &asked.action, kind, json, now).await,
        None => one(client, act, &asked.action, json, now).await,
    }
}

/// Runs the action at the one branch rule `asked` names.
pub(crate) async fn one(
    client: &FunctionsClient,
    act: Act,
    asked: &RuleAction,
    json: bool,
    now: DateTime<Utc>,
) -> Result<String, Unresolved> {
    let id = resolve::rule(client, &asked.rule).await?;
    let answer = act.call(client, id, &asked.reason, now).await?;
    crate::commands::emit(json, &answer, || match &answer {
        Answer::Rule(rule) => render::rule_action(act.done(), rule, now),
        Answer::Acknowledged(ack) => format!(
            "acknowledged: {}\n{}\n",
            ack.branch_rule_id,
            ack.acknowledged.describe(now)
        ),
    })
}

/// What a group action did, branch by branch.
#[derive(Debug, Serialize)]
struct GroupOutcome {
    action: &'static str,
    rule_id: Uuid,
    rule: String,
    kind: AttentionKind,
    done: Vec<Branch>,
    refused: Vec<Refusal>,
    /// Why the action stopped before every branch was asked (the service stopped answering).
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<String>,
}

#[derive(Debug, Serialize)]
struct Branch {
    branch_rule_id: Uuid,
    branch_name: String,
}

#[derive(Debug, Serialize)]
struct Refusal {
    #[serde(flatten)]
    branch: Branch,
    status: u16,
    code: String,
    message: String,
}

async fn at_group(
    client: &FunctionsClient,
    act: Act,
    asked: &RuleAction,
    kind: AttentionKind,
    json: bool,
    now: DateTime<Utc>,
) -> Result<String, Unresolved> {
    let fleet = client.call(&FleetSummaryRequest::default()).await?;
    let wanted = asked.rule.rule.trim();
    let by_id = Uuid::parse_str(wanted).ok();
    let groups: Vec<_> = fleet
        .attention
        .iter()
        .filter(|g| {
            g.kind == kind && (by_id == Some(g.rule_id) || g.rule_name.eq_ignore_ascii_case(wanted))
        })
        .collect();
    let mut rules: Vec<(Uuid, String)> = groups
        .iter()
        .map(|g| (g.rule_id, format!("{} of {}", g.rule_name, g.brand_name)))
        .collect();
    rules.sort();
    rules.dedup();
    let (rule_id, rule) = match rules.as_slice() {
        [] => {
            return Err(Unresolved::NotFound(format!(
                "no rule '{wanted}' is in a {} group",
                kind.as_str()
            )));
        }
        [one] => one.clone(),
        many => {
            return Err(Unresolved::Ambiguous(format!(
                "'{wanted}' is a rule of {} brands: {}; give the rule id",
                many.len(),
                many.iter()
                    .map(|(id, name)| format!("{name} ({id})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    };
    // An acknowledged part of the group is listed apart by `fleet`; the action takes both.
    let mut branches: Vec<&RuleSummary> = groups.iter().flat_map(|g| &g.branches).collect();
    branches.sort_by(|a, b| {
        (&a.branch_name, a.branch_rule_id).cmp(&(&b.branch_name, b.branch_rule_id))
    });
    branches.dedup_by_key(|b| b.branch_rule_id);
    let mut outcome = GroupOutcome {
        action: act.done(),
        rule_id,
        rule,
        kind,
        done: Vec::new(),
        refused: Vec::new(),
        stopped: None,
    };
    for summary in branches {
        let branch = Branch {
            branch_rule_id: summary.branch_rule_id,
            branch_name: summary.branch_name.clone(),
        };
        match act
            .call(client, branch.branch_rule_id, &asked.reason, now)
            .await
        {
            Ok(_) => outcome.done.push(branch),
            // A malformed reason is refused alike at every branch: said once, nothing done.
            Err(
                error @ CloudError::Rejected {
                    status: 400 | 422, ..
                },
            ) if outcome.done.is_empty() && outcome.refused.is_empty() => {
                return Err(Unresolved::Cloud(error));
            }
            Err(CloudError::Rejected {
                status,
                code,
                message,
                ..
            }) => outcome.refused.push(Refusal {
                branch,
                status,
                code,
                message,
            }),
            Err(error) => {
                outcome.stopped = Some(error.to_string());
                break;
            }
        }
    }
    let output = crate::commands::emit(json, &outcome, || outcome.text())?;
    match (outcome.refused.len(), &outcome.stopped) {
        (0, None) => Ok(output),
        (refused, stopped) => Err(Unresolved::Partly {
            output,
            why: stopped
                .clone()
                .unwrap_or_else(|| format!("{refused} of the group's branches refused")),
            unreachable: stopped.is_some(),
        }),
    }
}

impl GroupOutcome {
    /// "paused at 14 of 15 branches: Queue length of Acme (needs_attention)", then each
    /// refusal by branch.
    fn text(&self) -> String {
        let asked = self.done.len() + self.refused.len();
        let mut out = format!(
            "{} at {} of {} branches: {} ({})\n",
            self.action,
            self.done.len(),
            asked,
            Untrusted(&self.rule),
            self.kind.as_str()
        );
        for refusal in &self.refused {
            out.push_str(&format!(
                "refused at {} ({}): {} {}: {}\n",
                Untrusted(&refusal.branch.branch_name),
                refusal.branch.branch_rule_id,
                refusal.status,
                Untrusted(&refusal.code),
                Untrusted(&refusal.message)
            ));
        }
        if let Some(why) = &self.stopped {
            out.push_str(&format!("stopped before the rest: {}\n", Untrusted(why)));
        }
        out
    }
}
