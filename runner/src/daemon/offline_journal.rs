//! Offline runs in progress, on disk: a run without a claim has no lease for the cloud to
//! see expire, so its start is written here (atomically) before its detector starts, kept
//! fresh while it runs, and removed once its report is stored. An entry found at start
//! belongs to a run this runner was killed during (`kill -9`, power loss); it becomes a
//! `crashed` report in the outbox, so the run leaves a record and is retried in its chain
//! (reference 004: "find runs with status=active, mark crashed, create a recovery run"):
//! the chain is noted per rule (`retry/<rule>.json`) until the rule's next run continues
//! it, so that run keys its violations by the chain's root, as a retry the cloud hands out
//! does, and records nothing twice that the crashed run recorded.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use res_shared::wire::{FinishStatus, OfflineRun, OfflineViolation, SetNextRunTimeRequest};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::plan::file::write_atomic;

/// How often a running offline run's entry is rewritten: a crashed run's recorded end is at
/// most this long before the runner actually stopped.
pub(crate) const REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// One offline run in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Started {
    pub(crate) branch_rule_id: Uuid,
    pub(crate) execution_id: Uuid,
    /// The runner-chosen token its report carries, so a repeated report is recognised.
    pub(crate) claim_token: String,
    pub(crate) runner_id: String,
    pub(crate) started_at: DateTime<Utc>,
    /// The last time the run was seen alive.
    pub(crate) alive_at: DateTime<Utc>,
    /// Violations its business actions found so far.
    #[serde(default)]
    pub(crate) violations: Vec<OfflineViolation>,
    /// The first attempt of its retry chain, when it retries a crashed run (absent in
    /// entries of older runners: a first attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) root_execution_id: Option<Uuid>,
    /// Its attempt in that chain (absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) attempt: Option<i32>,
}

/// A retry chain a rule's next run continues: its root and the attempt that crashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Chain {
    pub(crate) root: Uuid,
    pub(crate) attempt: i32,
}

impl Chain {
    /// The next attempt of this chain.
    pub(crate) fn next(self) -> Chain {
        Chain {
            root: self.root,
            attempt: self.attempt.saturating_add(1),
        }
    }
}

impl Started {
    /// The chain this run is an attempt of.
    pub(crate) fn chain(&self) -> Chain {
        Chain {
            root: self.root_execution_id.unwrap_or(self.execution_id),
            attempt: self.attempt.unwrap_or(1),
        }
    }

    /// The report of this run, stopped without finishing: crashed from its start to when
    /// it was last seen alive, with what it had found.
    pub(crate) fn crashed_report(&self) -> SetNextRunTimeRequest {
        SetNextRunTimeRequest {
            branch_rule_id: self.branch_rule_id,
            is_last_run_failed: true,
            execution_id: Some(self.execution_id),
            claim_token: Some(self.claim_token.clone()),
            status: Some(FinishStatus::Crashed),
            result: None,
            error: Some(format!(
                "the runner stopped during this offline run (killed or lost power); last seen \
                 running at {}",
                self.alive_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )),
            metrics: None,
            started_at: None,
            finished_at: None,
            offline: Some(OfflineRun {
                runner_id: self.runner_id.clone(),
                started_at: self.started_at,
                finished_at: self.alive_at.max(self.started_at),
                violations: self.violations.clone(),
            }),
            output: Vec::new(),
        }
    }
}

/// The directory of entries, one file per run, and the chains crashed runs left to
/// continue (`retry/`, one file per rule, also kept in memory).
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    retries: Mutex<HashMap<Uuid, Chain>>,
}

impl Journal {
    /// Opens (creating) the journal in `dir`.
    pub(crate) fn open(dir: &Path) -> io::Result<Journal> {
        fs::create_dir_all(dir.join("retry"))?;
        let mut retries = HashMap::new();
        for entry in fs::read_dir(dir.join("retry"))? {
            let path = entry?.path();
            let rule = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| Uuid::parse_str(s).ok());
            let chain = fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Chain>(&bytes).ok());
            match (rule, chain) {
                (Some(rule), Some(chain)) => {
                    retries.insert(rule, chain);
                }
                // Unreadable: the next run starts a chain of its own, as before retries
                // were noted.
                _ => {
                    tracing::warn!(path = %path.display(), "unreadable retry note removed");
                    fs::remove_file(&path)?;
                }
            }
        }
        Ok(Journal {
            dir: dir.to_owned(),
            retries: Mutex::new(retries),
        })
    }

    fn retries(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Chain>> {
        self.retries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn retry_path(&self, rule: Uuid) -> PathBuf {
        self.dir.join("retry").join(format!("{rule}.json"))
    }

    /// Notes (durably) that `rule`'s next run continues `chain`, whose last attempt crashed.
    pub(crate) fn note_retry(&self, rule: Uuid, chain: Chain) -> io::Result<()> {
        let bytes = serde_json::to_vec(&chain).map_err(io::Error::other)?;
        write_atomic(&self.retry_path(rule), &bytes)?;
        self.retries().insert(rule, chain);
        Ok(())
    }

    /// The chain `rule`'s next run continues, if a crashed run left one.
    pub(crate) fn retry_of(&self, rule: Uuid) -> Option<Chain> {
        self.retries().get(&rule).copied()
    }

    /// `rule`'s chain was continued (a run reported, or the cloud claimed the rule, and it
    /// knows the chain): the note goes.
    pub(crate) fn retried(&self, rule: Uuid) -> io::Result<()> {
        if self.retries().remove(&rule).is_none() {
            return Ok(());
        }
        match fs::remove_file(self.retry_path(rule)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }

    fn path(&self, execution_id: Uuid) -> PathBuf {
        self.dir.join(format!("{execution_id}.json"))
    }

    /// Writes (or rewrites) a run's entry durably.
    pub(crate) fn write(&self, started: &Started) -> io::Result<()> {
        let bytes = serde_json::to_vec(started).map_err(io::Error::other)?;
        write_atomic(&self.path(started.execution_id), &bytes)
    }

    /// Removes a run's entry once its report is stored.
    pub(crate) fn remove(&self, execution_id: Uuid) -> io::Result<()> {
        match fs::remove_file(self.path(execution_id)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }

    /// How many runs have an entry: offline runs going on (after start-up, when the entries
    /// an earlier process left were reported).
    pub(crate) fn in_progress(&self) -> io::Result<usize> {
        let mut count = 0;
        for entry in fs::read_dir(&self.dir)? {
            if entry?.path().extension().is_some_and(|e| e == "json") {
                count += 1;
            }
        }
        Ok(count)
    }

    /// The runs left unfinished by an earlier process, oldest first; an unreadable entry is
    /// moved to `rejected/` for a person to look at.
    pub(crate) fn unfinished(&self) -> io::Result<Vec<Started>> {
        let mut runs = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Started>(&bytes).ok())
            {
                Some(started) => runs.push(started),
                None => {
                    let aside = self.dir.join("rejected");
                    fs::create_dir_all(&aside)?;
                    let name = path.file_name().map(ToOwned::to_owned).unwrap_or_default();
                    fs::rename(&path, aside.join(name))?;
                    tracing::error!(path = %path.display(), "unreadable offline run entry moved aside");
                }
            }
        }
        runs.sort_by_key(|r| (r.started_at, r.execution_id));
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(at: &str) -> Started {
        let at: DateTime<Utc> = at.parse().expect("time");
        Started {
            branch_rule_id: Uuid::new_v4(),
            execution_id: Uuid::new_v4(),
            claim_token: "offline-abc".into(),
            runner_id: "site-1".into(),
            started_at: at,
            alive_at: at + chrono::TimeDelta::seconds(7),
            violations: vec![OfflineViolation {
                kind: "queue".into(),
                details: serde_json::json!({"length": 9}),
                idempotency_key: "k1".into(),
            }],
            root_execution_id: None,
            attempt: None,
        }
    }

    #[test]
    fn a_run_left_unfinished_is_reported_crashed_with_its_times_and_findings() {
        let run = started("2026-11-25T09:00:00Z");
        let report = run.crashed_report();
        assert_eq!(report.status, Some(FinishStatus::Crashed));
        assert_eq!(report.execution_id, Some(run.execution_id));
        assert_eq!(report.claim_token.as_deref(), Some("offline-abc"));
        let offline = report.offline.expect("an offline report");
        assert_eq!(offline.started_at, run.started_at);
        assert_eq!(offline.finished_at, run.alive_at);
        assert_eq!(offline.violations, run.violations);
        assert!(
            report
                .error
                .is_some_and(|e| e.contains("last seen running at 2026-11-25T09:00:07Z"))
        );
    }

    #[test]
    fn a_crashed_run_s_chain_is_continued_by_the_rule_s_next_run_across_a_reopen() {
        let dir = std::env::temp_dir().join(format!("res-journal-{}", Uuid::new_v4()));
        let journal = Journal::open(&dir).expect("opens");
        let crashed = started("2026-11-25T09:00:00Z");
        let rule = crashed.branch_rule_id;
        assert_eq!(
            crashed.chain(),
            Chain {
                root: crashed.execution_id,
                attempt: 1
            },
            "an entry without a chain (an older runner's) is a first attempt"
        );
        journal.note_retry(rule, crashed.chain()).expect("noted");
        let reopened = Journal::open(&dir).expect("reopens");
        let next = reopened.retry_of(rule).map(Chain::next);
        assert_eq!(
            next,
            Some(Chain {
                root: crashed.execution_id,
                attempt: 2
            })
        );
        assert_eq!(reopened.retry_of(Uuid::new_v4()), None);
        reopened.retried(rule).expect("continued");
        assert_eq!(reopened.retry_of(rule), None);
        assert_eq!(Journal::open(&dir).expect("reopens").retry_of(rule), None);
        fs::write(dir.join("retry").join("garbage.json"), b"{").expect("garbage");
        assert!(Journal::open(&dir).is_ok(), "an unreadable note is dropped");
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn entries_survive_a_reopen_until_removed_and_bad_ones_are_set_aside() {
        let dir = std::env::temp_dir().join(format!("res-journal-{}", Uuid::new_v4()));
        let journal = Journal::open(&dir).expect("opens");
        let (late, early) = (
            started("2026-11-25T09:05:00Z"),
            started("2026-11-25T09:00:00Z"),
        );
        journal.write(&late).expect("written");
        journal.write(&early).expect("written");
        fs::write(dir.join("garbage.json"), b"{").expect("garbage");
        let reopened = Journal::open(&dir).expect("reopens");
        assert_eq!(
            reopened.unfinished().expect("lists"),
            vec![early.clone(), late.clone()]
        );
        assert!(dir.join("rejected").join("garbage.json").exists());
        reopened.remove(early.execution_id).expect("removed");
        reopened
            .remove(early.execution_id)
            .expect("removing twice is fine");
        assert_eq!(reopened.unfinished().expect("lists"), vec![late]);
        fs::remove_dir_all(&dir).ok();
    }
}
