//! The operator console: server-rendered pages under `/console/` for people who look before
//! they type. Every page reads, and every button acts, through the operator functions' own
//! handlers and scope checks; the console adds sessions, CSRF tokens and HTML, nothing that
//! touches rules or executions by another path.

mod assets;
mod configuration;
mod error;
mod execution;
mod fleet;
mod group;
mod history;
mod query;
mod rule;
mod runners;
mod session;
mod strip;
mod view;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::{Next, from_fn};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

pub(crate) use error::ConsoleError;

use crate::state::AppState;

/// The console's routes, with their security headers.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route("/console/", get(fleet::page))
        .route("/console/fleet/group", post(group::act))
        .route("/console/rules", get(fleet::rules))
        .route("/console/rules/{id}", get(rule::page))
        .route(
            "/console/rules/{id}/configuration",
            get(configuration::page).post(configuration::edit),
        )
        .route("/console/rules/{id}/{action}", post(rule::act))
        .route("/console/executions", get(history::page))
        .route("/console/executions/{id}", get(execution::page))
        .route("/console/executions/{id}/cancel", post(execution::cancel))
        .route("/console/runners", get(runners::page))
        .route(
            "/console/sign-in",
            get(session::sign_in_page).post(session::sign_in),
        )
        .route("/console/sign-out", post(session::sign_out))
        .route("/console/assets/{name}", get(assets::asset))
        .route("/favicon.ico", get(assets::favicon))
        .route("/console/{*rest}", get(not_found).post(not_found))
        .layer(from_fn(session::same_origin))
        .layer(from_fn(security_headers))
}

async fn not_found() -> ConsoleError {
    ConsoleError::NotFound("there is no console page here".into())
}

/// The content policy: only this origin's own script and style, no frames, forms that post
/// only here. Pages are never cached: they show one key's scope.
async fn security_headers(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let is_asset = path.starts_with("/console/assets/") || path == "/favicon.ico";
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let fixed = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if !is_asset {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// A rendered page.
fn html(page: &impl askama::Template) -> Result<Response, ConsoleError> {
    Ok(axum::response::Html(page.render()?).into_response())
}
