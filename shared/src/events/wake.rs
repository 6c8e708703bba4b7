//! A workflow's asked-for wake time, held to the bounds the operator sets: never so soon
//! that a rule busy-loops, never so far that it sleeps unbounded (the reference's host
//! constraints). What was clamped is said, so the run's record can show it.

use chrono::{DateTime, TimeDelta, Utc};

/// The bounds on a wake time, from the moment it is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeBounds {
    /// The soonest a wake time may be.
    pub min: TimeDelta,
    /// The latest.
    pub max: TimeDelta,
}

impl Default for WakeBounds {
    /// 30 s to 24 h.
    fn default() -> WakeBounds {
        WakeBounds {
            min: TimeDelta::seconds(30),
            max: TimeDelta::hours(24),
        }
    }
}

/// How an asked-for wake time was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clamped {
    /// Asked sooner than the minimum: moved later to it.
    TooSoon,
    /// Asked later than the maximum: moved sooner to it.
    TooFar,
}

/// The wake time that holds for `asked` at `now`, and whether it was clamped.
pub fn clamp(
    asked: DateTime<Utc>,
    now: DateTime<Utc>,
    bounds: WakeBounds,
) -> (DateTime<Utc>, Option<Clamped>) {
    let (soonest, latest) = (now + bounds.min, now + bounds.max);
    if asked < soonest {
        (soonest, Some(Clamped::TooSoon))
    } else if asked > latest {
        (latest, Some(Clamped::TooFar))
    } else {
        (asked, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_time_inside_the_bounds_stands_and_one_outside_is_clamped_and_said() {
        let now: DateTime<Utc> = "2026-12-08T10:00:00Z".parse().expect("an instant");
        let bounds = WakeBounds::default();
        let hour = now + TimeDelta::hours(1);
        assert_eq!(clamp(hour, now, bounds), (hour, None));
        assert_eq!(
            clamp(now + TimeDelta::seconds(5), now, bounds),
            (now + TimeDelta::seconds(30), Some(Clamped::TooSoon))
        );
        assert_eq!(
            clamp(now - TimeDelta::days(1), now, bounds),
            (now + TimeDelta::seconds(30), Some(Clamped::TooSoon)),
            "a time in the past is the soonest allowed"
        );
        assert_eq!(
            clamp(now + TimeDelta::days(3), now, bounds),
            (now + TimeDelta::hours(24), Some(Clamped::TooFar))
        );
        let edge = now + TimeDelta::hours(24);
        assert_eq!(
            clamp(edge, now, bounds),
            (edge, None),
            "the bounds are allowed"
        );
    }
}
