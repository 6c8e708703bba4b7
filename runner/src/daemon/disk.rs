//! Free space in the state directory, watched so that an operator hears of a filling disk
//! before a write fails (the outbox then holds reports in memory, and offline runs stop).
//! Read with `statvfs` whenever health is asked for — `/healthz`, `/status`, `/metrics`, each
//! plan request — which costs a system call and no write.

use std::path::PathBuf;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// The state directory's space as last read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Space {
    /// Bytes an unprivileged writer may still use.
    pub(crate) free_bytes: u64,
    /// Since when it has been under the threshold; `None` while there is room.
    pub(crate) low_since: Option<DateTime<Utc>>,
}

/// Watches one directory's free space against a threshold.
#[derive(Debug)]
pub(crate) struct DiskWatch {
    dir: PathBuf,
    threshold_bytes: u64,
    low_since: Mutex<Option<DateTime<Utc>>>,
}

impl DiskWatch {
    /// Watches `dir`, warning below `threshold_mb` MiB (0: never).
    pub(crate) fn new(dir: PathBuf, threshold_mb: u64) -> DiskWatch {
        DiskWatch {
            dir,
            threshold_bytes: threshold_mb.saturating_mul(1024 * 1024),
            low_since: Mutex::new(None),
        }
    }

    /// The space now; `None` when the file system cannot be asked (the directory gone).
    pub(crate) fn read(&self) -> Option<Space> {
        let stats = nix::sys::statvfs::statvfs(&self.dir).ok()?;
        // `fsblkcnt_t` is narrower than u64 on some 32-bit targets.
        #[allow(clippy::useless_conversion)]
        let free_bytes = u64::from(stats.blocks_available()).saturating_mul(stats.fragment_size());
        let mut since = self
            .low_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *since = low_since(
            free_bytes,
            self.threshold_bytes,
            *since,
            crate::clock::now(),
        );
        Some(Space {
            free_bytes,
            low_since: *since,
        })
    }
}

/// Since when space has been low, given `free` bytes now, the threshold, and what was said
/// before: kept while it stays low, set when it turns low, cleared when there is room again.
fn low_since(
    free: u64,
    threshold: u64,
    before: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    (free < threshold).then(|| before.unwrap_or(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_space_is_dated_from_when_it_turned_low_and_cleared_with_room() {
        let t0: DateTime<Utc> = "2026-12-07T10:00:00Z".parse().expect("t0");
        let t1: DateTime<Utc> = "2026-12-07T10:05:00Z".parse().expect("t1");
        let mb = 1024 * 1024;
        assert_eq!(low_since(500 * mb, 100 * mb, None, t0), None);
        assert_eq!(low_since(99 * mb, 100 * mb, None, t0), Some(t0));
        assert_eq!(low_since(10 * mb, 100 * mb, Some(t0), t1), Some(t0), "kept");
        assert_eq!(
            low_since(100 * mb, 100 * mb, Some(t0), t1),
            None,
            "room again"
        );
        assert_eq!(
            low_since(0, 0, None, t0),
            None,
            "a threshold of 0 never warns"
        );
    }

    #[test]
    fn a_real_directory_reports_its_free_space() {
        let watch = DiskWatch::new(std::env::temp_dir(), 0);
        let space = watch.read().expect("statvfs of the temporary directory");
        assert_eq!(space.low_since, None);
        let huge = DiskWatch::new(std::env::temp_dir(), u64::MAX / (1024 * 1024));
        assert!(huge.read().expect("read").low_since.is_some());
        assert!(
            DiskWatch::new("/nonexistent/res".into(), 1)
                .read()
                .is_none()
        );
    }
}
