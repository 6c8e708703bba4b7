//! The outbox: reports and violations the functions could not take, kept on disk one file
//! each (written atomically) and delivered in order when they answer again. Nothing in it
//! is lost across restarts; an item the functions refuse for good is moved aside, not
//! dropped.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

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
}

/// A stored item.
#[derive(Debug)]
pub(crate) struct Stored {
    /// Its file.
    pub(crate) path: PathBuf,
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
        })
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

    /// Stores an item durably, after everything stored before it.
    pub(crate) fn push(&self, item: &Item) -> io::Result<()> {
        let bytes = serde_json::to_vec(item).map_err(io::Error::other)?;
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = self.dir.join(format!("{:016}.json", *next));
        write_atomic(&path, &bytes)?;
        *next += 1;
        self.count_report(Some(item), 1);
        self.depth.fetch_add(1, Ordering::SeqCst);
        drop(next);
        self.added.notify_one();
        Ok(())
    }

    /// Items waiting, oldest first.
    pub(crate) fn pending(&self) -> io::Result<Vec<Stored>> {
        let files = list(&self.dir)?;
        self.depth.store(files.len(), Ordering::SeqCst);
        Ok(files
            .into_iter()
            .map(|path| Stored {
                item: read(&path),
                path,
            })
            .collect())
    }

    /// The reports waiting, oldest first.
    pub(crate) fn kept_reports(&self) -> io::Result<Vec<SetNextRunTimeRequest>> {
        Ok(list(&self.dir)?
            .iter()
            .filter_map(|path| match read(path) {
                Some(Item::Report(request)) => Some(request),
                _ => None,
            })
            .collect())
    }

    /// Removes a delivered item.
    pub(crate) fn remove(&self, stored: &Stored) -> io::Result<()> {
        fs::remove_file(&stored.path)?;
        self.depth.fetch_sub(1, Ordering::SeqCst);
        self.count_report(stored.item.as_ref(), -1);
        Ok(())
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
        fs::rename(&stored.path, &target)?;
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
}
