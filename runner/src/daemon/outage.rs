//! An outage of the functions is logged twice: once when it starts (with the first error)
//! and once when it ends (how long, and what the runner did meanwhile) — not once per due
//! rule and retry.

use std::fmt::Display;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};

/// The outage under way, if any.
#[derive(Debug, Default)]
pub(crate) struct OutageLog {
    current: Mutex<Option<Outage>>,
    /// The latest ended outage, `(start, end)`, for the runner registry.
    last: Mutex<Option<(DateTime<Utc>, DateTime<Utc>)>>,
}

#[derive(Debug)]
struct Outage {
    since: DateTime<Utc>,
    skipped: u64,
    offline_runs: u64,
    reports_queued: u64,
}

/// What an ended outage amounted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutageSummary {
    /// How long it lasted, seconds.
    pub(crate) seconds: i64,
    /// Due runs skipped (not run offline here).
    pub(crate) skipped: u64,
    /// Runs made offline.
    pub(crate) offline_runs: u64,
    /// Reports kept in the outbox.
    pub(crate) reports_queued: u64,
}

impl OutageLog {
    /// The functions failed to answer; true (and one WARN line) when this starts an outage.
    pub(crate) fn lost(&self, error: &dyn Display, now: DateTime<Utc>) -> bool {
        let mut current = self.lock();
        if current.is_some() {
            return false;
        }
        *current = Some(Outage {
            since: now,
            skipped: 0,
            offline_runs: 0,
            reports_queued: 0,
        });
        tracing::warn!(%error, "functions unreachable: outage started; due rules are skipped or run offline until they answer");
        true
    }

    /// A due run met the outage: made offline, or skipped.
    pub(crate) fn run(&self, offline: bool) {
        if let Some(outage) = self.lock().as_mut() {
            if offline {
                outage.offline_runs += 1;
            } else {
                outage.skipped += 1;
            }
        }
    }

    /// A report went to the outbox during the outage.
    pub(crate) fn report_queued(&self) {
        if let Some(outage) = self.lock().as_mut() {
            outage.reports_queued += 1;
        }
    }

    /// The functions answered; ends the outage (one INFO line) and returns its summary.
    pub(crate) fn ended(&self, now: DateTime<Utc>) -> Option<OutageSummary> {
        let outage = self.lock().take()?;
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some((outage.since, now));
        let summary = OutageSummary {
            seconds: (now - outage.since).num_seconds(),
            skipped: outage.skipped,
            offline_runs: outage.offline_runs,
            reports_queued: outage.reports_queued,
        };
        tracing::info!(
            outage_seconds = summary.seconds,
            skipped = summary.skipped,
            offline_runs = summary.offline_runs,
            reports_queued = summary.reports_queued,
            "functions reachable again: outage ended"
        );
        Some(summary)
    }

    /// The latest outage that has ended: when it started and ended.
    pub(crate) fn last_ended(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an outage is under way.
    pub(crate) fn ongoing(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outage>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    #[test]
    fn an_outage_is_started_once_counted_and_summed_up_at_its_end() {
        let log = OutageLog::default();
        let t0 = crate::clock::now();
        assert_eq!(log.ended(t0), None, "no outage, nothing to end");
        log.run(false); // not counted outside an outage
        assert!(log.lost(&"refused", t0));
        assert!(!log.lost(&"refused again", t0 + TimeDelta::seconds(1)));
        for _ in 0..3 {
            log.run(false);
        }
        log.run(true);
        log.report_queued();
        assert!(log.ongoing());
        assert_eq!(
            log.ended(t0 + TimeDelta::seconds(30)),
            Some(OutageSummary {
                seconds: 30,
                skipped: 3,
                offline_runs: 1,
                reports_queued: 1
            })
        );
        assert!(!log.ongoing());
    }
}
