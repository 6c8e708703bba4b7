//! Rules and branches by name: a name is looked up with `rules_list` (so it sees exactly
//! what the key's scope sees) and must name one thing; an id is used as it is.

use res_client::{CloudError, FunctionsClient};
use res_shared::wire::{RuleListRequest, RuleSummary};
use uuid::Uuid;

use crate::cli::RuleRef;

/// Why a name did not resolve; mapped to the same exit codes as the functions' answers.
#[derive(Debug)]
pub(crate) enum Unresolved {
    /// Nothing in scope has that name (like an unknown id: 404).
    NotFound(String),
    /// Several things do; the message lists them.
    Ambiguous(String),
    /// Input resctl itself cannot read (a file, standard input): bad usage, like
    /// arguments it cannot parse.
    BadInput(String),
    /// Done at some of a group's branches, not all: what was done (printed as usual),
    /// and why not the rest.
    Partly {
        output: String,
        why: String,
        /// The service stopped answering (rather than refusing some branches).
        unreachable: bool,
    },
    Cloud(CloudError),
}

impl From<CloudError> for Unresolved {
    fn from(error: CloudError) -> Self {
        Unresolved::Cloud(error)
    }
}

/// A branch id, from an id or a branch name.
pub(crate) async fn branch(client: &FunctionsClient, text: &str) -> Result<Uuid, Unresolved> {
    if let Ok(id) = Uuid::parse_str(text.trim()) {
        return Ok(id);
    }
    let rules = matching(client, None, Some(text)).await?;
    let mut branches: Vec<(Uuid, String)> = rules
        .into_iter()
        .map(|r| (r.branch_id, r.branch_name))
        .collect();
    branches.dedup();
    match branches.as_slice() {
        [] => Err(Unresolved::NotFound(format!("no branch named '{text}'"))),
        [(id, _)] => Ok(*id),
        many => Err(Unresolved::Ambiguous(format!(
            "{} branches are named '{text}': {}; give the id",
            many.len(),
            many.iter()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// A branch rule id, from an id or a rule name (narrowed by a branch id or name).
pub(crate) async fn rule(client: &FunctionsClient, rule: &RuleRef) -> Result<Uuid, Unresolved> {
    if let Ok(id) = Uuid::parse_str(rule.rule.trim()) {
        return Ok(id);
    }
    let (branch_id, branch_name) = match rule.branch.as_deref().map(str::trim) {
        None => (None, None),
        Some(text) => match Uuid::parse_str(text) {
            Ok(id) => (Some(id), None),
            Err(_) => (None, Some(text)),
        },
    };
    let mut rules = matching(client, Some(&rule.rule), branch_name).await?;
    if let Some(id) = branch_id {
        rules.retain(|r| r.branch_id == id);
    }
    let place = rule
        .branch
        .as_deref()
        .map(|b| format!(" at branch '{b}'"))
        .unwrap_or_default();
    match rules.as_slice() {
        [] => Err(Unresolved::NotFound(format!(
            "no rule named '{}'{place}",
            rule.rule
        ))),
        [one] => Ok(one.branch_rule_id),
        many => Err(Unresolved::Ambiguous(format!(
            "rule '{}' is in {} branches: {}; pass --branch",
            rule.rule,
            many.len(),
            many.iter()
                .map(|r| format!("{} ({})", r.branch_name, r.branch_rule_id))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Every rule in scope with these names, following pages.
async fn matching(
    client: &FunctionsClient,
    rule_name: Option<&str>,
    branch_name: Option<&str>,
) -> Result<Vec<RuleSummary>, CloudError> {
    let mut found = Vec::new();
    let mut after = None;
    loop {
        let page = client
            .call(&RuleListRequest {
                rule_name: rule_name.map(str::to_owned),
                branch_name: branch_name.map(str::to_owned),
                limit: Some(res_shared::wire::MAX_PAGE_SIZE),
                after,
                ..RuleListRequest::default()
            })
            .await?;
        found.extend(page.rules);
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(found),
        }
    }
}
