//! One evaluation: what needs someone now against what was announced, in one transaction
//! that records the changes and queues their messages (run by the sweeper, so one process
//! at a time).

use std::collections::BTreeSet;

use res_shared::wire::RunnerThresholds;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::items::{Changes, diff};
use super::message::{Event, body};
use crate::db;
use crate::db::alerts::Queued;

/// Delivered messages are kept this long (then pruned).
const DELIVERED_KEPT_DAYS: i32 = 7;

/// What one evaluation announced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Evaluation {
    pub opened: u64,
    pub resolved: u64,
    /// Messages queued (an item's, once per channel of its brand).
    pub queued: u64,
}

/// Announces what opened and what resolved since the last evaluation.
pub async fn evaluate(
    pool: &PgPool,
    thresholds: RunnerThresholds,
) -> Result<Evaluation, sqlx::Error> {
    let current = db::alerts::current(pool, thresholds).await?;
    let mut tx = pool.begin().await?;
    let open = db::alerts::open_items(&mut tx).await?;
    let Changes { opened, resolved } = diff(current, open);
    let brands: Vec<Uuid> = opened
        .iter()
        .map(|i| i.subject.brand_id)
        .chain(resolved.iter().map(|i| i.subject.brand_id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let channels = db::alerts::channels_of(&mut tx, &brands).await?;
    let announcements = opened
        .iter()
        .map(|i| (Event::Firing, &i.key, i.kind, &i.subject))
        .chain(
            resolved
                .iter()
                .map(|i| (Event::Resolved, &i.key, i.kind, &i.subject)),
        );
    let mut messages = Vec::new();
    for (event, key, kind, subject) in announcements {
        for channel in channels.iter().filter(|c| c.brand_id == subject.brand_id) {
            messages.push(Queued {
                channel_id: channel.id,
                event: event.as_str(),
                item_key: key,
                payload: body(channel.kind, event, key, Some(kind), subject),
            });
        }
    }
    db::alerts::open(&mut tx, &opened).await?;
    let closed: Vec<&str> = resolved.iter().map(|i| i.key.as_str()).collect();
    db::alerts::close(&mut tx, &closed).await?;
    db::alerts::queue(&mut *tx, &messages).await?;
    tx.commit().await?;
    db::alerts::prune_delivered(pool, DELIVERED_KEPT_DAYS).await?;
    for item in &opened {
        tracing::info!(item = %item.key, kind = item.kind.as_str(), "alert opened");
    }
    for item in &resolved {
        tracing::info!(item = %item.key, kind = item.kind.as_str(), "alert resolved");
    }
    Ok(Evaluation {
        opened: opened.len() as u64,
        resolved: resolved.len() as u64,
        queued: messages.len() as u64,
    })
}
