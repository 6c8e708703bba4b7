//! `create_violation` business action: a violation recorded through `violations_create`.

use serde::Deserialize;
use serde_json::Value;

/// A business template config for `create_violation`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViolationConfig {
    /// Ignored here (the node's `action` chose this executor); allowed for symmetry.
    #[serde(default)]
    pub executor: Option<String>,
    /// The violation kind (e.g. `queue_too_long`); default: the template's name.
    #[serde(default)]
    pub kind: Option<String>,
    /// Copied into the violation's details.
    #[serde(default)]
    pub parameters: Value,
}

impl ViolationConfig {
    /// Every problem with a `create_violation` template config.
    pub fn problems(config: &Value) -> Vec<String> {
        super::problems_of(config, |parsed: &ViolationConfig| match &parsed.kind {
            Some(kind) if kind.trim().is_empty() || kind.chars().count() > 100 => {
                vec!["kind: must be 1-100 characters".into()]
            }
            _ => Vec::new(),
        })
    }
}
