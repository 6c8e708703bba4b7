//! Executors: what detection and business nodes do. One trait; each kind is one file, and a
//! new kind is a new file plus one line in [`Executors::standard`].

mod command;
mod http;
mod notify;
mod violation;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
pub use res_workflow::ActionKind;
use res_workflow::Catalogue;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

pub(crate) use command::{CommandExecutor, ProcessLedger};
pub(crate) use http::HttpExecutor;
pub(crate) use notify::NotifyExecutor;
pub(crate) use violation::ViolationExecutor;

use super::output::Captured;
use super::services::ExecutionServices;
use super::stop::StopSignal;

/// What an action is given: everything it may need about the run, as JSON on the wire.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ActionJob<'a> {
    pub(crate) execution_id: Uuid,
    /// The first attempt of its retry chain (stable across retries).
    pub(crate) root_execution_id: Uuid,
    /// 1 for a fresh run.
    pub(crate) attempt: i32,
    /// The node being run.
    pub(crate) node_id: &'a str,
    /// How many times this node has run in this execution, counting this one (from 1).
    pub(crate) visit: u32,
    pub(crate) action: ActionInfo<'a>,
    /// The branch rule's configuration of this action (camera ids, stream URLs, ...).
    pub(crate) details: &'a Value,
    pub(crate) branch_rule: &'a Value,
    /// When the operation window closes; the action must be done by then.
    pub(crate) deadline: Option<DateTime<Utc>>,
    /// The result of the node whose edge led here (none for the start node).
    pub(crate) input: Option<&'a Value>,
    /// Results of the action nodes run so far.
    pub(crate) aggregated_actions_details: &'a [Value],
}

/// The template part of a [`ActionJob`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ActionInfo<'a> {
    pub(crate) template_id: Uuid,
    pub(crate) name: &'a str,
    /// `detection` or `business`.
    pub(crate) kind: &'static str,
    /// The template's free-form `config.parameters`.
    pub(crate) parameters: &'a Value,
}

/// One call of an executor.
pub struct ActionCall<'a> {
    pub(crate) job: &'a ActionJob<'a>,
    /// The template's config (checked by [`Executor::check_config`] when the workflow loaded).
    pub(crate) config: &'a Value,
    /// Fires at the deadline, the runtime limit or on cancel: stop, keeping what you have.
    pub(crate) stop: &'a StopSignal,
    /// How long a stopped action may take to wind down before it is killed.
    pub(crate) grace: Duration,
    /// Cloud calls about this execution.
    pub(crate) services: &'a dyn ExecutionServices,
    /// Where a program's output goes for the report.
    pub(crate) output: &'a Captured,
    /// Masks the execution's secret values in what the action logs.
    pub(crate) secrets: &'a super::secrets::ActionSecrets,
}

/// Why an action produced no (complete) result.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionError {
    /// It failed; `partial` is whatever it produced first.
    Failed {
        /// What went wrong.
        message: String,
        /// Output produced before the failure.
        partial: Option<Value>,
    },
    /// It was stopped by the [`StopSignal`]; `partial` is what it had so far.
    Stopped {
        /// Output produced before the stop.
        partial: Option<Value>,
    },
}

impl ActionError {
    /// A failure without output.
    pub(crate) fn failed(message: impl Into<String>) -> ActionError {
        ActionError::Failed {
            message: message.into(),
            partial: None,
        }
    }
}

/// An action kind.
pub trait Executor: Send + Sync {
    /// The name configs use (`http`, `command`, `create_violation`, `notify`).
    fn name(&self) -> &'static str;
    /// Which nodes it serves.
    fn kind(&self) -> ActionKind;
    /// Every problem with a template config, empty when it is usable (the standard
    /// executors use their `res_workflow::actions` check).
    fn check_config(&self, config: &Value) -> Vec<String>;
    /// Runs the action; the result becomes the node's result.
    fn run<'a>(&'a self, call: ActionCall<'a>) -> BoxFuture<'a, Result<Value, ActionError>>;
}

/// The executors an engine knows, by name.
#[derive(Clone, Default)]
pub struct Executors {
    by_name: BTreeMap<&'static str, Arc<dyn Executor>>,
}

impl std::fmt::Debug for Executors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl Executors {
    /// No executors (add them with [`Executors::register`]).
    pub fn empty() -> Executors {
        Executors::default()
    }

    /// `http`, `command`, `create_violation` and `notify`.
    pub fn standard() -> Executors {
        let mut executors = Executors::empty();
        executors.register(Arc::new(HttpExecutor::new()));
        executors.register(Arc::new(CommandExecutor::default()));
        executors.register(Arc::new(ViolationExecutor));
        executors.register(Arc::new(NotifyExecutor::new()));
        executors
    }

    /// Adds (or replaces) an executor.
    pub fn register(&mut self, executor: Arc<dyn Executor>) {
        self.by_name.insert(executor.name(), executor);
    }

    /// The executor called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Executor>> {
        self.by_name.get(name)
    }
}

impl Catalogue for Executors {
    fn find(&self, name: &str) -> Option<(&'static str, ActionKind)> {
        self.by_name
            .get(name)
            .map(|executor| (executor.name(), executor.kind()))
    }

    fn check_config(&self, name: &str, config: &Value) -> Vec<String> {
        match self.by_name.get(name) {
            Some(executor) => executor.check_config(config),
            None => vec![format!("unknown action '{name}'")],
        }
    }

    fn names(&self, kind: ActionKind) -> Vec<&'static str> {
        self.by_name
            .iter()
            .filter(|(_, e)| e.kind() == kind)
            .map(|(name, _)| *name)
            .collect()
    }
}

/// Parses a JSON result from program or service output: the whole text, else its last
/// non-empty line (so progress lines before the result do not matter).
pub(crate) fn parse_result(output: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(output);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    serde_json::from_str(text).ok().or_else(|| {
        text.lines()
            .rev()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .and_then(|line| serde_json::from_str(line).ok())
    })
}

/// Time left before `limit`, also bounded by the stop signal.
fn time_budget(limit: Duration, stop: &StopSignal) -> Duration {
    stop.remaining().map_or(limit, |left| left.min(limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_the_whole_output_or_its_last_line() {
        assert_eq!(
            parse_result(b" {\"a\": 1}\n"),
            Some(serde_json::json!({"a": 1}))
        );
        assert_eq!(
            parse_result(b"loading model\nframe 1\n{\"people\": 3}\n\n"),
            Some(serde_json::json!({"people": 3}))
        );
        assert_eq!(parse_result(b"no json here"), None);
        assert_eq!(parse_result(b""), None);
    }

    #[test]
    fn the_standard_registry_is_what_the_functions_check_against() {
        use res_workflow::StandardActions;
        crate::tls::install();
        let executors = Executors::standard();
        for kind in [ActionKind::Detection, ActionKind::Business] {
            assert_eq!(executors.names(kind), StandardActions.names(kind));
            for name in executors.names(kind) {
                assert_eq!(executors.find(name), StandardActions.find(name));
                let config = serde_json::json!({"executor": name, "url": "ftp://x", "kind": ""});
                assert_eq!(
                    Catalogue::check_config(&executors, name, &config),
                    StandardActions.check_config(name, &config),
                    "{name}"
                );
            }
        }
    }
}
