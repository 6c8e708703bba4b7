//! A webhook receiver for the alert tests: records every POST (headers and body) and can be
//! taken down (it answers 503) and brought back, on a port of its own.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    /// A header's value as text (empty when absent).
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    /// The body as JSON (null when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

#[derive(Clone, Default)]
struct Shared {
    received: Arc<Mutex<Vec<Received>>>,
    /// Requests refused while down.
    refused: Arc<Mutex<usize>>,
    down: Arc<AtomicBool>,
}

/// A running receiver; it stops with the test's runtime.
pub struct Receiver {
    /// `http://127.0.0.1:<port>/hook`.
    pub url: String,
    shared: Shared,
}

impl Receiver {
    /// Listens on a free local port.
    pub async fn start() -> Receiver {
        let shared = Shared::default();
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("a local port");
        let address = listener.local_addr().expect("its address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://{address}/hook"),
            shared,
        }
    }

    /// Everything accepted so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared
            .received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests were refused while down.
    pub fn refused(&self) -> usize {
        *self
            .shared
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers 503 to everything until [`Receiver::up`].
    pub fn down(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
    }

    /// Accepts again.
    pub fn up(&self) {
        self.shared.down.store(false, Ordering::SeqCst);
    }
}

async fn receive(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if shared.down.load(Ordering::SeqCst) {
        *shared
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner) += 1;
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    shared
        .received
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Received { headers, body });
    StatusCode::NO_CONTENT
}

/// Whether `received` carries a valid signature of its body under `secret`, made within
/// five minutes of now: `res-signature: v1=<hex HMAC-SHA256 of "<res-timestamp>.<body>">`.
pub fn signed_by(received: &Received, secret: &str) -> bool {
    use hmac::{Hmac, KeyInit, Mac};
    let timestamp = received.header("res-timestamp");
    let Ok(seconds) = timestamp.parse::<i64>() else {
        return false;
    };
    if (chrono::Utc::now().timestamp() - seconds).abs() > 300 {
        return false;
    }
    let Ok(mut mac) = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(&received.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    received.header("res-signature") == format!("v1={expected}")
}
