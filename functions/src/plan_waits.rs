//! Plan requests waiting for a change in their scope (the bounded wait of
//! `get-execution-plan-v2`): the one listening connection hears every committed plan change
//! and wakes only the requests whose scope it touches, so thousands of waiting sites cost
//! one database connection and no queries until something of theirs changes.

use std::collections::HashMap;
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
}

#[derive(Debug, Default)]
struct Waiting {
    /// Waiters on one or more branches, by branch.
    by_branch: HashMap<Uuid, HashMap<u64, Arc<Notify>>>,
    /// Waiters whose scope is every branch.
    everywhere: HashMap<u64, Arc<Notify>>,
}

/// One waiting request's registration; dropping it unregisters.
#[derive(Debug)]
pub(crate) struct Waiter {
    waits: Arc<PlanWaits>,
    id: u64,
    branches: Option<Vec<Uuid>>,
    woken: Arc<Notify>,
}

impl PlanWaits {
    /// Registers interest in `scope`'s changes, or `None` when notifications are not heard
    /// (no listener, or its connection is down) and a wait could miss a change.
    pub(crate) fn watch(self: &Arc<Self>, scope: Scope<'_>) -> Option<Waiter> {
        if !self.listening.load(Ordering::SeqCst) {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let woken = Arc::new(Notify::new());
        let branches = match scope {
            Scope::All => None,
            Scope::Branches(branches) => Some(branches.to_vec()),
        };
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.lock();
        match &branches {
            None => {
                waiting.everywhere.insert(id, woken.clone());
            }
            Some(branches) => {
                for branch in branches {
                    waiting
                        .by_branch
                        .entry(*branch)
                        .or_default()
                        .insert(id, woken.clone());
                }
            }
        }
        Some(Waiter {
            waits: self.clone(),
            id,
            branches,
            woken,
        })
    }

    /// A change committed in `branch` (`None`: shared definitions, every plan).
    pub(crate) fn changed(&self, branch: Option<Uuid>) {
        let waiting = self.lock();
        for woken in waiting.everywhere.values() {
            woken.notify_one();
        }
        match branch {
            Some(branch) => {
                for woken in waiting
                    .by_branch
                    .get(&branch)
                    .into_iter()
                    .flat_map(HashMap::values)
                {
                    woken.notify_one();
                }
            }
            None => {
                for woken in waiting.by_branch.values().flat_map(HashMap::values) {
                    woken.notify_one();
                }
            }
        }
    }

    /// The listener is connected (`true`) or lost (`false`); losing it wakes every waiter,
    /// since the changes it would have heard are lost with it.
    pub(crate) fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::SeqCst);
        if !listening {
            self.changed(None);
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
    /// since the last wake-up).
    pub(crate) async fn changed(&self) {
        self.woken.notified().await;
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.waits.count.fetch_sub(1, Ordering::Relaxed);
        let mut waiting = self.waits.lock();
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
