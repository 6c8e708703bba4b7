//! What happens to the occurrences that come due while a run is live. `skip` (reference
//! 001, RES's behaviour so far): the next run is computed from the finish and the
//! occurrences that passed are dropped. `buffer_one` (reference 004's coalesced queue,
//! Temporal's BufferOne): if one or more came due, exactly one more run starts as soon as
//! the live one finishes — still inside the window — and the rule then returns to its
//! schedule. One function for the cloud's report and the runner's offline fallback.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::next_run::{NextRun, Schedule};

/// A rule's overlap policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlapPolicy {
    /// Occurrences that came due during a run are dropped.
    #[default]
    Skip,
    /// One more run starts right after a run during which occurrences came due.
    BufferOne,
}

impl OverlapPolicy {
    /// The stored and wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OverlapPolicy::Skip => "skip",
            OverlapPolicy::BufferOne => "buffer_one",
        }
    }
}

impl FromStr for OverlapPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<OverlapPolicy, String> {
        match text {
            "skip" => Ok(OverlapPolicy::Skip),
            "buffer_one" => Ok(OverlapPolicy::BufferOne),
            other => Err(format!(
                "overlap_policy must be skip or buffer_one, not '{other}'"
            )),
        }
    }
}

impl fmt::Display for OverlapPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a run live from `started` to `finished` leaves one buffered run due at
/// `finished`: some occurrence came due after the start and by the finish, and the finish
/// is inside the window (a buffered run never starts outside it).
pub fn buffered_run(
    schedule: &Schedule,
    policy: OverlapPolicy,
    started: DateTime<Utc>,
    finished: DateTime<Utc>,
) -> Option<NextRun> {
    if policy == OverlapPolicy::Skip || finished < started {
        return None;
    }
    let first = schedule.next_run(started, false).ok()?;
    (!first.degenerate && first.next_run_time <= finished && schedule.in_window(finished))
        .then_some(NextRun {
            next_run_time: finished,
            degenerate: false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        text.parse().expect("test instant")
    }

    fn every_ten_minutes() -> Schedule {
        Schedule::parse("*/10 * * * *", Some("08:00"), Some("18:00"), Some("UTC"))
            .expect("valid schedule")
    }

    #[test]
    fn policies_are_spelled_as_stored() {
        assert_eq!("skip".parse(), Ok(OverlapPolicy::Skip));
        assert_eq!("buffer_one".parse(), Ok(OverlapPolicy::BufferOne));
        assert_eq!(OverlapPolicy::BufferOne.to_string(), "buffer_one");
        assert_eq!(
            "buffer".parse::<OverlapPolicy>(),
            Err("overlap_policy must be skip or buffer_one, not 'buffer'".to_owned())
        );
        assert_eq!(OverlapPolicy::default(), OverlapPolicy::Skip);
    }

    #[test]
    fn a_run_that_outlasts_its_period_buffers_one_run() {
        let schedule = every_ten_minutes();
        // Started 10:00, finished 10:25: 10:10 and 10:20 came due — one run, at 10:25.
        let buffered = buffered_run(
            &schedule,
            OverlapPolicy::BufferOne,
            utc("2026-03-02T10:00:00Z"),
            utc("2026-03-02T10:25:00Z"),
        );
        assert_eq!(
            buffered.map(|n| n.next_run_time),
            Some(utc("2026-03-02T10:25:00Z"))
        );
        // The same run under skip: nothing buffered.
        assert_eq!(
            buffered_run(
                &schedule,
                OverlapPolicy::Skip,
                utc("2026-03-02T10:00:00Z"),
                utc("2026-03-02T10:25:00Z"),
            ),
            None
        );
    }

    #[test]
    fn a_run_within_its_period_buffers_nothing() {
        let schedule = every_ten_minutes();
        // Finished exactly at the next occurrence: it came due, so one run follows.
        let at_edge = buffered_run(
            &schedule,
            OverlapPolicy::BufferOne,
            utc("2026-03-02T10:00:00Z"),
            utc("2026-03-02T10:10:00Z"),
        );
        assert!(at_edge.is_some());
        let within = buffered_run(
            &schedule,
            OverlapPolicy::BufferOne,
            utc("2026-03-02T10:00:00Z"),
            utc("2026-03-02T10:09:59Z"),
        );
        assert_eq!(within, None);
    }

    #[test]
    fn no_buffered_run_outside_the_window() {
        let schedule = every_ten_minutes();
        // Started 17:45, finished 18:05: 17:50 came due, but the window closed at 18:00 —
        // the rule waits for the next opening instead.
        let buffered = buffered_run(
            &schedule,
            OverlapPolicy::BufferOne,
            utc("2026-03-02T17:45:00Z"),
            utc("2026-03-02T18:05:00Z"),
        );
        assert_eq!(buffered, None);
    }
}
