//! Sends the notification outbox: each channel's oldest waiting message, signed for a
//! webhook, retried with backoff (doubling from 1 s up to the configured most) until the
//! channel takes it. A process told to stop hands back what it has claimed but not sent, so
//! a restart sends it at once; one that dies mid-delivery leaves its claim to run out, and
//! the message is sent again (receivers deduplicate on `res-delivery`).

use std::time::Duration;

use chrono::Utc;
use res_shared::untrusted::Untrusted;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::sign::{DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature};
use crate::db;
use crate::db::alerts::Claimed;
use crate::metrics::Metrics;

/// Messages claimed per round.
const BATCH: i64 = 50;
/// How long a claim keeps other processes off a message being sent.
const CLAIM_SECONDS: f64 = 60.0;
/// The most a channel's answer may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a refusing channel's answer is kept as its error.
const ERROR_EXCERPT: usize = 200;

/// What one round sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryRound {
    pub delivered: u64,
    pub failed: u64,
}

/// A client for the channels (its own: no functions token, a short timeout).
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    res_client::tls::install();
    reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .user_agent(concat!("res-functions/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Claims and sends one batch; a failed message waits `min(2^(attempts-1), max_backoff)`.
/// Once `stop` is cancelled the messages not yet answered are handed back unsent: a claim
/// left behind by a clean shutdown would hold the channel for a minute.
pub async fn deliver_round(
    pool: &PgPool,
    client: &reqwest::Client,
    max_backoff: Duration,
    metrics: &Metrics,
    stop: &CancellationToken,
) -> Result<DeliveryRound, sqlx::Error> {
    let claimed = db::alerts::claim(pool, BATCH, CLAIM_SECONDS).await?;
    let mut round = DeliveryRound::default();
    for (index, message) in claimed.iter().enumerate() {
        let sent = tokio::select! {
            biased;
            () = stop.cancelled() => {
                let unsent: Vec<i64> = claimed[index..].iter().map(|m| m.id).collect();
                db::alerts::release(pool, &unsent).await?;
                break;
            }
            sent = send(client, message) => sent,
        };
        match sent {
            Ok(()) => {
                db::alerts::delivered(pool, message.id, message.channel_id).await?;
                Metrics::count(&metrics.notifications, "delivered");
                round.delivered += 1;
            }
            Err(error) => {
                let exponent = u32::try_from(message.attempts.max(1) - 1)
                    .unwrap_or(0)
                    .min(30);
                let wait = Duration::from_secs(1u64 << exponent).min(max_backoff);
                tracing::warn!(
                    channel_id = %message.channel_id,
                    delivery = message.id,
                    attempts = message.attempts,
                    retry_in_seconds = wait.as_secs_f64(),
                    error = %Untrusted(&error),
                    "notification not delivered"
                );
                db::alerts::failed(
                    pool,
                    (message.id, message.channel_id),
                    &error,
                    wait.as_secs_f64(),
                )
                .await?;
                Metrics::count(&metrics.notifications, "failed");
                round.failed += 1;
            }
        }
    }
    Ok(round)
}

/// POSTs one message; the error in words (what the channel answered, or why it did not).
async fn send(client: &reqwest::Client, message: &Claimed) -> Result<(), String> {
    let body = serde_json::to_vec(&message.payload.0).map_err(|e| e.to_string())?;
    let mut request = client
        .post(&message.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(DELIVERY_HEADER, message.id.to_string());
    if let Some(secret) = &message.secret {
        let timestamp = Utc::now().timestamp();
        request = request
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature(secret, timestamp, &body));
    }
    let response = request
        .body(body)
        .send()
        .await
        .map_err(|e| format!("cannot reach the channel: {e}"))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    let excerpt: String = text.chars().take(ERROR_EXCERPT).collect();
    Err(format!("the channel answered {status}: {excerpt}"))
}

/// Delivers until `stop`: rounds back to back while there is work, then a look every second.
pub async fn run(
    pool: PgPool,
    max_backoff: Duration,
    metrics: std::sync::Arc<Metrics>,
    stop: CancellationToken,
) {
    let client = match client() {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "cannot build the notification client: no alerts are sent");
            return;
        }
    };
    loop {
        let busy = match deliver_round(&pool, &client, max_backoff, &metrics, &stop).await {
            Ok(round) => round.delivered + round.failed > 0,
            Err(error) => {
                tracing::warn!(%error, "notification delivery failed; retrying");
                false
            }
        };
        if busy && !stop.is_cancelled() {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stop.cancelled() => return,
        }
    }
}
