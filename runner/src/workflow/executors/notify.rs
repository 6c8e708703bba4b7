//! `notify` business action: POST the job as a JSON notification to a webhook, retrying
//! transient failures with exponential backoff.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{endpoint, read_capped};
use super::{
    ActionCall, ActionError, ActionKind, Executor, check_parses, parse_config, time_budget,
};

/// Longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A business template config for `notify`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyConfig {
    /// Ignored (the node's `action` chose this executor).
    #[serde(default)]
    #[allow(dead_code)]
    executor: Option<String>,
    /// The webhook.
    url: String,
    /// Per attempt (default 10 s).
    #[serde(default = "default_timeout")]
    timeout_seconds: u64,
    /// Attempts before giving up (default 5).
    #[serde(default = "default_attempts")]
    max_attempts: u32,
    /// Wait before the second attempt, doubled each time up to 60 s (default 1 s).
    #[serde(default = "default_backoff")]
    backoff_seconds: f64,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Passed in `action.parameters`.
    #[serde(default)]
    #[allow(dead_code)]
    parameters: Value,
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

/// Posts notifications to webhooks.
#[derive(Debug, Clone)]
pub(crate) struct NotifyExecutor {
    client: reqwest::Client,
}

impl NotifyExecutor {
    /// An executor with its own connection pool (TLS must be set up: [`crate::tls::install`]).
    pub(crate) fn new() -> NotifyExecutor {
        NotifyExecutor {
            client: reqwest::Client::new(),
        }
    }
}

impl Default for NotifyExecutor {
    fn default() -> Self {
        NotifyExecutor::new()
    }
}

/// One attempt's outcome.
enum Attempt {
    Delivered(u16, Value),
    /// Worth retrying (no answer, 5xx, 429).
    Transient(String),
    /// Will not get better (other 4xx).
    Refused(String),
}

impl Executor for NotifyExecutor {
    fn name(&self) -> &'static str {
        "notify"
    }

    fn kind(&self) -> ActionKind {
        ActionKind::Business
    }

    fn check_config(&self, config: &Value) -> Vec<String> {
        let mut problems = check_parses::<NotifyConfig>(config);
        if let Ok(parsed) = parse_config::<NotifyConfig>(config) {
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
        }
        problems
    }

    fn run<'a>(&'a self, call: ActionCall<'a>) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let config: NotifyConfig = parse_config(call.config).map_err(ActionError::failed)?;
            let url = endpoint(&config.url).map_err(ActionError::failed)?;
            let mut backoff = Duration::from_secs_f64(config.backoff_seconds);
            let mut last_problem = String::new();
            for attempt in 1..=config.max_attempts {
                if attempt > 1 {
                    tracing::warn!(attempt, problem = %last_problem, "retrying notification");
                    if call.stop.sleep(backoff).await.is_err() {
                        return Err(ActionError::Stopped { partial: None });
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                let budget = time_budget(Duration::from_secs(config.timeout_seconds), call.stop);
                let mut request = self.client.post(url.clone()).json(call.job).timeout(budget);
                for (name, value) in &config.headers {
                    request = request.header(name, value);
                }
                let outcome = tokio::select! {
                    outcome = send(request) => outcome,
                    _ = call.stop.stopped() => return Err(ActionError::Stopped { partial: None }),
                };
                match outcome {
                    Attempt::Delivered(status, response) => {
                        return Ok(json!({
                            "is_success": true,
                            "status": status,
                            "attempts": attempt,
                            "response": response,
                        }));
                    }
                    Attempt::Refused(problem) => {
                        return Err(ActionError::failed(format!(
                            "webhook {url} refused: {problem}"
                        )));
                    }
                    Attempt::Transient(problem) => last_problem = problem,
                }
            }
            Err(ActionError::failed(format!(
                "webhook {url} failed {} times; last: {last_problem}",
                config.max_attempts
            )))
        })
    }
}

async fn send(request: reqwest::RequestBuilder) -> Attempt {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return Attempt::Transient(error.to_string()),
    };
    let status = response.status();
    let body = read_capped(response).await.unwrap_or_default();
    let text = || {
        String::from_utf8_lossy(&body)
            .chars()
            .take(300)
            .collect::<String>()
    };
    if status.is_success() {
        Attempt::Delivered(
            status.as_u16(),
            serde_json::from_slice(&body).unwrap_or(Value::Null),
        )
    } else if status.is_server_error() || status.as_u16() == 429 {
        Attempt::Transient(format!("{status}: {}", text()))
    } else {
        Attempt::Refused(format!("{status}: {}", text()))
    }
}
