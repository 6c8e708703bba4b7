//! A client for the RES functions: typed calls with the shared wire types (one generic
//! `call` per `Call` type), and errors that tell "the functions said no" apart from "the
//! functions could not be reached". The runner and `resctl` both use it.

pub mod tls;

use std::time::Duration;

use uuid::Uuid;

use res_shared::wire::{
    Batch, BatchItem, Call, ErrorBody, ErrorCode, ForceStopRuleRequest, PauseRuleRequest,
    ResumeRuleRequest, RuleAction, RuleActionResponse, RunNowRequest,
};

/// What went wrong calling a function.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CloudError {
    /// No answer: network down, DNS, timeout, connection refused.
    #[error("cannot reach {function}: {message}")]
    Unreachable {
        function: &'static str,
        /// Why.
        message: String,
    },
    /// The function answered with an error.
    #[error("{function} answered {status} {code}: {message}")]
    Rejected {
        function: &'static str,
        /// HTTP status.
        status: u16,
        /// The error code (`lease_lost`, `running`, ...).
        code: String,
        message: String,
        /// The whole body (a claim refusal carries `reason` and `blockers`).
        body: serde_json::Value,
    },
    /// The answer was not what the contract promises.
    #[error("unexpected answer from {function}: {message}")]
    Invalid {
        function: &'static str,
        /// What was wrong.
        message: String,
    },
}

impl CloudError {
    /// Whether retrying later may succeed (no answer, or the server is struggling), as
    /// opposed to a definite refusal.
    pub fn is_transient(&self) -> bool {
        match self {
            CloudError::Unreachable { .. } => true,
            // `concurrent_update`: another request held the same row; nothing was changed.
            CloudError::Rejected { status, code, .. } => {
                *status >= 500 || *status == 429 || code == ErrorCode::ConcurrentUpdate.as_str()
            }
            CloudError::Invalid { .. } => false,
        }
    }

    /// A late report the functions stored although a retry had already taken the rule
    /// (`409 superseded`): delivered, just not the rule's latest word.
    pub fn is_superseded(&self) -> bool {
        matches!(self, CloudError::Rejected { status: 409, code, .. } if code == ErrorCode::Superseded.as_str())
    }

    /// Whether the functions have no record of execution `id` (`404`, the answer to an
    /// id nobody used): a claim lost with the commits of a database failover.
    pub fn is_unknown_execution(&self, id: uuid::Uuid) -> bool {
        matches!(self, CloudError::Rejected { status: 404, message, .. }
            if message.starts_with(&format!("execution {id} not found")))
    }

    /// Whether functions older than the caller refused the request for carrying `field`
    /// (they answer a field they do not know as any unknown field: 400 naming it).
    pub fn refuses_field(&self, field: &str) -> bool {
        matches!(self, CloudError::Rejected { status: 400, message, .. }
            if message.contains(&format!("unknown field `{field}`")))
    }

    /// Whether functions older than the caller refused a value of `field` they do not know
    /// yet (422 `invalid_field`, the message naming the field first).
    pub fn refuses_value(&self, field: &str) -> bool {
        matches!(self, CloudError::Rejected { status: 422, code, message, .. }
            if code == ErrorCode::InvalidField.as_str() && message.starts_with(&format!("{field} ")))
    }

    /// Whether the functions have no such function (they are older than the caller).
    pub fn is_unknown_function(&self) -> bool {
        matches!(self, CloudError::Rejected { status: 404, message, .. }
            if message.starts_with("no function at"))
    }

    pub fn code(&self) -> Option<&str> {
        match self {
            CloudError::Rejected { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// The longest an answer's body may take, in request timeouts (while it keeps arriving).
const BODY_TIMEOUTS: u32 = 20;

/// Idle time before the first keep-alive probe of res-runner's connections.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// Time between keep-alive probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);
/// Unanswered probes that end a connection.
const KEEPALIVE_PROBES: u32 = 4;

/// The TCP keep-alive of res-runner's connections (the fleet benchmark's sites use it too:
/// reqwest's own default probes four times as often). A plan request waits for minutes in
/// silence: probes keep the NAT and firewall state on the way, and end the request if the
/// functions' host vanished — after four unanswered probes, two minutes of silence.
///
/// The user timeout is part of that. reqwest sets `TCP_USER_TIMEOUT` to 30 s unless told
/// otherwise, and Linux then ends a connection at the first unanswered probe once nothing
/// has been heard for the user timeout: a waiting plan request, idle for a minute, died of
/// one lost probe (the fleet benchmark lost 9–319 waits a run that way). Set to the
/// keep-alive's own two minutes, the four probes decide; it still bounds how long sent
/// data may go unacknowledged.
pub fn with_keepalive(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder
        .tcp_keepalive(KEEPALIVE_IDLE)
        .tcp_keepalive_interval(KEEPALIVE_INTERVAL)
        .tcp_keepalive_retries(KEEPALIVE_PROBES)
        .tcp_user_timeout(KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_PROBES)
}

/// The HTTP client under a [`FunctionsClient`].
fn http_client(timeout: Duration, user_agent: &str) -> Result<reqwest::Client, CloudError> {
    with_keepalive(reqwest::Client::builder())
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        // Shops sit behind NAT boxes and 4G routers that forget idle connections without
        // a word; a request sent on one such connection waits out its whole timeout.
        // A connection idle for half a minute is closed rather than trusted again.
        .pool_idle_timeout(Duration::from_secs(30))
        .user_agent(user_agent)
        .build()
        .map_err(|e| CloudError::Invalid {
            function: "client",
            message: e.to_string(),
        })
}

/// A client for the functions of one deployment.
#[derive(Clone)]
pub struct FunctionsClient {
    base: String,
    token: String,
    http: reqwest::Client,
    timeout: Duration,
    user_agent: String,
}

// The token is a secret: debug output (and so any log of a struct holding a client) shows
// only where the client points.
impl std::fmt::Debug for FunctionsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionsClient")
            .field("base", &self.base)
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl FunctionsClient {
    /// A client for `base_url` (e.g. `https://x.example/functions/v1`) with a bearer token;
    /// `user_agent` names the calling program and its version.
    pub fn new(
        base_url: &str,
        token: &str,
        timeout: Duration,
        user_agent: &str,
    ) -> Result<FunctionsClient, CloudError> {
        Ok(FunctionsClient {
            base: base_url.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            http: http_client(timeout, user_agent)?,
            timeout,
            user_agent: user_agent.to_owned(),
        })
    }

    /// The same client with a pool of its own: its first call opens a new connection
    /// rather than trusting one a NAT box may have forgotten (a waiting plan request that
    /// got no answer is asked again this way).
    pub fn with_new_connections(&self) -> Result<FunctionsClient, CloudError> {
        Ok(FunctionsClient {
            http: http_client(self.timeout, &self.user_agent)?,
            ..self.clone()
        })
    }

    /// Performs an operator's `action` on one branch rule through its function.
    pub async fn rule_action(
        &self,
        action: RuleAction,
        branch_rule_id: Uuid,
        reason: &str,
    ) -> Result<RuleActionResponse, CloudError> {
        let reason = reason.to_owned();
        match action {
            RuleAction::RunNow => {
                self.call(&RunNowRequest {
                    branch_rule_id,
                    reason,
                })
                .await
            }
            RuleAction::Pause => {
                self.call(&PauseRuleRequest {
                    branch_rule_id,
                    reason,
                })
                .await
            }
            RuleAction::Resume => {
                self.call(&ResumeRuleRequest {
                    branch_rule_id,
                    reason,
                })
                .await
            }
            RuleAction::ForceStop => {
                self.call(&ForceStopRuleRequest {
                    branch_rule_id,
                    reason,
                })
                .await
            }
        }
    }

    /// Whether the functions and their database answer (`GET /health`, no token): a cheap
    /// look before acting on a guess that they are still away.
    pub async fn healthy(&self) -> bool {
        let asked = self.http.get(format!("{}/health", self.base)).send();
        matches!(
            tokio::time::timeout(self.timeout, asked).await,
            Ok(Ok(answer)) if answer.status().is_success()
        )
    }

    /// Calls the function `C` names with `request`.
    pub async fn call<C: Call>(&self, request: &C) -> Result<C::Response, CloudError> {
        self.call_waiting(request, Duration::ZERO).await
    }

    /// Calls a function that may hold the request up to `wait` before answering (a plan
    /// request's bounded wait): the timeout is the client's plus `wait`.
    pub async fn call_waiting<C: Call>(
        &self,
        request: &C,
        wait: Duration,
    ) -> Result<C::Response, CloudError> {
        let function = C::NAME;
        let unreachable = |message: String| CloudError::Unreachable { function, message };
        // The timeout bounds the wait for the answer to begin; the body then has the same
        // time for each piece of it, so a large plan over a slow link arrives as long as it
        // keeps arriving, where one deadline for the whole call would cut it off for good.
        // Functions that keep a waiting answer alive begin it at once and send a space
        // every few seconds (older ones ignore the header and answer when the wait ends).
        let started = tokio::time::Instant::now();
        let sent = self
            .http
            .post(format!("{}/{function}", self.base))
            .bearer_auth(&self.token)
            .header(KEEPALIVE_ASKED, "1")
            .json(request)
            .send();
        let mut response = tokio::time::timeout(self.timeout + wait, sent)
            .await
            .map_err(|_| unreachable(format!("no answer within {:?}", self.timeout + wait)))?
            .map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let mut bytes = Vec::new();
        // While only keep-alive spaces have come, the answer must come within the wait and
        // the timeout, as it would begin without them, and a silence of two and a half
        // intervals means the link is dead whatever the wait (a NAT box forgot it).
        let keepalive = keepalive_interval(&response);
        let mut kept_alive = keepalive.is_some();
        let silence = keepalive.map_or(self.timeout, |every| self.timeout.max(every.mul_f64(2.5)));
        let mut body_deadline = if kept_alive {
            started + wait + self.timeout
        } else {
            tokio::time::Instant::now() + self.timeout * BODY_TIMEOUTS
        };
        loop {
            let quiet = if kept_alive { silence } else { self.timeout };
            let piece = tokio::time::timeout_at(
                body_deadline.min(tokio::time::Instant::now() + quiet),
                response.chunk(),
            )
            .await
            .map_err(|_| {
                if kept_alive {
                    unreachable(format!("the waiting answer went silent for {quiet:?}"))
                } else {
                    unreachable(format!("the answer stalled after {} bytes", bytes.len()))
                }
            })?
            .map_err(|e| unreachable(e.to_string()))?;
            match piece {
                Some(piece) => {
                    if kept_alive && piece.iter().any(|b| !b.is_ascii_whitespace()) {
                        // The answer itself: its pieces get the usual time.
                        kept_alive = false;
                        body_deadline = tokio::time::Instant::now() + self.timeout * BODY_TIMEOUTS;
                    }
                    bytes.extend_from_slice(&piece);
                }
                None => break,
            }
        }
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| CloudError::Invalid {
                function,
                message: e.to_string(),
            });
        }
        Err(rejected(function, status.as_u16(), &bytes))
    }

    /// Calls a batch function: `Ok` holds each item's answer as its single call would have
    /// given it (in the request's order); `Err` is the whole request's failure. Functions
    /// older than the batch answer [`CloudError::is_unknown_function`].
    pub async fn call_batch<B: Batch>(
        &self,
        request: &B,
    ) -> Result<Vec<ItemAnswer<B>>, CloudError> {
        let answer = self.call(request).await?;
        if answer.items.len() != request.len() {
            return Err(CloudError::Invalid {
                function: B::NAME,
                message: format!(
                    "{} items answered for {} sent",
                    answer.items.len(),
                    request.len()
                ),
            });
        }
        Ok(answer
            .items
            .into_iter()
            .map(item_answer::<B::Item>)
            .collect())
    }
}

/// One batch item's answer, typed as its single call's.
pub type ItemAnswer<B> = Result<<<B as Batch>::Item as Call>::Response, CloudError>;

fn item_answer<C: Call>(item: BatchItem) -> Result<C::Response, CloudError> {
    let bytes = item.body.get().as_bytes();
    if (200..300).contains(&item.status) {
        return serde_json::from_slice(bytes).map_err(|e| CloudError::Invalid {
            function: C::NAME,
            message: e.to_string(),
        });
    }
    Err(rejected(C::NAME, item.status, bytes))
}

/// A refusal from its status and body (the common error shape, or whatever came).
fn rejected(function: &'static str, status: u16, bytes: &[u8]) -> CloudError {
    let body: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let detail = serde_json::from_value::<ErrorBody>(body.clone()).ok();
    CloudError::Rejected {
        function,
        status,
        code: detail
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |d| d.error.code.clone()),
        message: detail.map_or_else(
            || String::from_utf8_lossy(bytes).chars().take(300).collect(),
            |d| d.error.message,
        ),
        body,
    }
}

/// The request header that asks a waiting answer to be kept alive (functions 0.3.0 on).
const KEEPALIVE_ASKED: &str = "res-keepalive";
/// The answer's header saying keep-alive spaces come, every so many seconds.
const KEEPALIVE_ANSWERED: &str = "res-keepalive-seconds";

/// How often the functions send a keep-alive space in this answer, if they do.
fn keepalive_interval(response: &reqwest::Response) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(KEEPALIVE_ANSWERED)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (1..=60)
        .contains(&seconds)
        .then(|| Duration::from_secs(seconds))
}
