//! The functions' one error type, mapped to HTTP once.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use res_shared::wire::{
    ClaimRefusal, ConfigProblem, DocumentRefusal, ErrorBody, ErrorCode, ErrorDetail,
};

/// Everything a function can answer besides success.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the body is not valid JSON or a field is missing or mistyped.
    #[error("{message}")]
    BadRequest {
        code: ErrorCode,
        /// Names the field.
        message: String,
    },
    /// 401: no bearer token, or not a live one.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the key's role may not use this function at all (checked before the body is
    /// read, so nothing is done).
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such thing in the caller's scope.
    #[error("{0}")]
    NotFound(String),
    /// 405: a function called with another method than POST.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 409: the request conflicts with the current state.
    #[error("{message}")]
    Conflict {
        code: ErrorCode,
        /// What conflicted.
        message: String,
    },
    /// 409: a claim refused, answered in its own shape (`claimed: false`, `reason`,
    /// `blockers`, and the common `error`).
    #[error("{}", .0.error.message)]
    ClaimRefused(Box<ClaimRefusal>),
    /// 422: a configuration document refused, answered in its own shape (every problem at
    /// its path, and the warnings, beside the common `error`).
    #[error("{}", .0.error.message)]
    InvalidDocument(Box<DocumentRefusal>),
    /// 413: the body is over its limit (1 MiB; a configuration document's is larger).
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// 400: the body could not be read (a malformed chunked encoding, a dropped upload).
    #[error("the request body could not be read: {0}")]
    UnreadableBody(String),
    /// 422: valid JSON whose values are unacceptable.
    #[error("{message}")]
    Unprocessable {
        code: ErrorCode,
        /// What is unacceptable, naming the field.
        message: String,
    },
    /// 500: a bug of ours (an answer that cannot be encoded); details go to the log.
    #[error("internal error: {0}")]
    Internal(String),
    /// 503: more requests waited for a turn than the process could serve in time.
    #[error("the functions are busy: the request waited {0} s for a turn; retry shortly")]
    Overloaded(u64),
    /// 503: the functions hold no sealing key, or not the one a secret is sealed under
    /// (docs/deploy.md, "Secrets").
    #[error("{0}")]
    SecretsUnavailable(String),
    /// 500/503: the database failed; details go to the log, not the caller.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl ApiError {
    /// A 400 naming the field.
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError::BadRequest {
            code,
            message: message.into(),
        }
    }

    /// A 422 naming the field.
    pub fn unprocessable(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError::Unprocessable {
            code,
            message: message.into(),
        }
    }

    /// A 422 listing every problem of a configuration document.
    pub fn invalid_document(
        problems: Vec<res_config::Problem>,
        warnings: Vec<res_config::Problem>,
    ) -> ApiError {
        let convert = |list: Vec<res_config::Problem>| -> Vec<ConfigProblem> {
            list.into_iter()
                .map(|p| ConfigProblem {
                    path: p.path,
                    message: p.message,
                })
                .collect()
        };
        let message = match problems.first() {
            Some(first) if problems.len() == 1 => {
                format!(
                    "the document has a problem: {}: {}",
                    first.path, first.message
                )
            }
            Some(first) => format!(
                "the document has {} problems (all in `problems`), the first: {}: {}",
                problems.len(),
                first.path,
                first.message
            ),
            None => "the document was refused".to_owned(),
        };
        ApiError::InvalidDocument(Box::new(DocumentRefusal {
            error: ErrorDetail {
                code: ErrorCode::InvalidDocument.to_string(),
                message,
            },
            problems: convert(problems),
            warnings: convert(warnings),
        }))
    }

    /// A 409 without extra fields.
    pub fn conflict(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError::Conflict {
            code,
            message: message.into(),
        }
    }

    fn status_and_code(&self) -> (StatusCode, ErrorCode) {
        match self {
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, *code),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            ApiError::MethodNotAllowed(_) => {
                (StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed)
            }
            ApiError::Conflict { code, .. } => (StatusCode::CONFLICT, *code),
            ApiError::ClaimRefused(refusal) => (StatusCode::CONFLICT, refusal.reason.code()),
            ApiError::InvalidDocument(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::InvalidDocument)
            }
            ApiError::PayloadTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::BodyTooLarge)
            }
            ApiError::UnreadableBody(_) => (StatusCode::BAD_REQUEST, ErrorCode::UnreadableBody),
            ApiError::Unprocessable { code, .. } => (StatusCode::UNPROCESSABLE_ENTITY, *code),
            ApiError::Overloaded(_) => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Overloaded),
            ApiError::SecretsUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::SecretsUnavailable,
            ),
            ApiError::Database(error) if unavailable(error) => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::DatabaseUnavailable,
            ),
            ApiError::Database(error) if contended(error) => {
                (StatusCode::CONFLICT, ErrorCode::ConcurrentUpdate)
            }
            ApiError::Database(_) | ApiError::Internal(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError)
            }
        }
    }
}

impl From<crate::access::Denied> for ApiError {
    fn from(denied: crate::access::Denied) -> ApiError {
        use crate::access::Denied;
        ApiError::Forbidden(
            match denied {
                Denied::RunnerKey => "runner keys cannot call the operator functions",
                Denied::ReadOnly => "viewer keys can read but not act; use an operator key",
                Denied::NotAdmin => "managing keys and configuration takes an admin key",
            }
            .to_owned(),
        )
    }
}

/// The database cannot be reached (down, restarting, or every connection busy): the
/// caller should back off and retry.
fn unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_) => true,
        // 57P01-57P03: the server is shutting down or starting up; 08: connection errors;
        // 53: out of connections or memory; 55000 at connect: the database does not accept
        // connections now (ALLOW_CONNECTIONS false, as during maintenance); 25006: a write
        // reached a server in recovery (a failover under way).
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("57P")
                || code.starts_with("08")
                || code.starts_with("53")
                || code == "55000"
                || code == "25006"
        }),
        _ => false,
    }
}

/// Another transaction got in the way (a deadlock, a serialisation failure, a lock that
/// could not be had): nothing was changed and the same request may simply be retried.
fn contended(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db)
        if db.code().is_some_and(|code| matches!(code.as_ref(), "40P01" | "40001" | "55P03")))
}

impl ApiError {
    /// The status and the error as callers see it (the console shows the same words);
    /// database and internal details stay out of it ([`ApiError::log_cause`] logs them).
    pub(crate) fn detail(&self) -> (StatusCode, ErrorDetail) {
        let (status, code) = self.status_and_code();
        let message = match &self {
            ApiError::Database(_) if status == StatusCode::CONFLICT => {
                "another request changed the same execution at the same time; nothing was \
                 changed, retry"
                    .to_owned()
            }
            ApiError::Database(_) => {
                "the database could not answer; see the function's log".to_owned()
            }
            ApiError::Internal(_) => "the function failed; see its log".to_owned(),
            other => other.to_string(),
        };
        let detail = ErrorDetail {
            code: code.to_string(),
            message,
        };
        (status, detail)
    }

    /// Logs what [`ApiError::detail`] keeps from the caller; once, where the error is
    /// answered.
    pub(crate) fn log_cause(&self) {
        match self {
            ApiError::Database(error) if self.status_and_code().0 == StatusCode::CONFLICT => {
                tracing::warn!(%error, "concurrent update: the caller may retry");
            }
            ApiError::Database(error) => tracing::error!(%error, "database error"),
            ApiError::Internal(error) => tracing::error!(%error, "internal error"),
            _ => {}
        }
    }
}

/// An error's body as callers get it: the common shape, or a refusal's own.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub(crate) enum ErrorAnswer {
    Common(ErrorBody),
    Claim(Box<ClaimRefusal>),
    Document(Box<DocumentRefusal>),
}

impl ApiError {
    /// The status and body this error answers with (a batch item answers the same).
    pub(crate) fn into_answer(self) -> (StatusCode, ErrorAnswer) {
        self.log_cause();
        let (status, detail) = self.detail();
        let body = match self {
            ApiError::ClaimRefused(refusal) => ErrorAnswer::Claim(refusal),
            ApiError::InvalidDocument(refusal) => ErrorAnswer::Document(refusal),
            _ => ErrorAnswer::Common(ErrorBody { error: detail }),
        };
        (status, body)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = self.into_answer();
        (status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use res_shared::wire::ErrorCode;

    /// The errors table of docs/api.md is where callers learn what a code means.
    #[test]
    fn every_error_code_is_in_the_errors_table_of_the_api_docs() {
        let api = include_str!("../../docs/api.md");
        let header = "| status | codes | when |";
        let table = api
            .split_once("## Errors")
            .and_then(|(_, rest)| rest.split_once(header))
            .map(|(_, rest)| rest.split("\n\n").next().unwrap_or_default())
            .unwrap_or_default();
        assert!(table.contains("| 409 |"), "no errors table in docs/api.md");
        let missing: Vec<&str> = ErrorCode::ALL
            .iter()
            .map(|code| code.as_str())
            .filter(|code| !table.contains(&format!("`{code}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/api.md's errors table: {missing:?}"
        );
    }
}
