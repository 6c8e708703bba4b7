//! Loaded workflows by branch rule, so a rule that runs every few minutes does not parse
//! and check its workflow config each time. Capped (`plan_action_details_cap`): the
//! oldest entries go first; an entry is reloaded when the plan changed since.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use uuid::Uuid;

use crate::plan::Entry;
use crate::workflow::config::ConfigErrors;
use crate::workflow::engine::Engine;
use crate::workflow::prepare::Prepared;

/// The cache.
#[derive(Debug)]
pub struct PreparedCache {
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Uuid, (String, Arc<Prepared>)>,
    order: VecDeque<Uuid>,
}

impl PreparedCache {
    /// An empty cache of at most `cap` workflows.
    pub fn new(cap: usize) -> PreparedCache {
        PreparedCache {
            cap: cap.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The prepared workflow of `entry` under plan version `version` (the plan cursor).
    pub fn get_or_load(
        &self,
        engine: &Engine,
        entry: &Entry,
        lookups: &res_shared::wire::PlanLookups,
        version: &str,
    ) -> Result<Arc<Prepared>, ConfigErrors> {
        let id = entry.workflow.id;
        let key = format!("{version}|{}", entry.workflow.updated_at.to_rfc3339());
        {
            let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((cached, prepared)) = inner.entries.get(&id)
                && *cached == key
            {
                return Ok(Arc::clone(prepared));
            }
        }
        let prepared = Arc::new(Prepared::new(engine, &entry.workflow, lookups)?);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner
            .entries
            .insert(id, (key, Arc::clone(&prepared)))
            .is_none()
        {
            inner.order.push_back(id);
        }
        while inner.entries.len() > self.cap {
            match inner.order.pop_front() {
                Some(old) => {
                    inner.entries.remove(&old);
                }
                None => break,
            }
        }
        Ok(prepared)
    }

    /// Cached workflows.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
