//! Taking turns: at most as many requests work at once as the pool has connections, and
//! the rest wait in line here.
//!
//! Without this, a burst (a fleet's top of the hour, every site fetching its plan after a
//! deploy) waits for connections inside the pool, whose short acquire timeout — what makes
//! an unreachable database a fast 503 — then refuses requests that only had to wait their
//! turn. Here a request waits up to [`QUEUE_WAIT`] for a turn before it is answered
//! `503 overloaded`; once working, it finds a connection free. A request that waits for
//! something else (a plan request waiting for a change) gives its turn back meanwhile.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use crate::metrics::Metrics;

/// The longest a request waits for its turn.
pub const QUEUE_WAIT: Duration = Duration::from_secs(10);

/// The turns: one per pool connection.
#[derive(Debug, Clone)]
pub struct Turns {
    permits: Arc<Semaphore>,
    wait: Duration,
}

/// A request's turn, and when it was taken; dropping it lets the next request work.
#[derive(Debug)]
pub(crate) struct Turn(
    #[allow(dead_code)] OwnedSemaphorePermit,
    // Tokio's clock, which tests can pause and advance.
    tokio::time::Instant,
);

/// The turn of the request being served, which its handler may give back while it waits
/// and take again (a request extension).
#[derive(Debug, Clone)]
pub(crate) struct TurnSlot {
    turn: Arc<Mutex<Option<Turn>>>,
    turns: Turns,
    /// How long the request held turns before the one it holds now.
    held: Arc<Mutex<Duration>>,
}

impl TurnSlot {
    /// Lets another request work while this one waits.
    pub(crate) fn give_back(&self) {
        let given = self.lock().take();
        if let Some(Turn(_, since)) = given {
            *self.held.lock().unwrap_or_else(PoisonError::into_inner) += since.elapsed();
        }
    }

    /// Ends the turn; how long the request held turns in all.
    fn end(&self) -> Duration {
        self.give_back();
        *self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits in line again (as long as a new request would) after [`TurnSlot::give_back`].
    pub(crate) async fn take_again(&self) -> Result<(), ApiError> {
        if self.lock().is_some() {
            return Ok(());
        }
        let turn = self.turns.take().await?;
        *self.lock() = Some(turn);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Turn>> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Turns {
    /// `count` requests at a time (at least one), each waiting up to [`QUEUE_WAIT`].
    pub fn new(count: usize) -> Turns {
        Turns::with_wait(count, QUEUE_WAIT)
    }

    fn with_wait(count: usize, wait: Duration) -> Turns {
        Turns {
            permits: Arc::new(Semaphore::new(count.max(1))),
            wait,
        }
    }

    /// Waits for a turn, or refuses with `overloaded` when none came in time.
    pub(crate) async fn take(&self) -> Result<Turn, ApiError> {
        match tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Turn(permit, tokio::time::Instant::now())),
            _ => Err(ApiError::Overloaded(self.wait.as_secs())),
        }
    }
}

/// Middleware: waits for a turn (counted in `request_turn_wait_seconds` when `metrics` are
/// given), then serves the request.
pub(crate) async fn take_turn(
    State((turns, metrics)): State<(Turns, Option<Arc<Metrics>>)>,
    mut request: Request,
    next: Next,
) -> Response {
    let asked = Instant::now();
    let taken = turns.take().await;
    if let Some(metrics) = &metrics {
        metrics.observe_turn_wait(request.uri().path(), asked.elapsed().as_secs_f64());
    }
    match taken {
        Ok(turn) => {
            let path = request.uri().path().to_owned();
            let slot = TurnSlot {
                turn: Arc::new(Mutex::new(Some(turn))),
                turns,
                held: Arc::default(),
            };
            request.extensions_mut().insert(slot.clone());
            let response = next.run(request).await;
            // The turn ends here unless the handler gave it back already.
            let held = slot.end();
            if let Some(metrics) = &metrics {
                metrics.observe_turn_held(&path, held.as_secs_f64());
            }
            response
        }
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::middleware::from_fn_with_state;
    use axum::routing::get;
    use axum::{Extension, Router};
    use tower::ServiceExt;

    use super::*;

    fn app(turns: Turns) -> Router {
        Router::new()
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    "done"
                }),
            )
            .layer(from_fn_with_state((turns, None), take_turn))
    }

    fn get_slow() -> Request {
        Request::get("/slow")
            .body(Body::empty())
            .expect("a request")
    }

    #[tokio::test]
    async fn a_request_waits_for_a_turn_and_is_refused_when_none_comes_in_time() {
        let turns = Turns::with_wait(1, Duration::from_millis(50));
        let first = tokio::spawn(app(turns.clone()).oneshot(get_slow()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let refused = app(turns.clone())
            .oneshot(get_slow())
            .await
            .expect("an answer");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(refused.into_body(), 4096)
            .await
            .expect("body");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(body["error"]["code"], "overloaded");
        let served = first.await.expect("joined").expect("an answer");
        assert_eq!(served.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn a_request_that_gives_its_turn_back_lets_another_work_meanwhile() {
        let turns = Turns::with_wait(1, Duration::from_millis(100));
        let polite = Router::new()
            .route(
                "/wait",
                get(|Extension(slot): Extension<TurnSlot>| async move {
                    slot.give_back();
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    slot.take_again().await.map(|()| "waited")
                }),
            )
            .layer(from_fn_with_state((turns.clone(), None), take_turn));
        let waiting = tokio::spawn(
            polite.oneshot(
                Request::get("/wait")
                    .body(Body::empty())
                    .expect("a request"),
            ),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let meanwhile = app(turns).oneshot(get_slow()).await.expect("an answer");
        assert_eq!(meanwhile.status(), StatusCode::OK);
        let waited = waiting.await.expect("joined").expect("an answer");
        let status = waited.status();
        let body = axum::body::to_bytes(waited.into_body(), 4096)
            .await
            .expect("body");
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_counts_as_held_only_while_the_request_holds_it() {
        let turns = Turns::with_wait(1, Duration::from_secs(5));
        let slot = TurnSlot {
            turn: Arc::new(Mutex::new(Some(turns.take().await.expect("a turn")))),
            turns: turns.clone(),
            held: Arc::default(),
        };
        tokio::time::advance(Duration::from_millis(100)).await;
        slot.give_back();
        // Given back, the turn is another request's meanwhile.
        let other = turns.take().await.expect("the turn given back");
        tokio::time::advance(Duration::from_secs(30)).await;
        drop(other);
        slot.take_again().await.expect("the turn again");
        tokio::time::advance(Duration::from_millis(50)).await;
        assert_eq!(slot.end(), Duration::from_millis(150));
        // Ended, the turn is free.
        assert!(turns.take().await.is_ok());
    }

    #[tokio::test]
    async fn a_request_that_waits_less_than_the_limit_is_served() {
        let turns = Turns::with_wait(1, Duration::from_secs(5));
        let first = tokio::spawn(app(turns.clone()).oneshot(get_slow()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = app(turns).oneshot(get_slow()).await.expect("an answer");
        assert_eq!(second.status(), StatusCode::OK);
        assert_eq!(
            first.await.expect("joined").expect("an answer").status(),
            StatusCode::OK
        );
    }
}
