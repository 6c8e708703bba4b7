//! `http` detection: POST the job to a detector service on the site host; its JSON reply is
//! the node result.

use std::time::Duration;

use futures_util::future::BoxFuture;
use res_shared::secrets::Masker;
use res_workflow::actions::{HttpConfig, endpoint, parse_config};
use serde_json::Value;

use super::{ActionCall, ActionError, ActionKind, Executor, time_budget};

/// Longest reply read from a detector.
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;
/// How much of a refusing reply an error message quotes.
const REPLY_EXCERPT_BYTES: usize = 600;

/// POSTs jobs to detector services.
#[derive(Debug, Clone)]
pub(crate) struct HttpExecutor {
    client: reqwest::Client,
}

impl HttpExecutor {
    /// An executor with its own connection pool (TLS must be set up: [`crate::tls::install`]).
    pub(crate) fn new() -> HttpExecutor {
        HttpExecutor {
            client: reqwest::Client::new(),
        }
    }
}

impl Default for HttpExecutor {
    fn default() -> Self {
        HttpExecutor::new()
    }
}

impl Executor for HttpExecutor {
    fn name(&self) -> &'static str {
        "http"
    }

    fn kind(&self) -> ActionKind {
        ActionKind::Detection
    }

    fn check_config(&self, config: &Value) -> Vec<String> {
        HttpConfig::problems(config)
    }

    fn run<'a>(&'a self, call: ActionCall<'a>) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let config: HttpConfig = parse_config(call.config).map_err(ActionError::failed)?;
            let url = endpoint(&config.url).map_err(ActionError::failed)?;
            let budget = time_budget(Duration::from_secs(config.timeout_seconds), call.stop);
            let mut request = self.client.post(url).json(call.job).timeout(budget);
            for (name, value) in &config.headers {
                request = request.header(name, value);
            }
            let exchange = async {
                let response = request.send().await?;
                let status = response.status();
                let body = read_capped(response).await?;
                Ok::<_, reqwest::Error>((status, body))
            };
            let outcome = tokio::select! {
                outcome = exchange => outcome,
                _ = call.stop.stopped() => return Err(ActionError::Stopped { partial: None }),
            };
            let (status, body) = match outcome {
                Ok(reply) => reply,
                // The budget ran out because the run must stop, not because the detector is slow.
                Err(_) if call.stop.reason().is_some() => {
                    return Err(ActionError::Stopped { partial: None });
                }
                Err(error) if error.is_timeout() => {
                    return Err(ActionError::failed(format!(
                        "detector {} did not answer within {} s",
                        config.url,
                        budget.as_secs_f64()
                    )));
                }
                Err(error) => {
                    return Err(ActionError::failed(format!(
                        "detector {} failed: {error}",
                        config.url
                    )));
                }
            };
            let parsed = serde_json::from_slice::<Value>(&body);
            if !status.is_success() {
                return Err(ActionError::Failed {
                    message: format!(
                        "detector {} answered {status}: {}",
                        config.url,
                        excerpt(&body, call.secrets.masker())
                    ),
                    partial: parsed.ok(),
                });
            }
            parsed.map_err(|error| {
                ActionError::failed(format!(
                    "detector {} replied with invalid JSON: {error}",
                    config.url
                ))
            })
        })
    }
}

/// The start of a reply's body for an error message: masked before it is cut, so a cut
/// cannot leave part of a value the whole of which masking would have found.
pub(super) fn excerpt(body: &[u8], masker: &Masker) -> String {
    masker.keep_start(&String::from_utf8_lossy(body), REPLY_EXCERPT_BYTES)
}

/// Reads a reply body, refusing one larger than [`MAX_REPLY_BYTES`].
pub(super) async fn read_capped(
    mut response: reqwest::Response,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_REPLY_BYTES {
            // A runaway detector: keep what fits, which fails JSON parsing with a clear message.
            body.truncate(MAX_REPLY_BYTES);
            break;
        }
    }
    Ok(body)
}
