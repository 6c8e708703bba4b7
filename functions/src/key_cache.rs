//! Verified keys, remembered for a bounded time so that a fleet's every request does not
//! look its token up again.
//!
//! A key changes rarely (revoked, rescoped, a branch added to its brand); a site calls every
//! few seconds. Where a process listens for key changes (`serve`, see `listener`), every
//! change clears the cache within moments and the cache is bypassed while that connection
//! is down; elsewhere (Lambda) an entry lives at most the configured time, which is then
//! the revocation delay.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use moka::sync::Cache;

use crate::access::Caller;

/// The default time a verified key is trusted without looking again.
pub const DEFAULT_SECONDS: u64 = 60;

/// More keys than any fleet has; a bound so that the cache cannot grow without end.
const MAX_KEYS: u64 = 200_000;

/// Callers by token hash.
#[derive(Debug)]
pub struct KeyCache {
    /// `None`: caching is off (a time of 0).
    entries: Option<Cache<String, Caller>>,
    /// False while key changes may go unheard (the listening connection is down).
    trusted: AtomicBool,
    /// Counts clears, so a lookup that raced one does not store what it read before it.
    generation: AtomicU64,
}

impl KeyCache {
    /// A cache whose entries live `ttl`; zero turns it off.
    pub fn new(ttl: Duration) -> KeyCache {
        let entries = (!ttl.is_zero()).then(|| {
            Cache::builder()
                .max_capacity(MAX_KEYS)
                .time_to_live(ttl)
                .build()
        });
        KeyCache {
            entries,
            trusted: AtomicBool::new(true),
            generation: AtomicU64::new(0),
        }
    }

    /// The caller a token hash was verified as, if still trusted.
    pub(crate) fn get(&self, key_hash: &str) -> Option<Caller> {
        if !self.trusted.load(Ordering::Acquire) {
            return None;
        }
        self.entries.as_ref()?.get(key_hash)
    }

    /// Taken before looking a key up in the database, and handed to [`KeyCache::insert`].
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Remembers what a lookup that started at `generation` read, unless a clear came
    /// since (it may have been about this very key).
    pub(crate) fn insert(&self, key_hash: String, caller: Caller, generation: u64) {
        let Some(entries) = &self.entries else { return };
        if self.generation() != generation {
            return;
        }
        entries.insert(key_hash.clone(), caller);
        // A clear between the check and the insert did not see this entry.
        if self.generation() != generation {
            entries.invalidate(&key_hash);
        }
    }

    /// Forgets every key: one changed.
    pub(crate) fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(entries) = &self.entries {
            entries.invalidate_all();
        }
    }

    /// Stops answering from memory until [`KeyCache::resume`]: changes may be missed.
    pub(crate) fn suspend(&self) {
        self.trusted.store(false, Ordering::Release);
        self.clear();
    }

    /// Answers from memory again, starting empty (what was missed is forgotten).
    pub(crate) fn resume(&self) {
        self.clear();
        self.trusted.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::access::Role;

    fn caller() -> Caller {
        Caller {
            key_id: Uuid::nil(),
            key_name: "site 1".into(),
            role: Role::Runner,
            all_brands: false,
            branch_ids: vec![Uuid::nil()],
        }
    }

    #[test]
    fn remembers_until_cleared() {
        let cache = KeyCache::new(Duration::from_secs(60));
        assert_eq!(cache.get("h"), None);
        cache.insert("h".into(), caller(), cache.generation());
        assert_eq!(cache.get("h"), Some(caller()));
        cache.clear();
        assert_eq!(cache.get("h"), None);
    }

    #[test]
    fn a_lookup_that_raced_a_clear_is_not_remembered() {
        let cache = KeyCache::new(Duration::from_secs(60));
        let before = cache.generation();
        cache.clear();
        cache.insert("h".into(), caller(), before);
        assert_eq!(cache.get("h"), None);
    }

    #[test]
    fn a_suspended_cache_answers_nothing_and_resumes_empty() {
        let cache = KeyCache::new(Duration::from_secs(60));
        cache.insert("h".into(), caller(), cache.generation());
        cache.suspend();
        assert_eq!(cache.get("h"), None);
        cache.insert("h".into(), caller(), cache.generation());
        assert_eq!(cache.get("h"), None, "nothing is trusted while suspended");
        cache.resume();
        assert_eq!(cache.get("h"), None, "resumes empty");
        cache.insert("h".into(), caller(), cache.generation());
        assert_eq!(cache.get("h"), Some(caller()));
    }

    #[test]
    fn zero_turns_it_off() {
        let cache = KeyCache::new(Duration::ZERO);
        cache.insert("h".into(), caller(), 0);
        assert_eq!(cache.get("h"), None);
    }

    #[test]
    fn entries_expire() {
        let cache = KeyCache::new(Duration::from_millis(50));
        cache.insert("h".into(), caller(), 0);
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(cache.get("h"), None);
    }
}
