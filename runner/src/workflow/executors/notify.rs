//! `notify` business action: POST the job as a JSON notification to a webhook, retrying
//! transient failures with exponential backoff.

use std::time::Duration;

use futures_util::future::BoxFuture;
use res_workflow::actions::{NotifyConfig, endpoint, parse_config};
use serde_json::{Value, json};

use res_shared::secrets::Masker;

use super::http::{excerpt, read_capped};
use super::{ActionCall, ActionError, ActionKind, Executor, time_budget};

/// Longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

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
        NotifyConfig::problems(config)
    }

    fn run<'a>(&'a self, call: ActionCall<'a>) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let config: NotifyConfig = parse_config(call.config).map_err(ActionError::failed)?;
            let url = endpoint(&config.url).map_err(ActionError::failed)?;
            let mut backoff = Duration::from_secs_f64(config.backoff_seconds);
            let mut last_problem = String::new();
            for attempt in 1..=config.max_attempts {
                if attempt > 1 {
                    tracing::warn!(attempt, problem = %call.secrets.mask(&last_problem), "retrying notification");
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
                    outcome = send(request, call.secrets.masker()) => outcome,
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

async fn send(request: reqwest::RequestBuilder, masker: &Masker) -> Attempt {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return Attempt::Transient(masker.mask(&error.to_string()).into_owned()),
    };
    let status = response.status();
    let body = read_capped(response).await.unwrap_or_default();
    let text = || excerpt(&body, masker);
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
