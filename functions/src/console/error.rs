//! The console's one error type: every refusal becomes a page in the console's frame with
//! the status the operator functions would answer, and the same words.

use askama::Template;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use crate::error::ApiError;

/// Everything a console page can answer besides itself.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsoleError {
    /// Not signed in (or the session ended): to the sign-in page, and back afterwards.
    #[error("sign in first")]
    SignIn { next: Option<String> },
    /// What the operator functions refused, in their words.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// An action the operator functions refused, shown with a way back to where it was asked.
    #[error("{what} refused: {error}")]
    Refused {
        what: &'static str,
        error: ApiError,
        back: String,
    },
    /// No such page (ids out of scope answer through `Api` as unknown ones).
    #[error("{0}")]
    NotFound(String),
    /// A stale or forged form, or a form from another site.
    #[error("{0}")]
    Forbidden(String),
    /// A filter or form field that cannot be read, named.
    #[error("{0}")]
    BadInput(String),
    #[error("a page could not be rendered: {0}")]
    Render(#[from] askama::Error),
}

impl From<sqlx::Error> for ConsoleError {
    fn from(error: sqlx::Error) -> Self {
        ConsoleError::Api(ApiError::from(error))
    }
}

impl From<FormRejection> for ConsoleError {
    fn from(rejection: FormRejection) -> Self {
        ConsoleError::BadInput(format!(
            "the form could not be read: {}",
            rejection.body_text()
        ))
    }
}

impl From<QueryRejection> for ConsoleError {
    fn from(rejection: QueryRejection) -> Self {
        ConsoleError::BadInput(format!(
            "the page's filters could not be read: {}",
            rejection.body_text()
        ))
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    message: &'a str,
    back: &'a str,
}

impl ConsoleError {
    /// The status and the words an operator sees.
    pub(crate) fn shown(&self) -> (StatusCode, String) {
        match self {
            ConsoleError::SignIn { .. } => (StatusCode::UNAUTHORIZED, self.to_string()),
            ConsoleError::Api(error) => {
                error.log_cause();
                let (status, detail) = error.detail();
                (status, detail.message)
            }
            ConsoleError::Refused { what, error, .. } => {
                error.log_cause();
                let (status, detail) = error.detail();
                (status, format!("{what} refused: {}", detail.message))
            }
            ConsoleError::NotFound(message) => (StatusCode::NOT_FOUND, message.clone()),
            ConsoleError::Forbidden(message) => (StatusCode::FORBIDDEN, message.clone()),
            ConsoleError::BadInput(message) => (StatusCode::UNPROCESSABLE_ENTITY, message.clone()),
            ConsoleError::Render(error) => {
                tracing::error!(%error, "console page failed to render");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the page could not be shown; see the function's log".into(),
                )
            }
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        if let ConsoleError::SignIn { next } = &self {
            let target = match next {
                Some(next) => format!(
                    "/console/sign-in?{}",
                    super::query::encode(&[("next", Some(next.clone()))])
                ),
                None => "/console/sign-in".to_owned(),
            };
            return Redirect::to(&target).into_response();
        }
        let (status, message) = self.shown();
        let back = match &self {
            ConsoleError::Refused { back, .. } => back.as_str(),
            _ => "/console/",
        };
        let page = ErrorPage {
            status: status.as_u16(),
            title: status.canonical_reason().unwrap_or("Error"),
            message: &message,
            back,
        };
        match page.render() {
            Ok(body) => (status, axum::response::Html(body)).into_response(),
            Err(error) => {
                tracing::error!(%error, "the error page failed to render");
                (status, message).into_response()
            }
        }
    }
}
