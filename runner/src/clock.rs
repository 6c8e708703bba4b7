//! The runner's time: this host's clock, corrected by how far it was from the database's
//! clock when last measured. Camera hosts without NTP drift by minutes; online the database
//! decides whether a rule is due, and offline the runner decides alone, so it must decide
//! by the same clock: what the server's time is now, as best it knows. Every time the runner
//! acts on (due checks, schedules, a run's start and end, journals) is read here; only the
//! measurement reads the host's clock itself.
//!
//! Process-wide, because time is: one measurement corrects every part of the runner at
//! once. The correction is kept in the state directory, so a runner that restarts while the
//! cloud is away still schedules by it (docs/faults.md, a wrong clock).

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

/// Differences up to this are left alone: they are within what a plan answer's transit
/// adds to a measurement (seconds over a slow link), and as close as schedules need.
pub const CORRECTED_ABOVE: TimeDelta = TimeDelta::seconds(2);

/// Server time minus host time, in milliseconds: what is added to the host's clock.
static CORRECTION_MS: AtomicI64 = AtomicI64::new(0);

/// The server's time as this runner knows it.
pub fn now() -> DateTime<Utc> {
    Utc::now() + correction()
}

/// What is added to this host's clock (zero while it agrees with the server's).
pub fn correction() -> TimeDelta {
    TimeDelta::milliseconds(CORRECTION_MS.load(Ordering::Relaxed))
}

/// The correction for a measurement: the database's time in an answer, `server`, against
/// this host's clock when the answer arrived, `host` (later than `server` by the transit
/// when the clocks agree). Zero when they agree within [`CORRECTED_ABOVE`].
pub fn correction_for(server: DateTime<Utc>, host: DateTime<Utc>) -> TimeDelta {
    let difference = server - host;
    if difference.abs() <= CORRECTED_ABOVE {
        TimeDelta::zero()
    } else {
        difference
    }
}

/// Sets the correction; whether it moved by more than [`CORRECTED_ABOVE`] (worth keeping
/// on disk and saying so).
pub fn correct(by: TimeDelta) -> bool {
    let before = CORRECTION_MS.swap(by.num_milliseconds(), Ordering::Relaxed);
    (TimeDelta::milliseconds(before) - by).abs() > CORRECTED_ABOVE
}

/// The correction as kept in the state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub correction_ms: i64,
    /// When it was measured (server time).
    pub measured_at: DateTime<Utc>,
}

const FILE: &str = "clock.json";

/// Loads a kept correction (none, or an unreadable file, is no correction).
pub fn load(state_dir: &Path) -> Option<Kept> {
    let text = std::fs::read_to_string(state_dir.join(FILE)).ok()?;
    let kept: Kept = serde_json::from_str(&text).ok()?;
    correct(TimeDelta::milliseconds(kept.correction_ms));
    Some(kept)
}

/// Keeps the current correction, measured now.
pub fn keep(state_dir: &Path) -> std::io::Result<()> {
    let kept = Kept {
        correction_ms: correction().num_milliseconds(),
        measured_at: now(),
    };
    let text = serde_json::to_string(&kept).map_err(std::io::Error::other)?;
    crate::plan::file::write_atomic(&state_dir.join(FILE), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    #[test]
    fn a_host_within_two_seconds_is_left_alone_and_one_minutes_off_is_corrected() {
        let server = at("2026-11-27T10:00:00Z");
        assert_eq!(
            correction_for(server, at("2026-11-27T10:00:01.500Z")),
            TimeDelta::zero(),
            "an answer's transit"
        );
        assert_eq!(
            correction_for(server, at("2026-11-27T10:07:00Z")),
            TimeDelta::minutes(-7),
            "seven minutes fast"
        );
        assert_eq!(
            correction_for(server, at("2026-11-27T09:53:00Z")),
            TimeDelta::minutes(7),
            "seven minutes slow"
        );
    }
}
