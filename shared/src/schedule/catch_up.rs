//! Runs missed while neither a rule's runner nor the cloud could make them: when RES is
//! back and finds the rule's due time long past, its `catch_up` policy decides — `skip`
//! moves it to its next time, `once` makes one run if the latest missed time is young
//! enough. Without a policy the due run is made, as RES always has. The claim function and
//! the runner (offline) ask the same question.

use chrono::{DateTime, TimeDelta, Utc};

use super::rule::RuleSchedule;
use super::timing_spec::CatchUp;

/// A due time at least this far behind counts as missed: a runner that is up starts a due
/// rule within seconds, so only an outage (or a queue stuck that long) leaves one so late.
pub const MISSED_AFTER: TimeDelta = TimeDelta::minutes(5);

/// Occurrences walked to find the latest missed one before taking the first as it.
const MAX_MISSED_WALK: usize = 100_000;

/// What to do with a rule found due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Not missed (or no policy): run it as due.
    Run,
    /// Missed and caught up: one run now, for the latest missed time.
    CatchUpNow {
        /// The latest missed time.
        latest: DateTime<Utc>,
    },
    /// Missed and not made: the rule waits for this time instead.
    SkipTo {
        /// The next time on its schedule after now.
        next: DateTime<Utc>,
        /// The latest missed time.
        latest: DateTime<Utc>,
    },
}

/// The fate of a rule due at `due`, found due at `now`.
pub fn missed_run(rule: &RuleSchedule, due: DateTime<Utc>, now: DateTime<Utc>) -> Missed {
    let Some(policy) = rule.catch_up() else {
        return Missed::Run;
    };
    if now - due < MISSED_AFTER {
        return Missed::Run;
    }
    let Ok(schedule) = rule.schedule() else {
        return Missed::Run;
    };
    // The latest occurrence at or before now, walking from the due time.
    let mut latest = due;
    for _ in 0..MAX_MISSED_WALK {
        match schedule.next_run(latest, false) {
            Ok(next) if next.next_run_time <= now && next.next_run_time > latest => {
                latest = next.next_run_time;
            }
            _ => break,
        }
    }
    let skip = || match schedule.next_run(now, false) {
        Ok(next) => Missed::SkipTo {
            next: next.next_run_time,
            latest,
        },
        // Nothing ahead to wait for: do not run what was missed either.
        Err(_) => Missed::SkipTo {
            next: now + super::reschedule::UNSCHEDULABLE_RETRY,
            latest,
        },
    };
    match policy {
        CatchUp::Skip => skip(),
        CatchUp::Once { max_age_seconds } => {
            if now - latest <= TimeDelta::seconds(i64::from(max_age_seconds)) {
                Missed::CatchUpNow { latest }
            } else {
                skip()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{OverlapPolicy, RuleTiming, TimingSpec};
    use uuid::Uuid;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    fn hourly(catch_up: Option<CatchUp>) -> RuleSchedule {
        let spec = TimingSpec {
            catch_up,
            ..TimingSpec::default()
        };
        RuleSchedule::new(RuleTiming {
            id: Uuid::nil(),
            cron: Some("0 * * * *"),
            from: None,
            to: None,
            zone: Some("UTC"),
            jitter_seconds: 0,
            overlap: OverlapPolicy::Skip,
            hours: None,
            spec: Some(&spec),
        })
    }

    #[test]
    fn a_late_rule_is_missed_only_past_the_grace_and_only_with_a_policy() {
        let due = at("2026-03-02T10:00:00Z");
        let now = at("2026-03-02T12:30:00Z");
        assert_eq!(
            missed_run(&hourly(None), due, now),
            Missed::Run,
            "as RES always has"
        );
        let skip = hourly(Some(CatchUp::Skip));
        assert_eq!(
            missed_run(&skip, due, due + TimeDelta::minutes(4)),
            Missed::Run
        );
        assert_eq!(
            missed_run(&skip, due, now),
            Missed::SkipTo {
                next: at("2026-03-02T13:00:00Z"),
                latest: at("2026-03-02T12:00:00Z")
            }
        );
    }

    #[test]
    fn once_runs_for_a_young_enough_latest_miss_and_skips_an_old_one() {
        let due = at("2026-03-02T10:00:00Z");
        let rule = hourly(Some(CatchUp::Once {
            max_age_seconds: 3600,
        }));
        assert_eq!(
            missed_run(&rule, due, at("2026-03-02T12:30:00Z")),
            Missed::CatchUpNow {
                latest: at("2026-03-02T12:00:00Z")
            }
        );
        let strict = hourly(Some(CatchUp::Once {
            max_age_seconds: 600,
        }));
        assert_eq!(
            missed_run(&strict, due, at("2026-03-02T12:30:00Z")),
            Missed::SkipTo {
                next: at("2026-03-02T13:00:00Z"),
                latest: at("2026-03-02T12:00:00Z")
            }
        );
    }
}
