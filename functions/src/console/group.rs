//! Group actions from the fleet page: run now, pause, resume or acknowledge one brand rule
//! at every branch of an attention group, with one reason. Each branch goes through the operator
//! function as a single action would, so each refusal is the function's, listed by branch.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::response::{IntoResponse, Response};
use chrono::{TimeDelta, Utc};
use res_shared::wire::ErrorCode;
use res_shared::wire::{AcknowledgeRequest, RuleAction};
use serde::Deserialize;
use uuid::Uuid;

use super::error::ConsoleError;
use super::fleet;
use super::rule;
use super::session::Signed;
use crate::api::operator::acknowledge;
use crate::api::operator::rules;
use crate::api::operator::rules::MAX_REASON_CHARS;
use crate::api::require_text;
use crate::auth::Actor;
use crate::error::ApiError;
use crate::state::AppState;

/// Most branch rules one group action takes (a page's group lists at most this many).
pub(super) const MAX_GROUP: usize = 1_000;

#[derive(Deserialize)]
pub(super) struct GroupForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    reason: String,
    /// The group's branch rules as the page listed them, comma-separated.
    #[serde(default)]
    rules: String,
}

/// What a group action did: how many took, and each refusal by branch rule.
pub(super) struct GroupOutcome {
    pub(super) label: &'static str,
    pub(super) done: usize,
    pub(super) refused: Vec<(Uuid, String)>,
}

pub(super) async fn act(
    State(state): State<AppState>,
    signed: Signed,
    form: Result<Form<GroupForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    signed.check_csrf(&form.csrf)?;
    let action = GroupAction::parse(&form.action).ok_or_else(|| {
        ApiError::unprocessable(
            ErrorCode::InvalidField,
            "action: one of run-now, pause, resume, ack-1h, ack-1d",
        )
    })?;
    // Everything is checked before the first rule is touched.
    require_text("reason", &form.reason, MAX_REASON_CHARS)?;
    let ids = parse_rules(&form.rules)?;
    let actor = Actor::check(signed.caller.clone())?;
    let mut outcome = GroupOutcome {
        label: action.label(),
        done: 0,
        refused: Vec::new(),
    };
    let until = Utc::now();
    for id in ids {
        let done = match action {
            GroupAction::Rule(action) => rules::perform(&state, &actor, action, id, &form.reason)
                .await
                .map(drop),
            GroupAction::Acknowledge(hours) => {
                let request = AcknowledgeRequest {
                    branch_rule_id: id,
                    reason: form.reason.clone(),
                    until: until + TimeDelta::hours(hours),
                };
                acknowledge::acknowledge_for(&state, &actor, request)
                    .await
                    .map(drop)
            }
        };
        match done {
            Ok(_) => outcome.done += 1,
            Err(error) => {
                error.log_cause();
                let (_, detail) = error.detail();
                outcome.refused.push((id, detail.message));
            }
        }
    }
    let page = fleet::render(&state, &signed, Some(outcome)).await?;
    Ok(page.into_response())
}

/// What a group form asks of each of its branches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupAction {
    Rule(RuleAction),
    /// Acknowledge for this many hours.
    Acknowledge(i64),
}

impl GroupAction {
    fn parse(word: &str) -> Option<GroupAction> {
        match word {
            "ack-1h" => Some(GroupAction::Acknowledge(1)),
            "ack-1d" => Some(GroupAction::Acknowledge(24)),
            _ => match RuleAction::from_path(word)? {
                action @ (RuleAction::RunNow | RuleAction::Pause | RuleAction::Resume) => {
                    Some(GroupAction::Rule(action))
                }
                RuleAction::ForceStop => None,
            },
        }
    }

    fn label(self) -> &'static str {
        match self {
            GroupAction::Rule(action) => rule::label(action),
            GroupAction::Acknowledge(_) => "Acknowledge",
        }
    }
}

/// The group's ids: at least one, at most [`MAX_GROUP`], each a UUID.
fn parse_rules(text: &str) -> Result<Vec<Uuid>, ApiError> {
    let bad = |why: &str| ApiError::unprocessable(ErrorCode::InvalidField, format!("rules: {why}"));
    let ids = text
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| Uuid::parse_str(part).map_err(|_| bad("each must be a branch rule id")))
        .collect::<Result<Vec<Uuid>, ApiError>>()?;
    match ids.len() {
        0 => Err(bad("name at least one branch rule")),
        n if n > MAX_GROUP => Err(bad(&format!("at most {MAX_GROUP} branch rules at once"))),
        _ => Ok(ids),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_names_one_to_a_thousand_ids_and_nothing_else() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        assert_eq!(parse_rules(&format!("{a}, {b},")).ok(), Some(vec![a, b]));
        for bad in ["", " , ", "nope", &format!("{a},x")] {
            let error = parse_rules(bad).err().map(|e| e.detail().1.message);
            assert!(
                error.as_deref().is_some_and(|m| m.starts_with("rules: ")),
                "{bad}: {error:?}"
            );
        }
        let many = vec![a.to_string(); MAX_GROUP + 1].join(",");
        assert!(parse_rules(&many).is_err());
    }
}
