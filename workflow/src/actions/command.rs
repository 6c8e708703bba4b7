//! `command` detection: a site team's program, run with the job as JSON on stdin.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

/// A template config for `command`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandConfig {
    /// Always `command`.
    pub executor: String,
    /// The program (a path, or a name looked up in `PATH`).
    pub program: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (default: the runner's).
    #[serde(default)]
    pub working_dir: Option<PathBuf>,
    /// Longest run before the program is stopped as failed (default 300 s).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Seconds between SIGTERM and SIGKILL (default: the engine's).
    #[serde(default)]
    pub grace_seconds: Option<u64>,
    /// Passed to the program in `action.parameters`.
    #[serde(default)]
    pub parameters: Value,
}

fn default_timeout() -> u64 {
    300
}

impl CommandConfig {
    /// Every problem with a `command` template config.
    pub fn problems(config: &Value) -> Vec<String> {
        super::problems_of(config, |parsed: &CommandConfig| {
            let mut problems = Vec::new();
            if parsed.program.trim().is_empty() {
                problems.push("program: must name a program".into());
            }
            if parsed.timeout_seconds == 0 {
                problems.push("timeout_seconds: must be at least 1".into());
            }
            problems
        })
    }
}
