//! The process's one LISTEN connection: what other processes committed and this one must
//! hear about at once. A key change clears the verified-key cache.
//!
//! Notifications are not durable: while the connection is down they are lost, so the cache
//! is bypassed until the connection is back, and starts empty then.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use crate::key_cache::KeyCache;

/// Notified (by triggers) when a key is changed or revoked, or a branch joins or leaves a
/// brand (which changes brand-scoped keys).
pub(crate) const KEYS_CHANNEL: &str = "res_keys";

/// How long to wait before connecting again after a failure.
const RETRY: Duration = Duration::from_secs(1);

/// Listens until `stop`; the cache answers from memory only while this listens.
pub async fn run(pool: PgPool, keys: Arc<KeyCache>, stop: CancellationToken) {
    keys.suspend();
    loop {
        let listening = tokio::select! {
            listening = listen(&pool, &keys) => listening,
            () = stop.cancelled() => return,
        };
        keys.suspend();
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
async fn listen(pool: &PgPool, keys: &KeyCache) -> Result<(), sqlx::Error> {
    // Its own connection, not one of the pool's: it is held for the process's life.
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with((*pool.connect_options()).clone());
    let mut listener = PgListener::connect_with(&own).await?;
    // A lost connection ends this function (and the cache's trust) rather than being
    // mended quietly inside the listener.
    listener.eager_reconnect(false);
    listener.listen_all([KEYS_CHANNEL]).await?;
    keys.resume();
    loop {
        let Some(notification) = listener.try_recv().await? else {
            return Ok(());
        };
        if notification.channel() == KEYS_CHANNEL {
            keys.clear();
        }
    }
}
