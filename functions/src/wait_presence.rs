//! Runners waiting on a plan request stay present without asking again: a site whose plan
//! does not change costs one open request per wait (minutes) instead of one request per
//! stale-time fraction, and is still listed online, still its branches' offline owner.
//!
//! Every third of the stale time one statement refreshes every waiting runner of this
//! process. Then, since a waiting runner asks again only when its wait ends, the ones that
//! may own a branch whose owner went silent are answered at once: their next request takes
//! the branch over, as it would have had they been polling.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::db;
use crate::state::AppState;

/// Keeps this process's waiting runners present until `stop`.
pub async fn run(state: AppState, stop: CancellationToken) {
    let stale_after = state.settings.runner_thresholds.stale_after_seconds;
    let every = Duration::from_secs(u64::from(stale_after / 3)).max(Duration::from_secs(1));
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = stop.cancelled() => return,
        }
        if let Err(error) = refresh(&state, stale_after).await {
            tracing::warn!(%error, "cannot keep the waiting runners present; they count as silent until they ask again");
        }
    }
}

async fn refresh(state: &AppState, stale_after: u32) -> Result<(), sqlx::Error> {
    let (runners, ownable) = state.plan_waits.waiting_runners();
    if runners.is_empty() {
        return Ok(());
    }
    let pairs: Vec<(uuid::Uuid, &str)> = runners
        .iter()
        .map(|r| (r.key_id, r.runner_id.as_str()))
        .collect();
    // Only rows half the stale time old are rewritten: refreshed at most one period later,
    // a row is never older than five sixths of it, and a site costs one row write per
    // ~two thirds of the stale time instead of one per period.
    let older_than = f64::from(stale_after) / 2.0;
    let kept = db::runners::keep_present(&state.pool, &pairs, older_than).await?;
    state.metrics.runners_kept_present.inc_by(kept);
    if !ownable.is_empty() {
        let orphaned =
            db::runners::without_present_owner(&state.pool, &ownable, stale_after).await?;
        if !orphaned.is_empty() {
            tracing::info!(
                branches = orphaned.len(),
                "branches without an offline owner in contact: their waiting runners ask again"
            );
            state.plan_waits.answer_owners_of(&orphaned);
        }
    }
    Ok(())
}
