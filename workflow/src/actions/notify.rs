//! `notify` business action: the job POSTed as a JSON notification to a webhook.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::http::{endpoint, header_problems};

/// A business template config for `notify`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Ignored (the node's `action` chose this executor).
    #[serde(default)]
    pub executor: Option<String>,
    /// The webhook.
    pub url: String,
    /// Per attempt (default 10 s).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Attempts before giving up (default 5).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    /// Wait before the second attempt, doubled each time up to 60 s (default 1 s).
    #[serde(default = "default_backoff")]
    pub backoff_seconds: f64,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Passed in `action.parameters`.
    #[serde(default)]
    pub parameters: Value,
}

fn default_timeout() -> u64 {
    10
}
fn default_attempts() -> u32 {
    5
}
fn default_backoff() -> f64 {
    1.0
}

impl NotifyConfig {
    /// Every problem with a `notify` template config.
    pub fn problems(config: &Value) -> Vec<String> {
        super::problems_of(config, |parsed: &NotifyConfig| {
            let mut problems = Vec::new();
            if let Err(problem) = endpoint(&parsed.url) {
                problems.push(problem);
            }
            if !(1..=20).contains(&parsed.max_attempts) {
                problems.push("max_attempts: must be 1-20".into());
            }
            if parsed.timeout_seconds == 0 {
                problems.push("timeout_seconds: must be at least 1".into());
            }
            if !(parsed.backoff_seconds.is_finite()
                && (0.0..=60.0).contains(&parsed.backoff_seconds))
            {
                problems.push("backoff_seconds: must be 0-60".into());
            }
            problems.extend(header_problems(&parsed.headers));
            problems
        })
    }
}
