//! Plan requests waiting for a change in their scope (the bounded wait of
//! `get-execution-plan-v2`): the one listening connection hears every committed plan change
//! and wakes only the requests whose scope it touches, so thousands of waiting sites cost
//! one database connection and no queries until something of theirs changes.
//!
//! A waiting runner is in contact: the registry lists who waits, so that one statement keeps
//! them all present (`wait_presence`) instead of each site asking again to be counted.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use uuid::Uuid;

use crate::access::Scope;

/// Who waits for what.
#[derive(Debug, Default)]
pub struct PlanWaits {
    waiting: Mutex<Waiting>,
    next_id: AtomicU64,
    count: AtomicUsize,
    /// Whether notifications are being heard; without them nobody may wait.
    listening: AtomicBool,
    /// The process is shutting down: nobody may wait any more.
    stopped: AtomicBool,
}

#[derive(Debug, Default)]
struct Waiting {
    /// Waiters on one or more branches, by branch.
    by_branch: HashMap<Uuid, HashMap<u64, Arc<Signal>>>,
    /// Waiters whose scope is every branch.
    everywhere: HashMap<u64, Arc<Signal>>,
    /// The runners waiting, by waiter.
    runners: HashMap<u64, WaitingRunner>,
}

/// How a waiter is woken: to look again, or to answer whatever it reads.
#[derive(Debug, Default)]
struct Signal {
    woken: Notify,
    answer: AtomicBool,
}

impl Signal {
    fn answer_now(&self) {
        self.answer.store(true, Ordering::SeqCst);
        self.woken.notify_one();
    }
}

/// A site's runner holding a plan request open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WaitingRunner {
    pub(crate) key_id: Uuid,
    pub(crate) runner_id: String,
    /// The branches it serves and may own offline (empty when it said it never runs
    /// offline, or did not say).
    pub(crate) may_own: Vec<Uuid>,
}

/// One waiting request's registration; dropping it unregisters.
#[derive(Debug)]
pub(crate) struct Waiter {
    waits: Arc<PlanWaits>,
    id: u64,
    branches: Option<Vec<Uuid>>,
    signal: Arc<Signal>,
}

impl PlanWaits {
    /// Registers interest in `scope`'s changes, or `None` when notifications are not heard
    /// (no listener, or its connection is down) and a wait could miss a change. A runner
    /// waiting is kept present while it waits.
    pub(crate) fn watch(
        self: &Arc<Self>,
        scope: Scope<'_>,
        runner: Option<WaitingRunner>,
    ) -> Option<Waiter> {
        if !self.listening.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst) {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let signal = Arc::new(Signal::default());
        let branches = match scope {
            Scope::All => None,
            Scope::Branches(branches) => Some(branches.to_vec()),
        };
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.lock();
        match &branches {
            None => {
                waiting.everywhere.insert(id, signal.clone());
            }
            Some(branches) => {
                for branch in branches {
                    waiting
                        .by_branch
                        .entry(*branch)
                        .or_default()
                        .insert(id, signal.clone());
                }
            }
        }
        if let Some(runner) = runner {
            waiting.runners.insert(id, runner);
        }
        Some(Waiter {
            waits: self.clone(),
            id,
            branches,
            signal,
        })
    }

    /// A change committed in `branch` (`None`: shared definitions, every plan).
    pub(crate) fn changed(&self, branch: Option<Uuid>) {
        let waiting = self.lock();
        for signal in waiting.everywhere.values() {
            signal.woken.notify_one();
        }
        match branch {
            Some(branch) => {
                for signal in waiting
                    .by_branch
                    .get(&branch)
                    .into_iter()
                    .flat_map(HashMap::values)
                {
                    signal.woken.notify_one();
                }
            }
            None => {
                for signal in waiting.by_branch.values().flat_map(HashMap::values) {
                    signal.woken.notify_one();
                }
            }
        }
    }

    /// The listener is connected (`true`) or lost (`false`); losing it answers every
    /// waiter, since the changes it would have heard are lost with it.
    pub(crate) fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::SeqCst);
        if !listening {
            self.answer_all();
        }
    }

    /// The process stops: every waiter answers now, and nobody waits from here on, so a
    /// graceful shutdown is not held up by waits of minutes.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.answer_all();
    }

    /// Whether [`PlanWaits::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn answer_all(&self) {
        let waiting = self.lock();
        for signal in waiting
            .everywhere
            .values()
            .chain(waiting.by_branch.values().flat_map(HashMap::values))
        {
            signal.answer_now();
        }
    }

    /// The runners waiting now, each once, and the branches some waiting runner may own.
    pub(crate) fn waiting_runners(&self) -> (Vec<WaitingRunner>, Vec<Uuid>) {
        let waiting = self.lock();
        let mut runners: Vec<WaitingRunner> = waiting.runners.values().cloned().collect();
        runners.sort_by(|a, b| (a.key_id, &a.runner_id).cmp(&(b.key_id, &b.runner_id)));
        runners.dedup_by(|a, b| a.key_id == b.key_id && a.runner_id == b.runner_id);
        let ownable: BTreeSet<Uuid> = runners
            .iter()
            .flat_map(|r| r.may_own.iter().copied())
            .collect();
        (runners, ownable.into_iter().collect())
    }

    /// Answers the waiting runners that may own one of `branches`, so that their next
    /// request takes the branch over (a branch's owner went silent while they waited).
    pub(crate) fn answer_owners_of(&self, branches: &[Uuid]) {
        let waiting = self.lock();
        for branch in branches {
            for (id, signal) in waiting.by_branch.get(branch).into_iter().flatten() {
                let may_own = waiting
                    .runners
                    .get(id)
                    .is_some_and(|runner| runner.may_own.contains(branch));
                if may_own {
                    signal.answer_now();
                }
            }
        }
    }

    /// How many requests wait now.
    pub fn waiting(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Waiter {
    /// Resolves when a change in this waiter's scope was heard since it registered (or
    /// since the last wake-up), or it must answer.
    pub(crate) async fn changed(&self) {
        self.signal.woken.notified().await;
    }

    /// The request must answer with what it reads now instead of waiting on.
    pub(crate) fn must_answer(&self) -> bool {
        self.signal.answer.load(Ordering::SeqCst)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.waits.count.fetch_sub(1, Ordering::Relaxed);
        let mut waiting = self.waits.lock();
        waiting.runners.remove(&self.id);
        match &self.branches {
            None => {
                waiting.everywhere.remove(&self.id);
            }
            Some(branches) => {
                for branch in branches {
                    if let Some(waiters) = waiting.by_branch.get_mut(branch) {
                        waiters.remove(&self.id);
                        if waiters.is_empty() {
                            waiting.by_branch.remove(branch);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening() -> Arc<PlanWaits> {
        let waits = Arc::new(PlanWaits::default());
        waits.set_listening(true);
        waits
    }

    fn runner(name: &str, may_own: &[Uuid]) -> WaitingRunner {
        WaitingRunner {
            key_id: Uuid::nil(),
            runner_id: name.to_owned(),
            may_own: may_own.to_vec(),
        }
    }

    #[test]
    fn a_branch_change_wakes_without_asking_to_answer() {
        let waits = listening();
        let branch = Uuid::new_v4();
        let waiter = waits
            .watch(Scope::Branches(&[branch]), None)
            .expect("listening");
        waits.changed(Some(branch));
        assert!(!waiter.must_answer());
    }

    #[test]
    fn only_a_runner_that_may_own_the_branch_is_answered_for_it() {
        let waits = listening();
        let branch = Uuid::new_v4();
        let owner = waits
            .watch(Scope::Branches(&[branch]), Some(runner("a", &[branch])))
            .expect("listening");
        let never_offline = waits
            .watch(Scope::Branches(&[branch]), Some(runner("b", &[])))
            .expect("listening");
        assert_eq!(waits.waiting_runners().1, vec![branch]);
        waits.answer_owners_of(&[branch]);
        assert!(owner.must_answer());
        assert!(!never_offline.must_answer());
    }

    #[test]
    fn the_same_runner_twice_is_kept_present_once_and_leaves_when_it_stops_waiting() {
        let waits = listening();
        let branch = Uuid::new_v4();
        let first = waits.watch(Scope::Branches(&[branch]), Some(runner("a", &[])));
        let second = waits.watch(Scope::Branches(&[branch]), Some(runner("a", &[])));
        assert_eq!(waits.waiting_runners().0, vec![runner("a", &[])]);
        drop((first, second));
        assert!(waits.waiting_runners().0.is_empty());
        assert_eq!(waits.waiting(), 0);
    }

    #[test]
    fn stopping_answers_every_waiter_and_refuses_new_ones() {
        let waits = listening();
        let everywhere = waits.watch(Scope::All, None).expect("listening");
        let one = waits
            .watch(Scope::Branches(&[Uuid::new_v4()]), None)
            .expect("listening");
        waits.stop();
        assert!(everywhere.must_answer() && one.must_answer());
        assert!(waits.watch(Scope::All, None).is_none());
    }
}
