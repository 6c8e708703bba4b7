//! Memory throttling: above the configured share of host RAM no new job starts.

use std::sync::Mutex;

use sysinfo::System;

/// Reads host memory use.
#[derive(Debug)]
pub(crate) struct MemoryProbe {
    limit_percent: f64,
    system: Mutex<Option<System>>,
}

impl MemoryProbe {
    /// A probe with a limit in percent of host RAM.
    pub(crate) fn new(limit_percent: f64) -> MemoryProbe {
        MemoryProbe {
            limit_percent,
            system: Mutex::new(None),
        }
    }

    /// Host memory in use, percent; `None` where it cannot be read.
    pub(crate) fn used_percent(&self) -> Option<f64> {
        let mut guard = self
            .system
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            *guard = System::new().ok();
        }
        let system = guard.as_mut()?;
        system.refresh_memory();
        let total = system.total_memory();
        (total > 0).then(|| system.used_memory() as f64 * 100.0 / total as f64)
    }

    /// `Some(used)` when memory use is at or above the limit.
    pub(crate) fn over_limit(&self) -> Option<f64> {
        self.used_percent()
            .filter(|used| *used >= self.limit_percent)
    }

    /// The limit.
    pub(crate) fn limit_percent(&self) -> f64 {
        self.limit_percent
    }
}
