//! The process's one LISTEN connection: what other processes committed and this one must
//! hear about at once. A key change clears the verified-key cache; a plan change wakes the
//! plan requests waiting on its branch.
//!
//! Notifications are not durable: while the connection is down they are lost, so the cache
//! is bypassed until the connection is back, and starts empty then, and plan requests do
//! not wait (waiting ones are answered at once).

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::state::AppState;

/// Notified (by triggers) when a key is changed or revoked, or a branch joins or leaves a
/// brand (which changes brand-scoped keys).
pub(crate) const KEYS_CHANNEL: &str = "res_keys";

/// Notified (by a trigger on `plan_changes`) with the branch whose plan changed, or an
/// empty payload when shared definitions changed.
pub(crate) const PLAN_CHANNEL: &str = "res_plan";

/// How long to wait before connecting again after a failure.
const RETRY: Duration = Duration::from_secs(1);

/// Listens until `stop`; the key cache answers from memory, and plan requests wait, only
/// while this listens.
pub async fn run(state: AppState, stop: CancellationToken) {
    // Requests wait only where this runs; the runners among them are kept present.
    tokio::spawn(crate::wait_presence::run(state.clone(), stop.clone()));
    state.keys.suspend();
    loop {
        let listening = tokio::select! {
            listening = listen(&state) => listening,
            () = stop.cancelled() => return,
        };
        state.keys.suspend();
        state.plan_waits.set_listening(false);
        if let Err(error) = listening {
            tracing::warn!(%error, "the notification connection failed; keys are looked up on every request until it is back");
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Connects, listens, and dispatches until the connection fails.
async fn listen(state: &AppState) -> Result<(), sqlx::Error> {
    // Its own connection, not one of the pool's: it is held for the process's life.
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with((*state.pool.connect_options()).clone());
    let mut listener = PgListener::connect_with(&own).await?;
    // A lost connection ends this function (and the cache's trust) rather than being
    // mended quietly inside the listener.
    listener.eager_reconnect(false);
    listener.listen_all([KEYS_CHANNEL, PLAN_CHANNEL]).await?;
    state.keys.resume();
    state.plan_waits.set_listening(true);
    loop {
        let Some(notification) = listener.try_recv().await? else {
            return Ok(());
        };
        match notification.channel() {
            KEYS_CHANNEL => state.keys.clear(),
            // An unreadable payload wakes everyone rather than no one.
            PLAN_CHANNEL => state
                .plan_waits
                .changed(Uuid::parse_str(notification.payload()).ok()),
            _ => {}
        }
    }
}
