//! The outbox: reports and violations the functions could not take, kept on disk one file
//! each (written atomically) and delivered in order when they answer again. Nothing in it
//! is lost across restarts; an item the functions refuse for good is moved aside, not
//! dropped.
//!
//! A camera host's disk fills with video. When an item cannot be written (disk full,
//! read-only), it is held in memory in its place in the order and delivered from there
//! while the functions answer; every later item joins it there, and each push (and each
//! delivery) first tries to write the held ones to disk again. Only a restart while the
//! disk is still unwritable loses what is held; the status page, `/metrics` and the logs
//! say so while it lasts (`unwritable`).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, Utc};
use res_shared::wire::{SetNextRunTimeRequest, ViolationRequest};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::plan::file::write_atomic;

/// Something to deliver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "request", rename_all = "snake_case")]
pub(crate) enum Item {
    /// A finished run (`branch_rules_set_NextRunTime`).
    Report(SetNextRunTimeRequest),
    Violation(ViolationRequest),
}

/// The durable queue.
#[derive(Debug)]
pub(crate) struct Outbox {
    dir: PathBuf,
    next: Mutex<u64>,
    depth: AtomicUsize,
    added: Notify,
    /// Undelivered reports per branch rule: a rule is not claimed again while one waits.
    reports: Mutex<HashMap<Uuid, usize>>,
    /// Items that could not be written, by sequence, after every item on disk.
    held: Mutex<Vec<(u64, Item)>>,
    /// Since when, and why, items cannot be written.
    unwritable: Mutex<Option<Unwritable>>,
}

/// The outbox's directory refuses writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Unwritable {
    pub(crate) since: DateTime<Utc>,
    pub(crate) error: String,
}

/// A stored item.
#[derive(Debug)]
pub(crate) struct Stored {
    /// Its file (for an item held in memory, the file it will get).
    pub(crate) path: PathBuf,
    /// Held in memory, not on disk.
    pub(crate) in_memory: bool,
    /// The item (`None` if the file is unreadable; it is moved aside).
    pub(crate) item: Option<Item>,
}

impl Outbox {
    /// Opens (creating) the outbox in `dir`.
    pub(crate) fn open(dir: &Path) -> io::Result<Outbox> {
        fs::create_dir_all(dir)?;
        let files = list(dir)?;
        let next = files
            .iter()
            .filter_map(|p| sequence(p))
            .max()
            .map_or(1, |n| n + 1);
        let mut reports = HashMap::new();
        for path in &files {
            if let Some(rule) = read(path).as_ref().and_then(Item::reported_rule) {
                *reports.entry(rule).or_insert(0) += 1;
            }
        }
        Ok(Outbox {
            dir: dir.to_owned(),
            next: Mutex::new(next),
            depth: AtomicUsize::new(files.len()),
            added: Notify::new(),
            reports: Mutex::new(reports),
            held: Mutex::new(Vec::new()),
            unwritable: Mutex::new(None),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Item)>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn unwritable_state(&self) -> std::sync::MutexGuard<'_, Option<Unwritable>> {
        self.unwritable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Since when items cannot be written, and why; `None` while they can.
    pub(crate) fn unwritable(&self) -> Option<Unwritable> {
        self.unwritable_state().clone()
    }

    /// Items held in memory.
    pub(crate) fn in_memory(&self) -> usize {
        self.held().len()
    }

    fn path_of(&self, sequence: u64) -> PathBuf {
        self.dir.join(format!("{sequence:016}.json"))
    }

    /// Writes the held items to disk, oldest first, until one fails; true when none is left.
    fn write_held(&self, held: &mut Vec<(u64, Item)>) -> bool {
        while let Some((sequence, item)) = held.first() {
            let written = serde_json::to_vec(item)
                .map_err(io::Error::other)
                .and_then(|bytes| write_atomic(&self.path_of(*sequence), &bytes));
            if let Err(error) = written {
                self.note_unwritable(&error);
                return false;
            }
            held.remove(0);
        }
        self.writable_again();
        true
    }

    /// Every held item is on disk and a write succeeded: the directory takes writes again.
    fn writable_again(&self) {
        if let Some(was) = self.unwritable_state().take() {
            tracing::warn!(since = %was.since, "the outbox can be written again: every item held in memory is on disk");
        }
    }

    /// Notes that the state directory refused a write (the outbox's or another's, such as
    /// the offline journal's).
    pub(crate) fn note_unwritable(&self, error: &io::Error) {
        let mut unwritable = self.unwritable_state();
        if unwritable.is_none() {
            tracing::error!(%error, dir = %self.dir.display(), "cannot write the state directory: outbox items are held in memory and delivered from there until it can be written (a restart before then loses them)");
            *unwritable = Some(Unwritable {
                since: crate::clock::now(),
                error: error.to_string(),
            });
        }
    }

    /// Whether a report of `branch_rule_id` waits to be delivered.
    pub(crate) fn holds_report_for(&self, branch_rule_id: Uuid) -> bool {
        self.reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(&branch_rule_id)
    }

    fn count_report(&self, item: Option<&Item>, delta: isize) {
        let Some(rule) = item.and_then(Item::reported_rule) else {
            return;
        };
        let mut reports = self
            .reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = reports.entry(rule).or_insert(0);
        *count = count.saturating_add_signed(delta);
        if *count == 0 {
            reports.remove(&rule);
        }
    }

    /// Stores an item after everything stored before it: on disk, or held in memory while
    /// the disk refuses it.
    pub(crate) fn push(&self, item: &Item) -> io::Result<()> {
        let bytes = serde_json::to_vec(item).map_err(io::Error::other)?;
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let sequence = *next;
        *next += 1;
        let mut held = self.held();
        // Behind items held in memory an item is held too, unless they can be written now.
        let written = if held.is_empty() || self.write_held(&mut held) {
            write_atomic(&self.path_of(sequence), &bytes)
                .inspect_err(|error| self.note_unwritable(error))
                .is_ok()
        } else {
            false
        };
        if !written {
            held.push((sequence, item.clone()));
        }
        drop(held);
        self.count_report(Some(item), 1);
        self.depth.fetch_add(1, Ordering::SeqCst);
        drop(next);
        self.added.notify_one();
        Ok(())
    }

    /// Items waiting, oldest first: those on disk, then those held in memory (tried on disk
    /// again first).
    pub(crate) fn pending(&self) -> io::Result<Vec<Stored>> {
        let mut held = self.held();
        if !held.is_empty() {
            self.write_held(&mut held);
        } else if self.unwritable().is_some() {
            // Nothing held (all delivered from memory): a small write tells whether the
            // state directory takes writes again.
            let probe = self.dir.join(".probe");
            match write_atomic(&probe, b"{}") {
                Ok(()) => {
                    let _ = fs::remove_file(&probe);
                    self.writable_again();
                }
                Err(error) => self.note_unwritable(&error),
            }
        }
        let files = list(&self.dir)?;
        self.depth.store(files.len() + held.len(), Ordering::SeqCst);
        let mut pending: Vec<Stored> = files
            .into_iter()
            .map(|path| Stored {
                item: read(&path),
                path,
                in_memory: false,
            })
            .collect();
        pending.extend(held.iter().map(|(sequence, item)| Stored {
            path: self.path_of(*sequence),
            item: Some(item.clone()),
            in_memory: true,
        }));
        Ok(pending)
    }

    /// The reports waiting, oldest first.
    pub(crate) fn kept_reports(&self) -> io::Result<Vec<SetNextRunTimeRequest>> {
        Ok(self
            .pending()?
            .into_iter()
            .filter_map(|stored| match stored.item {
                Some(Item::Report(request)) => Some(request),
                _ => None,
            })
            .collect())
    }

    /// Removes a delivered item.
    pub(crate) fn remove(&self, stored: &Stored) -> io::Result<()> {
        if !self.forget_held(stored) {
            fs::remove_file(&stored.path)?;
        }
        self.depth.fetch_sub(1, Ordering::SeqCst);
        self.count_report(stored.item.as_ref(), -1);
        Ok(())
    }

    /// Whether `stored` was held in memory (it is forgotten there, or was written since).
    fn forget_held(&self, stored: &Stored) -> bool {
        if !stored.in_memory {
            return false;
        }
        let mut held = self.held();
        let before = held.len();
        held.retain(|(sequence, _)| self.path_of(*sequence) != stored.path);
        // Written to disk after it was listed: its file goes as any other.
        before != held.len()
    }

    /// Moves an item the functions refused for good to `rejected/`, for a person to look at.
    pub(crate) fn reject(&self, stored: &Stored) -> io::Result<PathBuf> {
        let dir = self.dir.join("rejected");
        fs::create_dir_all(&dir)?;
        let name = stored
            .path
            .file_name()
            .map_or_else(|| "item.json".into(), |n| n.to_owned());
        let target = dir.join(name);
        if self.forget_held(stored) {
            let bytes = serde_json::to_vec(&stored.item).map_err(io::Error::other)?;
            write_atomic(&target, &bytes)?;
        } else {
            fs::rename(&stored.path, &target)?;
        }
        self.depth.fetch_sub(1, Ordering::SeqCst);
        self.count_report(stored.item.as_ref(), -1);
        Ok(target)
    }

    /// Items waiting.
    pub(crate) fn depth(&self) -> usize {
        self.depth.load(Ordering::SeqCst)
    }

    /// Resolves when an item is pushed.
    pub(crate) async fn added(&self) {
        self.added.notified().await;
    }
}

impl Item {
    /// The branch rule a report is about (violations are not reports).
    fn reported_rule(&self) -> Option<Uuid> {
        match self {
            Item::Report(request) => Some(request.branch_rule_id),
            Item::Violation(_) => None,
        }
    }
}

fn read(path: &Path) -> Option<Item> {
    fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
}

fn sequence(path: &Path) -> Option<u64> {
    path.file_stem()?.to_str()?.parse().ok()
}

fn list(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && sequence(p).is_some())
        .collect();
    files.sort_by_key(|p| sequence(p));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn violation(key: &str) -> Item {
        Item::Violation(ViolationRequest {
            execution_id: Uuid::nil(),
            claim_token: "t".into(),
            kind: "queue".into(),
            details: serde_json::json!({}),
            idempotency_key: key.into(),
        })
    }

    #[test]
    fn items_come_back_in_order_after_a_reopen() {
        let dir = std::env::temp_dir().join(format!("res-outbox-{}", Uuid::new_v4()));
        let outbox = Outbox::open(&dir).expect("opens");
        for key in ["a", "b", "c"] {
            outbox.push(&violation(key)).expect("stored");
        }
        let first = outbox.pending().expect("lists");
        outbox.remove(&first[0]).expect("removes");
        drop(outbox);

        let reopened = Outbox::open(&dir).expect("reopens");
        assert_eq!(reopened.depth(), 2);
        reopened.push(&violation("d")).expect("stored");
        let keys: Vec<String> = reopened
            .pending()
            .expect("lists")
            .into_iter()
            .filter_map(|s| match s.item {
                Some(Item::Violation(v)) => Some(v.idempotency_key),
                _ => None,
            })
            .collect();
        assert_eq!(keys, ["b", "c", "d"]);
        let pending = reopened.pending().expect("lists");
        let moved = reopened.reject(&pending[0]).expect("moved aside");
        assert!(moved.exists());
        assert_eq!(reopened.depth(), 2);
        fs::remove_dir_all(&dir).ok();
    }

    fn keys(outbox: &Outbox) -> Vec<(String, bool)> {
        outbox
            .pending()
            .expect("lists")
            .into_iter()
            .filter_map(|s| match s.item {
                Some(Item::Violation(v)) => Some((v.idempotency_key, s.in_memory)),
                _ => None,
            })
            .collect()
    }

    /// A write that fails (here: a directory where the item's temporary file goes, as a
    /// full disk fails it) holds the item in memory in its place; later items queue behind
    /// it; once writes succeed again, the held items reach the disk first, in order.
    #[test]
    fn items_the_disk_refuses_are_held_in_memory_in_order_until_it_takes_them() {
        let dir = std::env::temp_dir().join(format!("res-outbox-{}", Uuid::new_v4()));
        let outbox = Outbox::open(&dir).expect("opens");
        outbox.push(&violation("a")).expect("stored");
        let blocked: Vec<PathBuf> = [2, 3]
            .iter()
            .map(|n| dir.join(format!("{n:016}.tmp")))
            .collect();
        for path in &blocked {
            fs::create_dir(path).expect("blocked");
        }
        outbox.push(&violation("b")).expect("held");
        let since = outbox.unwritable().expect("unwritable").since;
        outbox.push(&violation("c")).expect("held");
        assert_eq!((outbox.depth(), outbox.in_memory()), (3, 2));
        assert_eq!(
            keys(&outbox),
            [("a".into(), false), ("b".into(), true), ("c".into(), true)]
        );
        let pending = outbox.pending().expect("lists");
        outbox.remove(&pending[1]).expect("delivered from memory");
        assert_eq!((outbox.depth(), outbox.in_memory()), (2, 1));
        assert_eq!(
            outbox.unwritable().map(|u| u.since),
            Some(since),
            "since the first refusal"
        );
        for path in &blocked {
            fs::remove_dir(path).expect("unblocked");
        }
        outbox.push(&violation("d")).expect("stored");
        assert_eq!(outbox.unwritable(), None);
        assert_eq!(outbox.in_memory(), 0);
        drop(outbox);
        let reopened = Outbox::open(&dir).expect("reopens");
        assert_eq!(
            keys(&reopened),
            [
                ("a".into(), false),
                ("c".into(), false),
                ("d".into(), false)
            ],
            "all on disk, in order, the delivered one gone"
        );
        fs::remove_dir_all(&dir).ok();
    }
}
