//! A rule's runs as a strip of cells (Airflow's grid): one a run, oldest first, coloured,
//! lettered and named by status, as tall as its duration against the strip's longest, and
//! linked to the run.

use chrono::{DateTime, Utc};
use res_shared::wire::RunMark;
use uuid::Uuid;

use super::view::{Badge, badge, duration, when};

/// One run in the strip.
pub(crate) struct StripCell {
    pub(crate) id: Uuid,
    pub(crate) badge: Badge,
    pub(crate) letter: char,
    /// 1 to 5: the style class of its height.
    pub(crate) height: u8,
    /// Its status, duration and scheduled time, shown on hover.
    pub(crate) title: String,
}

/// A run's height step, 1 to 5, by its duration against the strip's longest; a live run
/// (no duration yet) stands at full height, a finished one is never invisible.
pub(crate) fn height(duration_ms: Option<i64>, longest_ms: i64) -> u8 {
    match duration_ms {
        None => 5,
        Some(_) if longest_ms <= 0 => 1,
        Some(ms) => {
            let step = (ms.max(0) * 5 + longest_ms - 1) / longest_ms;
            u8::try_from(step.clamp(1, 5)).unwrap_or(5)
        }
    }
}

/// The cells of a strip, times on the rule's clock.
pub(crate) fn cells(strip: &[RunMark], zone: &str, now: DateTime<Utc>) -> Vec<StripCell> {
    let longest = strip
        .iter()
        .filter_map(|m| m.duration_ms)
        .max()
        .unwrap_or(0);
    strip
        .iter()
        .map(|mark| {
            let badge = badge(mark.status.as_str());
            let took = match mark.duration_ms {
                Some(ms) => duration(Some(ms)),
                None => "not finished".to_owned(),
            };
            StripCell {
                id: mark.execution_id,
                title: format!(
                    "{} · {took} · {}",
                    badge.text,
                    when(mark.scheduled_at, zone, now).local
                ),
                letter: mark.status.letter(),
                height: height(mark.duration_ms, longest),
                badge,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights_step_with_the_duration_against_the_longest() {
        assert_eq!(height(Some(10_000), 10_000), 5);
        assert_eq!(height(Some(1), 10_000), 1);
        assert_eq!(height(Some(0), 10_000), 1);
        assert_eq!(height(Some(5_000), 10_000), 3);
        assert_eq!(height(Some(4_000), 10_000), 2);
        assert_eq!(height(None, 10_000), 5);
        assert_eq!(height(Some(0), 0), 1);
    }
}
