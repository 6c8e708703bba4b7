//! The master loop: sleeps until the next rule is due, a window opens, the plan changes or
//! the safety tick, then queues ready rules (at most `max_jobs_per_cycle` per cycle).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Daemon;
use super::queue::Job;
use crate::plan::ready;

/// Runs until shutdown.
pub(crate) async fn run(daemon: Arc<Daemon>) {
    let safety = Duration::from_secs(daemon.config.safety_tick_seconds);
    // The scheduler keeps its time this far behind: a rule due at a second is dispatched
    // that much after it, and every wake-up comes as late (see `Config::start_offset`).
    let start_offset = daemon.config.start_offset();
    let mut throttled_since: Option<Instant> = None;
    loop {
        // Interest first, check second: a change between the two still wakes us.
        let changed = daemon.plan.notify().notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if daemon.shutdown.is_cancelled() {
            return;
        }
        let now = crate::clock::now() - start_offset;
        let sleep = match daemon.memory.over_limit() {
            Some(used) => {
                daemon.metrics.memory_throttled.set(1);
                if throttled_since.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                    tracing::warn!(
                        used_percent = format!("{used:.1}"),
                        limit_percent = daemon.memory.limit_percent(),
                        "memory throttling: no new job starts"
                    );
                    throttled_since = Some(Instant::now());
                }
                Duration::from_secs(1)
            }
            None => {
                daemon.metrics.memory_throttled.set(0);
                throttled_since = None;
                let queued = dispatch(&daemon, now);
                let wake = ready::next_wake(&daemon.plan.read(), now);
                // A due rule held back as "processed recently" is due again when that ends.
                let recent = daemon
                    .queue()
                    .next_recent_expiry(Instant::now())
                    .map(|at| at.saturating_duration_since(Instant::now()));
                if queued == daemon.config.max_jobs_per_cycle {
                    // More may be ready: come back as soon as a worker frees up.
                    safety
                } else {
                    until(wake, now).min(safety).min(recent.unwrap_or(safety))
                }
            }
        };
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = changed => {}
            () = daemon.shutdown.cancelled() => return,
        }
    }
}

/// Queues the rules ready at `now`; returns how many.
pub(crate) fn dispatch(daemon: &Daemon, now: DateTime<Utc>) -> usize {
    let jobs: Vec<Job> = {
        let plan = daemon.plan.read();
        let queue = daemon.queue();
        let at = Instant::now();
        let scheduled_for = |id: Uuid| {
            plan.workflows
                .get(&id)
                .and_then(|e| e.workflow.resume_at.or(e.workflow.next_run_time))
        };
        let ids = ready::ready(&plan, now, daemon.config.max_jobs_per_cycle, &|id| {
            queue.refuses(id, scheduled_for(id), at)
        });
        ids.into_iter()
            .map(|id| {
                let scheduled_for = scheduled_for(id);
                Job {
                    branch_rule_id: id,
                    due_at: scheduled_for.map_or(now, |due| due.min(now)),
                    scheduled_for,
                }
            })
            .collect()
    };
    let mut queued = 0;
    {
        let mut queue = daemon.queue();
        for job in jobs {
            if queue.push(job, Instant::now()).is_ok() {
                queued += 1;
            }
        }
    }
    if queued > 0 {
        tracing::debug!(queued, "jobs queued");
        for _ in 0..queued {
            daemon.job_added.notify_one();
        }
    }
    queued
}

/// Time from `now` to `wake` (zero when past), or a long time when nothing is scheduled.
fn until(wake: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    match wake {
        Some(at) => (at - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_millis(5),
        None => Duration::MAX,
    }
}
