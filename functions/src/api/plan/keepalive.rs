//! A waiting plan request that shows it is alive. A NAT box or proxy that forgets an idle
//! connection says nothing to either end: a runner whose waiting request was black-holed
//! used to hear nothing until the granted wait ran out (minutes, at the waits the cost per
//! site asks for). A runner that asks (the request header [`ASKED`]) is answered at once
//! with `200` and [`ANSWERED`], then a space every `--plan-keepalive-seconds` (10 by
//! default) while the request waits —
//! JSON allows whitespace before a value — then the plan. The runner gives up on a body
//! silent for its request timeout (15 s by default), so a dead link is noticed within that,
//! whatever the granted wait. The spaces cost the database nothing: they come from the
//! waiting task, which holds neither a connection nor a turn.
//!
//! Only a request that will wait is answered so: one whose first read already has news is
//! answered as before, status and all. A failure after the `200` (the database gone while
//! the request waited) ends the body unfinished, which the runner takes as no answer and
//! asks again — as it would after a `503`.

use std::future::Future;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

use crate::error::ApiError;

/// The request header a runner sends when it reads keep-alive spaces.
pub(crate) const ASKED: &str = "res-keepalive";
/// The response header that says spaces come, and how often (seconds).
pub(crate) const ANSWERED: &str = "res-keepalive-seconds";
/// Whether the request asked for keep-alive spaces.
pub(crate) fn asked(headers: &HeaderMap) -> bool {
    headers.contains_key(ASKED)
}

/// A `200` at once, a space every `interval` until `answer` is ready, then its bytes; an
/// error ends the body unfinished. Dropping the body (the runner went away) drops `answer`.
pub(crate) fn respond(
    interval: Duration,
    answer: impl Future<Output = Result<Vec<u8>, ApiError>> + Send + 'static,
) -> Response {
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        let mut answer = std::pin::pin!(answer);
        let start = tokio::time::Instant::now() + interval;
        let mut ticks = tokio::time::interval_at(start, interval);
        loop {
            tokio::select! {
                biased;
                done = &mut answer => {
                    let piece = done.map(Bytes::from).map_err(|error| {
                        tracing::warn!(%error, "a waiting plan request failed after its 200; its body ends unfinished");
                        std::io::Error::other(error.to_string())
                    });
                    let _ = sender.send(piece).await;
                    return;
                }
                () = sender.closed() => return,
                _ = ticks.tick() => {
                    if sender.send(Ok(Bytes::from_static(b" "))).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let pieces = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|piece| (piece, receiver))
    });
    let mut response = Response::new(Body::from_stream(pieces));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ANSWERED, HeaderValue::from(interval.as_secs()));
    // nginx holds a response back in its buffers unless told not to; so would the spaces.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use http_body_util::BodyExt;

    use super::*;

    const INTERVAL: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn spaces_come_while_the_answer_waits_then_the_answer() {
        let response = respond(INTERVAL, async {
            tokio::time::sleep(INTERVAL * 2 + Duration::from_secs(1)).await;
            Ok(b"{\"full\": false}".to_vec())
        });
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[ANSWERED], "10");
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the body")
            .to_bytes();
        assert_eq!(&body[..], b"  {\"full\": false}");
        let parsed: serde_json::Value =
            serde_json::from_slice(&body).expect("JSON with leading spaces");
        assert_eq!(parsed["full"], false);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_after_the_200_ends_the_body_unfinished() {
        let response = respond(INTERVAL, async {
            tokio::time::sleep(INTERVAL + Duration::from_secs(1)).await;
            Err(ApiError::Internal("the database went away".into()))
        });
        let mut stream = response.into_body().into_data_stream();
        assert_eq!(
            stream.next().await.map(|p| p.ok()),
            Some(Some(Bytes::from_static(b" ")))
        );
        assert!(
            stream.next().await.is_some_and(|p| p.is_err()),
            "the body errs, not ends well"
        );
    }
}
