//! The job queue (reference 001): a rule is queued only if it is not queued already, not
//! being run, and not just processed for the same due time. Deduplication is by run, not
//! by a fixed window: once the plan shows a new due time the rule is queued again at once,
//! however soon (a `*/5` seconds cron runs every 5 seconds); only a rule whose due time
//! has not moved since it was processed (its report is still on its way, or was refused)
//! waits out `recent_seconds`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A queued rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub(crate) branch_rule_id: Uuid,
    /// When it became due (for dispatch lag).
    pub(crate) due_at: DateTime<Utc>,
    /// The plan's due time it runs for (`None`: never scheduled), for deduplication.
    pub(crate) scheduled_for: Option<DateTime<Utc>>,
}

/// Why a rule was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// It is in the queue.
    Queued,
    /// A worker is running it.
    Active,
    /// It was processed moments ago for this same due time (the plan does not show its
    /// new next run yet).
    Recent,
}

/// Queue state; callers hold it behind a lock.
#[derive(Debug)]
pub(crate) struct JobQueue {
    order: VecDeque<Uuid>,
    queued: HashMap<Uuid, Job>,
    active: HashMap<Uuid, Option<DateTime<Utc>>>,
    recent: HashMap<Uuid, (Instant, Option<DateTime<Utc>>)>,
    recent_window: Duration,
}

impl JobQueue {
    /// An empty queue that refuses a rule processed within `recent_window` for the same
    /// due time.
    pub(crate) fn new(recent_window: Duration) -> JobQueue {
        JobQueue {
            order: VecDeque::new(),
            queued: HashMap::new(),
            active: HashMap::new(),
            recent: HashMap::new(),
            recent_window,
        }
    }

    /// Queues a job unless it is queued, active or recent.
    pub(crate) fn push(&mut self, job: Job, now: Instant) -> Result<(), Refused> {
        let id = job.branch_rule_id;
        if self.queued.contains_key(&id) {
            return Err(Refused::Queued);
        }
        if self.active.contains_key(&id) {
            return Err(Refused::Active);
        }
        if self.is_recent(id, job.scheduled_for, now) {
            return Err(Refused::Recent);
        }
        self.queued.insert(id, job);
        self.order.push_back(id);
        Ok(())
    }

    /// Takes the oldest job and marks it active.
    pub(crate) fn pop(&mut self) -> Option<Job> {
        while let Some(id) = self.order.pop_front() {
            if let Some(job) = self.queued.remove(&id) {
                self.active.insert(id, job.scheduled_for);
                return Some(job);
            }
        }
        None
    }

    /// A worker is done with a rule.
    pub(crate) fn finish(&mut self, id: Uuid, now: Instant) {
        if let Some(scheduled_for) = self.active.remove(&id) {
            self.recent.insert(id, (now, scheduled_for));
        }
        let window = self.recent_window;
        self.recent
            .retain(|_, (at, _)| now.duration_since(*at) < window);
    }

    /// Whether a rule is queued or active (the scheduler skips those).
    pub(crate) fn holds(&self, id: Uuid) -> bool {
        self.queued.contains_key(&id) || self.active.contains_key(&id)
    }

    /// Whether a rule due at `scheduled_for` would be refused at `now`: queued, active, or
    /// processed for that same due time too recently.
    pub(crate) fn refuses(
        &self,
        id: Uuid,
        scheduled_for: Option<DateTime<Utc>>,
        now: Instant,
    ) -> bool {
        self.holds(id) || self.is_recent(id, scheduled_for, now)
    }

    fn is_recent(&self, id: Uuid, scheduled_for: Option<DateTime<Utc>>, now: Instant) -> bool {
        self.recent.get(&id).is_some_and(|(at, processed)| {
            *processed == scheduled_for && now.duration_since(*at) < self.recent_window
        })
    }

    /// When the earliest "processed recently" refusal ends (the scheduler wakes then).
    pub(crate) fn next_recent_expiry(&self, now: Instant) -> Option<Instant> {
        self.recent
            .values()
            .map(|(at, _)| *at + self.recent_window)
            .filter(|until| *until > now)
            .min()
    }

    /// Jobs waiting.
    pub(crate) fn len(&self) -> usize {
        self.queued.len()
    }

    /// Whether no job waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Jobs being run.
    pub(crate) fn active(&self) -> usize {
        self.active.len()
    }

    /// Drops every waiting job (shutdown).
    pub(crate) fn clear(&mut self) -> Vec<Job> {
        self.order.clear();
        self.queued.drain().map(|(_, job)| job).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: Uuid) -> Job {
        Job {
            branch_rule_id: id,
            due_at: crate::clock::now(),
            scheduled_for: None,
        }
    }

    #[test]
    fn a_rule_is_never_queued_twice_nor_while_active_nor_just_after() {
        let mut queue = JobQueue::new(Duration::from_secs(30));
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let t0 = Instant::now();
        assert_eq!(queue.push(job(a), t0), Ok(()));
        assert_eq!(queue.push(job(a), t0), Err(Refused::Queued));
        assert_eq!(queue.push(job(b), t0), Ok(()));
        assert_eq!(
            queue.pop().map(|j| j.branch_rule_id),
            Some(a),
            "first in, first out"
        );
        assert_eq!(queue.push(job(a), t0), Err(Refused::Active));
        assert!(queue.holds(a));
        queue.finish(a, t0);
        assert!(!queue.holds(a));
        assert_eq!(
            queue.push(job(a), t0 + Duration::from_secs(29)),
            Err(Refused::Recent)
        );
        assert!(queue.refuses(a, None, t0 + Duration::from_secs(29)));
        assert_eq!(
            queue.next_recent_expiry(t0),
            Some(t0 + Duration::from_secs(30))
        );
        assert_eq!(queue.push(job(a), t0 + Duration::from_secs(30)), Ok(()));
        assert_eq!((queue.len(), queue.active()), (2, 0));
        assert_eq!(queue.clear().len(), 2);
        assert!(queue.pop().is_none());
    }

    #[test]
    fn a_rule_whose_due_time_moved_on_is_queued_again_at_once() {
        let mut queue = JobQueue::new(Duration::from_secs(30));
        let a = Uuid::new_v4();
        let t0 = Instant::now();
        let at = |secs: i64| Some(crate::clock::now() + chrono::TimeDelta::seconds(secs));
        let (first, second) = (at(0), at(5));
        let due = |scheduled_for| Job {
            scheduled_for,
            ..job(a)
        };
        assert_eq!(queue.push(due(first), t0), Ok(()));
        queue.pop();
        queue.finish(a, t0 + Duration::from_secs(1));
        // The plan still shows the due time just run: held back for the window.
        assert!(queue.refuses(a, first, t0 + Duration::from_secs(2)));
        assert_eq!(
            queue.push(due(first), t0 + Duration::from_secs(2)),
            Err(Refused::Recent)
        );
        // The report moved it on five seconds: it runs when due, not after 30 s.
        assert!(!queue.refuses(a, second, t0 + Duration::from_secs(5)));
        assert_eq!(queue.push(due(second), t0 + Duration::from_secs(5)), Ok(()));
    }
}
