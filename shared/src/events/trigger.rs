//! When a listening rule runs: a plain function of what is waiting and the rule's batching.

use chrono::{DateTime, TimeDelta, Utc};

/// "Run when `count` events are waiting or `within` after the first of them arrived,
/// whichever comes first" (the reference's batch + timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Events waiting that start a run at once.
    pub count: u32,
    /// How long the first waiting event may wait for the others.
    pub within: TimeDelta,
}

/// What a listening rule does with events that arrive while it is closed (outside its
/// window or opening hours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhileClosed {
    /// They wait for the opening, and the first run after it consumes them.
    #[default]
    Wait,
    /// They are dropped (counted), as stale by the time the rule opens.
    Drop,
}

/// A listening rule's settings that decide when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Listening {
    /// None: every event starts a run (coalesced while one runs).
    pub batch: Option<Batch>,
    /// What events arriving while the rule is closed do.
    pub while_closed: WhileClosed,
    /// The most events one run consumes, oldest first.
    pub max_per_run: u32,
}

/// What a rule has waiting at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Waiting {
    /// Events accepted and not consumed by a finished run.
    pub events: u32,
    /// When the oldest of them arrived.
    pub oldest: Option<DateTime<Utc>>,
    /// A run was asked for (Run now, or a trigger during the last run): it runs with what is
    /// waiting, whatever the batching says.
    pub requested: bool,
    /// The wake time its last run asked for (clamped), if any.
    pub wake_at: Option<DateTime<Utc>>,
    /// A run of it is going on.
    pub running: bool,
    /// It is inside its window or opening hours.
    pub open: bool,
}

/// What to do about a listening rule now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start a run consuming up to this many of the waiting events, oldest first (0: a run
    /// for its wake time or a request, with nothing to consume).
    Run {
        /// How many events the run takes.
        events: u32,
    },
    /// A run is going on: when it ends, one more run starts if anything is waiting then
    /// (every trigger meanwhile coalesces into that one).
    AfterTheRun,
    /// Nothing to do before this time (unless an event or a request comes first).
    At(DateTime<Utc>),
    /// Closed: what waits, waits for the opening.
    AtOpening,
    /// Closed, and the rule drops events that arrive then: drop this many.
    Drop {
        /// How many waiting events to drop.
        events: u32,
    },
    /// Nothing waits and no wake time is set: only an event or a request starts a run.
    Idle,
}

/// What `rule` does at `now` with `waiting`.
pub fn decide(rule: &Listening, waiting: &Waiting, now: DateTime<Utc>) -> Decision {
    if waiting.running {
        return Decision::AfterTheRun;
    }
    let woken = waiting.wake_at.is_some_and(|at| at <= now);
    if !waiting.open {
        return match rule.while_closed {
            WhileClosed::Drop if waiting.events > 0 => Decision::Drop {
                events: waiting.events,
            },
            _ if waiting.events > 0 || waiting.requested || woken => Decision::AtOpening,
            _ => waiting.wake_at.map_or(Decision::Idle, Decision::At),
        };
    }
    let take = waiting.events.min(rule.max_per_run.max(1));
    if waiting.requested || woken {
        return Decision::Run { events: take };
    }
    if waiting.events == 0 {
        return waiting.wake_at.map_or(Decision::Idle, Decision::At);
    }
    let Some(batch) = rule.batch else {
        return Decision::Run { events: take };
    };
    let deadline = waiting.oldest.map(|first| first + batch.within);
    if waiting.events >= batch.count || deadline.is_none_or(|at| at <= now) {
        return Decision::Run { events: take };
    }
    let next = deadline.into_iter().chain(waiting.wake_at).min();
    next.map_or(Decision::Idle, Decision::At)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    fn open(events: u32, oldest: Option<&str>) -> Waiting {
        Waiting {
            events,
            oldest: oldest.map(at),
            open: true,
            ..Waiting::default()
        }
    }

    const NOW: &str = "2026-12-08T10:00:00Z";

    fn every_event() -> Listening {
        Listening {
            max_per_run: 100,
            ..Listening::default()
        }
    }

    fn batched() -> Listening {
        Listening {
            batch: Some(Batch {
                count: 20,
                within: TimeDelta::minutes(10),
            }),
            max_per_run: 100,
            ..Listening::default()
        }
    }

    #[test]
    fn an_idle_rule_runs_for_what_waits_and_a_running_one_coalesces_into_one_more_run() {
        let now = at(NOW);
        let two = open(2, Some("2026-12-08T09:59:59Z"));
        assert_eq!(
            decide(&every_event(), &two, now),
            Decision::Run { events: 2 },
            "two events at once: one run consumes both"
        );
        let running = Waiting {
            running: true,
            ..two
        };
        assert_eq!(decide(&every_event(), &running, now), Decision::AfterTheRun);
        assert_eq!(decide(&every_event(), &open(0, None), now), Decision::Idle);
    }

    #[test]
    fn a_run_takes_at_most_its_share_oldest_first_and_the_rest_run_next() {
        let rule = Listening {
            max_per_run: 50,
            ..every_event()
        };
        let many = open(120, Some("2026-12-08T09:00:00Z"));
        assert_eq!(decide(&rule, &many, at(NOW)), Decision::Run { events: 50 });
        // A rule that says no bound still takes one at a time, never none.
        let unbounded = Listening {
            max_per_run: 0,
            ..every_event()
        };
        assert_eq!(
            decide(&unbounded, &many, at(NOW)),
            Decision::Run { events: 1 }
        );
    }

    #[test]
    fn a_batch_runs_at_its_count_or_its_timeout_whichever_comes_first() {
        let now = at(NOW);
        let few = open(3, Some("2026-12-08T09:55:00Z"));
        assert_eq!(
            decide(&batched(), &few, now),
            Decision::At(at("2026-12-08T10:05:00Z")),
            "three waiting: the run is due ten minutes after the first"
        );
        assert_eq!(
            decide(&batched(), &few, at("2026-12-08T10:05:00Z")),
            Decision::Run { events: 3 }
        );
        let full = open(20, Some("2026-12-08T09:59:00Z"));
        assert_eq!(decide(&batched(), &full, now), Decision::Run { events: 20 });
        // A wake time before the batch's timeout comes first.
        let woken_sooner = Waiting {
            wake_at: Some(at("2026-12-08T10:01:00Z")),
            ..few
        };
        assert_eq!(
            decide(&batched(), &woken_sooner, now),
            Decision::At(at("2026-12-08T10:01:00Z"))
        );
        assert_eq!(
            decide(&batched(), &woken_sooner, at("2026-12-08T10:01:00Z")),
            Decision::Run { events: 3 }
        );
    }

    #[test]
    fn a_request_or_a_wake_time_runs_with_what_waits_even_under_a_batch() {
        let now = at(NOW);
        let requested = Waiting {
            requested: true,
            ..open(1, Some(NOW))
        };
        assert_eq!(
            decide(&batched(), &requested, now),
            Decision::Run { events: 1 }
        );
        let woken = Waiting {
            wake_at: Some(now),
            ..open(0, None)
        };
        assert_eq!(decide(&batched(), &woken, now), Decision::Run { events: 0 });
        let later = Waiting {
            wake_at: Some(now + TimeDelta::hours(1)),
            ..open(0, None)
        };
        assert_eq!(
            decide(&every_event(), &later, now),
            Decision::At(now + TimeDelta::hours(1))
        );
    }

    #[test]
    fn while_closed_events_wait_for_the_opening_or_are_dropped_as_the_rule_says() {
        let now = at(NOW);
        let closed = Waiting {
            open: false,
            ..open(4, Some(NOW))
        };
        assert_eq!(decide(&every_event(), &closed, now), Decision::AtOpening);
        let dropping = Listening {
            while_closed: WhileClosed::Drop,
            ..every_event()
        };
        assert_eq!(
            decide(&dropping, &closed, now),
            Decision::Drop { events: 4 }
        );
        let nothing = Waiting {
            open: false,
            ..open(0, None)
        };
        assert_eq!(decide(&dropping, &nothing, now), Decision::Idle);
    }
}
