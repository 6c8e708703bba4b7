//! The actions a workflow node may name: their kinds, the template config each one reads,
//! and how each config is checked. The runner executes these configs; the functions and
//! `resctl` only check them, with the same code.

mod command;
mod http;
mod notify;
mod violation;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use command::CommandConfig;
pub use http::{HttpConfig, endpoint};
pub use notify::NotifyConfig;
pub use violation::ViolationConfig;

/// Which nodes an action serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Detection nodes (named by the template's `config.executor`).
    Detection,
    /// Business nodes (named by the node's `action`).
    Business,
}

impl ActionKind {
    /// `detection` or `business`, as in templates and configs.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Detection => "detection",
            ActionKind::Business => "business",
        }
    }
}

/// The actions a checker may accept: the runner's registry of executors, or
/// [`StandardActions`] where nothing runs.
pub trait Catalogue {
    /// The action called `name`: its registered name and kind.
    fn find(&self, name: &str) -> Option<(&'static str, ActionKind)>;
    /// Every problem with a template config for the action `name`, empty when usable.
    fn check_config(&self, name: &str, config: &Value) -> Vec<String>;
    /// Names of the actions of one kind, sorted, for error messages.
    fn names(&self, kind: ActionKind) -> Vec<&'static str>;

    /// The action a template runs as a `kind` node: `named` (a business node's `action`),
    /// else the template config's `executor`. A refusal says which of the two is wrong and
    /// why, in the words both the runner and the configuration checks use.
    fn executor_of(
        &self,
        kind: ActionKind,
        named: Option<&str>,
        config: &Value,
    ) -> Result<&'static str, (ExecutorField, String)> {
        let choices = || self.names(kind).join(", ");
        let (name, field) = match named {
            Some(name) => (name, ExecutorField::Action),
            None => match config.get("executor").and_then(Value::as_str) {
                Some(name) => (name, ExecutorField::Executor),
                None => {
                    return Err((
                        ExecutorField::Executor,
                        format!("is missing ({})", choices()),
                    ));
                }
            },
        };
        match self.find(name) {
            Some((executor, of)) if of == kind => Ok(executor),
            _ => Err((
                field,
                format!("unknown {} action '{name}' ({})", kind.as_str(), choices()),
            )),
        }
    }
}

/// Where a template's action is named: the node's `action`, or the config's `executor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorField {
    /// A business node's `action`.
    Action,
    /// The template config's `executor`.
    Executor,
}

/// One standard action: its name, kind and config check.
type Standard = (&'static str, ActionKind, fn(&Value) -> Vec<String>);

/// The actions every runner ships, sorted by name.
const STANDARD: [Standard; 4] = [
    ("command", ActionKind::Detection, CommandConfig::problems),
    (
        "create_violation",
        ActionKind::Business,
        ViolationConfig::problems,
    ),
    ("http", ActionKind::Detection, HttpConfig::problems),
    ("notify", ActionKind::Business, NotifyConfig::problems),
];

/// `http`, `command`, `create_violation` and `notify`: what a standard runner executes.
#[derive(Debug, Clone, Copy, Default)]
pub struct StandardActions;

impl Catalogue for StandardActions {
    fn find(&self, name: &str) -> Option<(&'static str, ActionKind)> {
        STANDARD
            .iter()
            .find(|(known, _, _)| *known == name)
            .map(|(known, kind, _)| (*known, *kind))
    }

    fn check_config(&self, name: &str, config: &Value) -> Vec<String> {
        match STANDARD.iter().find(|(known, _, _)| *known == name) {
            Some((_, _, check)) => check(config),
            None => vec![format!("unknown action '{name}'")],
        }
    }

    fn names(&self, kind: ActionKind) -> Vec<&'static str> {
        STANDARD
            .iter()
            .filter(|(_, of, _)| *of == kind)
            .map(|(name, _, _)| *name)
            .collect()
    }
}

/// Parses a template config into an action's typed config; the error names the field.
pub fn parse_config<T: DeserializeOwned>(config: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(config).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        if path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        }
    })
}

/// The problems of a config that must parse as `T` and then pass `rules`.
fn problems_of<T: DeserializeOwned>(
    config: &Value,
    rules: impl Fn(&T) -> Vec<String>,
) -> Vec<String> {
    match parse_config::<T>(config) {
        Ok(parsed) => rules(&parsed),
        Err(problem) => vec![problem],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn config_errors_name_the_field() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Config {
            url: String,
            timeout_seconds: Option<u64>,
        }
        let error = parse_config::<Config>(&json!({"url": "x", "timeout_seconds": "5"}))
            .expect_err("a string timeout is refused");
        assert!(error.starts_with("timeout_seconds: "), "{error}");
        let error = parse_config::<Config>(&json!({})).expect_err("url is required");
        assert!(error.contains("url"), "{error}");
    }

    #[test]
    fn the_standard_actions_name_each_kind() {
        assert_eq!(
            StandardActions.names(ActionKind::Detection),
            vec!["command", "http"]
        );
        assert_eq!(
            StandardActions.names(ActionKind::Business),
            vec!["create_violation", "notify"]
        );
        assert_eq!(
            StandardActions.find("http"),
            Some(("http", ActionKind::Detection))
        );
        assert_eq!(StandardActions.find("ftp"), None);
    }

    #[test]
    fn each_standard_config_is_checked_field_by_field() {
        let cases = [
            (
                "http",
                json!({"executor": "http", "url": "ftp://x"}),
                "url: 'ftp://x' is not an http(s) URL",
            ),
            (
                "http",
                json!({"executor": "http", "url": "http://x", "timeout_seconds": 0}),
                "timeout_seconds: must be at least 1",
            ),
            (
                "http",
                json!({"executor": "http", "url": "http://x", "headers": {"a b": "c"}}),
                "headers: 'a b' is not a valid header name",
            ),
            (
                "command",
                json!({"executor": "command", "program": " "}),
                "program: must name a program",
            ),
            (
                "notify",
                json!({"url": "http://x", "max_attempts": 0}),
                "max_attempts: must be 1-20",
            ),
            (
                "notify",
                json!({"url": "http://x", "backoff_seconds": 61}),
                "backoff_seconds: must be 0-60",
            ),
            (
                "create_violation",
                json!({"kind": ""}),
                "kind: must be 1-100 characters",
            ),
        ];
        for (action, config, expected) in cases {
            assert_eq!(
                StandardActions.check_config(action, &config),
                vec![expected.to_owned()],
                "{action} {config}"
            );
        }
        for (action, config) in [
            (
                "http",
                json!({"executor": "http", "url": "https://x/detect"}),
            ),
            (
                "command",
                json!({"executor": "command", "program": "detect"}),
            ),
            ("notify", json!({"url": "http://x/hook"})),
            ("create_violation", json!({})),
        ] {
            assert!(
                StandardActions.check_config(action, &config).is_empty(),
                "{action}"
            );
        }
    }
}
