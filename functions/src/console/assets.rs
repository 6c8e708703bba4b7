//! The console's stylesheet and script, compiled into the binary: nothing is fetched from
//! anywhere else at run time.

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::error::ConsoleError;

const ASSETS: [(&str, &str, &str); 3] = [
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../../assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/console.js"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("../../assets/icon.svg"),
    ),
];

/// `/favicon.ico`, which browsers ask for whatever the page says: the console's icon.
pub(super) async fn favicon() -> Result<Response, ConsoleError> {
    asset(Path("icon.svg".to_owned())).await
}

pub(super) async fn asset(Path(name): Path<String>) -> Result<Response, ConsoleError> {
    let (_, content_type, body) = ASSETS
        .iter()
        .find(|(asset, _, _)| *asset == name)
        .ok_or_else(|| ConsoleError::NotFound(format!("no console asset {name:?}")))?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            ),
        ],
        *body,
    )
        .into_response())
}
