//! A branch rule's schedule as one value: its recurrence, window, zone, jitter and overlap
//! policy parsed once from what is stored (a database row in the cloud, a plan entry on
//! site), then asked every schedule question. Both halves build it from the same fields,
//! so "when next?" is computed identically down to the last step.

use std::sync::Arc;

use chrono::{DateTime, NaiveTime, TimeDelta, Utc};
use uuid::Uuid;

use super::anchor::AnchorSchedule;
use super::error::ScheduleError;
use super::hours::OpeningHours;
use super::hours::words::{spec_in_words, today_in_words};
use super::interval::IntervalSchedule;
use super::jitter::jitter_offset;
use super::next_run::Schedule;
use super::overlap::{OverlapPolicy, buffered_run};
use super::recurrence::Recurrence;
use super::reschedule::{Rescheduled, fixed_delay};
use super::timetable::{Restriction, Timetable};
use super::timing_spec::{CatchUp, TimingSpec};
use super::window::OperationWindow;
use super::words::describe_schedule;
use super::zone::Zone;

/// The stored fields a rule's schedule is made of, as both the cloud's row and the site's
/// plan entry hold them.
#[derive(Debug, Clone, Copy)]
pub struct RuleTiming<'a> {
    /// The branch rule (its jitter offset is a function of it).
    pub id: Uuid,
    /// The cron expression or `@every` interval; none is retried on a fixed delay.
    pub cron: Option<&'a str>,
    /// The window's opening; with `to`, a window (one end alone is none).
    pub from: Option<NaiveTime>,
    /// The window's close (`24:00` is stored as midnight).
    pub to: Option<NaiveTime>,
    /// The zone's name; none means Asia/Riyadh.
    pub zone: Option<&'a str>,
    /// The jitter spread; each run moves a fixed share of it, by `id`.
    pub jitter_seconds: u32,
    /// What a run that outlasts its period leaves behind.
    pub overlap: OverlapPolicy,
    /// The branch's opening hours, if it has any.
    pub hours: Option<&'a Arc<OpeningHours>>,
    /// Opening-hours window, weekly window, validity, catch-up.
    pub spec: Option<&'a TimingSpec>,
}

/// A rule's schedule, parsed once; a schedule that cannot be used is kept with what is
/// wrong, so every answer (the fixed retry delay, describe, attention) says the same.
#[derive(Debug, Clone)]
pub struct RuleSchedule {
    cron: Option<String>,
    window: Option<OperationWindow>,
    timetable: Option<Timetable>,
    spec: TimingSpec,
    /// The branch's hours, when the rule runs by them (for the words).
    hours: Option<Arc<OpeningHours>>,
    zone: Result<Zone, ScheduleError>,
    jitter_seconds: u32,
    overlap: OverlapPolicy,
    schedule: Result<Schedule, String>,
}

impl RuleSchedule {
    /// Parses the stored fields once; never fails (a problem is kept for the answers).
    pub fn new(timing: RuleTiming<'_>) -> RuleSchedule {
        // The window needs both ends, as the row and the plan entry have always read it.
        let window = OperationWindow::from_ends(timing.from, timing.to);
        let offset = jitter_offset(timing.id, timing.jitter_seconds);
        let spec = timing.spec.cloned().unwrap_or_default();
        let mut rule = RuleSchedule::timed(
            timing.cron,
            window,
            timing.zone,
            offset,
            (&spec, timing.hours),
        );
        let anchored = timing.cron.is_some_and(AnchorSchedule::is_anchor);
        if spec.while_open.is_some() || anchored {
            rule.hours = timing.hours.cloned();
        }
        rule.spec = spec;
        rule.jitter_seconds = timing.jitter_seconds;
        rule.overlap = timing.overlap;
        rule
    }

    /// A schedule from loose parts with each run moved `offset` (no jitter spread named,
    /// skipping overlaps): the one-off questions of [`super::reschedule`].
    pub(crate) fn with_offset(
        cron: Option<&str>,
        window: Option<OperationWindow>,
        zone: Option<&str>,
        offset: TimeDelta,
    ) -> RuleSchedule {
        RuleSchedule::timed(cron, window, zone, offset, (&TimingSpec::default(), None))
    }

    /// The schedule from its parts; a spec that cannot be used leaves the rule closed
    /// (it must not run where its hours were meant to forbid it) with the problem kept.
    fn timed(
        cron: Option<&str>,
        window: Option<OperationWindow>,
        zone: Option<&str>,
        offset: TimeDelta,
        (spec, hours): (&TimingSpec, Option<&Arc<OpeningHours>>),
    ) -> RuleSchedule {
        let zone = Zone::parse_or_default(zone);
        let (timetable, spec_problem) = rule_timetable(cron, window, spec, hours);
        let schedule = match (cron, &zone, spec_problem) {
            (_, _, Some(problem)) => Err(problem),
            (None, _, None) => Err("the rule has no cron expression".to_owned()),
            (Some(_), Err(error), None) => Err(error.to_string()),
            (Some(cron), Ok(zone), None) => Recurrence::parse(cron)
                .and_then(|recurrence| {
                    Schedule::in_timetable(recurrence, timetable.clone(), hours.cloned(), *zone)
                })
                .map(|schedule| schedule.with_offset(offset))
                .map_err(|error| error.to_string()),
        };
        RuleSchedule {
            cron: cron.map(str::to_owned),
            window,
            timetable,
            spec: TimingSpec::default(),
            hours: None,
            zone,
            jitter_seconds: 0,
            overlap: OverlapPolicy::Skip,
            schedule,
        }
    }

    /// The same schedule under overlap `policy`.
    pub(crate) fn overlapping(mut self, policy: OverlapPolicy) -> RuleSchedule {
        self.overlap = policy;
        self
    }

    /// The usable schedule (jitter included), or what is wrong with it.
    pub fn schedule(&self) -> Result<&Schedule, &str> {
        self.schedule.as_ref().map_err(String::as_str)
    }

    /// The daily operation window, if both ends are set and differ.
    pub fn window(&self) -> Option<&OperationWindow> {
        self.window.as_ref()
    }

    /// When the rule may run: what readiness, deadlines and the next run all read.
    pub fn timetable(&self) -> Option<&Timetable> {
        self.timetable.as_ref()
    }

    /// The timing beyond cron and daily window.
    pub fn spec(&self) -> &TimingSpec {
        &self.spec
    }

    /// Today at its branch and when it next opens, for a rule that runs by the branch's
    /// opening hours ("closed today: National Day; next opens Thu 2026-09-24 09:00").
    pub fn today(&self, now: DateTime<Utc>) -> Option<String> {
        let hours = self.hours.as_ref()?;
        // When the branch itself opens, whatever the rule's offsets.
        let opening = Timetable::new(
            Some(Restriction::Hours {
                hours: hours.clone(),
                before: 0,
                after: 0,
            }),
            self.spec.validity(),
        );
        Some(today_in_words(hours, opening.as_ref(), self.zone(), now))
    }

    /// The branch's opening hours, when the rule runs by them.
    pub fn hours(&self) -> Option<&Arc<OpeningHours>> {
        self.hours.as_ref()
    }

    /// What happens to a missed run (none: the due run is made when RES is back).
    pub fn catch_up(&self) -> Option<CatchUp> {
        self.spec.catch_up
    }

    /// The zone the rule's times are read in; an unknown stored name shows as Asia/Riyadh
    /// (the schedule itself is then unusable: see [`RuleSchedule::zone_problem`]).
    pub fn zone(&self) -> Zone {
        self.zone.as_ref().map_or(Zone::DEFAULT, |zone| *zone)
    }

    /// Why the stored zone name could not be used, if it could not.
    pub fn zone_problem(&self) -> Option<&ScheduleError> {
        self.zone.as_ref().err()
    }

    /// The next run after a run that was live from `started` to `now`: under `buffer_one`
    /// an occurrence that came due meanwhile starts one more run at `now`; otherwise the
    /// schedule's next run (`now + 5 min` after a failed run), or the fixed delay with
    /// the problem when the schedule cannot be used.
    pub fn reschedule_after(
        &self,
        started: DateTime<Utc>,
        now: DateTime<Utc>,
        last_run_failed: bool,
    ) -> Rescheduled {
        if !last_run_failed
            && let Ok(schedule) = &self.schedule
            && let Some(next_run) = buffered_run(schedule, self.overlap, started, now)
        {
            return Rescheduled {
                next_run,
                problem: None,
                ended: None,
            };
        }
        self.reschedule(now, last_run_failed)
    }

    /// The next run from `now` with no run behind it (a resume, a schedule check, another
    /// runner's run).
    pub fn reschedule(&self, now: DateTime<Utc>, last_run_failed: bool) -> Rescheduled {
        let computed = self.schedule.as_ref().map_err(Clone::clone).and_then(|s| {
            s.next_run(now, last_run_failed)
                .map_err(|error| error.to_string())
        });
        match computed {
            Ok(next_run) => Rescheduled {
                next_run,
                problem: None,
                ended: None,
            },
            Err(problem) => Rescheduled {
                ended: self.schedule.as_ref().ok().and_then(|s| s.ended_on(now)),
                ..fixed_delay(now, last_run_failed, problem)
            },
        }
    }

    /// The schedule in one sentence for people: the times in words, the jitter and the
    /// overlap policy when they change anything.
    pub fn describe(&self) -> String {
        let Some(cron) = &self.cron else {
            return "no cron expression: the rule is retried every 30 minutes".to_owned();
        };
        let zone = self.zone();
        let mut sentence = match Recurrence::parse(cron) {
            Ok(Recurrence::Anchor(anchor)) => format!("{} {}", anchor.in_words(), zone.name()),
            _ => describe_schedule(cron, self.window.as_ref(), zone),
        };
        for words in spec_in_words(&self.spec) {
            sentence = format!("{sentence}; {words}");
        }
        if self.jitter_seconds > 0 {
            let offset = self
                .schedule
                .as_ref()
                .map_or(TimeDelta::zero(), Schedule::offset);
            let grid = if IntervalSchedule::is_interval(cron) {
                "grid"
            } else {
                "cron"
            };
            sentence = format!(
                "{sentence}; each run {} s after its {grid} time (jitter {} s)",
                offset.num_seconds(),
                self.jitter_seconds
            );
        }
        match self.overlap {
            OverlapPolicy::Skip => sentence,
            OverlapPolicy::BufferOne => format!(
                "{sentence}; a run that outlasts its period is followed by one more at once \
                 (buffer_one)"
            ),
        }
    }

    /// The next `count` occurrences from `from` (`from` itself first when it lies on the
    /// schedule); none when the schedule cannot be used.
    pub fn upcoming(&self, from: DateTime<Utc>, count: u32) -> Vec<DateTime<Utc>> {
        let Ok(schedule) = &self.schedule else {
            return Vec::new();
        };
        let mut times = Vec::new();
        let mut at = from - TimeDelta::seconds(1);
        for _ in 0..count {
            match schedule.next_run(at, false) {
                Ok(next) if next.next_run_time > at => {
                    at = next.next_run_time;
                    times.push(at);
                }
                _ => break,
            }
        }
        times
    }
}

/// When a rule may run, from its stored parts, without parsing its cron: readiness and
/// deadlines on both halves read it, and the schedule runs inside it. Runs at opening or
/// closing are their own window (only the validity dates limit them) and, on a branch
/// without hours, never come; a timing spec that cannot be used closes the rule and says why.
pub fn rule_timetable(
    cron: Option<&str>,
    window: Option<OperationWindow>,
    spec: &TimingSpec,
    hours: Option<&Arc<OpeningHours>>,
) -> (Option<Timetable>, Option<String>) {
    let closed = || Restriction::Hours {
        hours: Arc::default(),
        before: 0,
        after: 0,
    };
    if cron.is_some_and(AnchorSchedule::is_anchor) {
        let restriction = hours.is_none().then(closed);
        return (Timetable::new(restriction, spec.validity()), None);
    }
    match spec.restriction(window, hours) {
        Ok(restriction) => (Timetable::new(restriction, spec.validity()), None),
        Err(error) => (
            Timetable::new(Some(closed()), spec.validity()),
            Some(error.to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::reschedule_run;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    fn timing<'a>(cron: Option<&'a str>, zone: Option<&'a str>) -> RuleTiming<'a> {
        RuleTiming {
            id: Uuid::from_u128(42),
            cron,
            from: NaiveTime::from_hms_opt(8, 0, 0),
            to: NaiveTime::from_hms_opt(18, 0, 0),
            zone,
            jitter_seconds: 60,
            overlap: OverlapPolicy::BufferOne,
            hours: None,
            spec: None,
        }
    }

    #[test]
    fn it_answers_as_the_loose_reschedule_does() {
        let rule = RuleSchedule::new(timing(Some("*/30 * * * *"), Some("Asia/Riyadh")));
        let window = rule.window().copied();
        let offset = jitter_offset(Uuid::from_u128(42), 60);
        for (started, now, failed) in [
            ("2026-03-02T06:00:42Z", "2026-03-02T06:10:00Z", false),
            ("2026-03-02T06:00:42Z", "2026-03-02T06:40:00Z", false),
            ("2026-03-02T06:00:42Z", "2026-03-02T06:40:00Z", true),
            ("2026-03-02T14:00:42Z", "2026-03-02T15:10:00Z", false),
        ] {
            let loose = reschedule_run(
                Some("*/30 * * * *"),
                window,
                Some("Asia/Riyadh"),
                offset,
                (OverlapPolicy::BufferOne, at(started)),
                at(now),
                failed,
            );
            assert_eq!(
                rule.reschedule_after(at(started), at(now), failed),
                loose,
                "{started} → {now}"
            );
        }
    }

    #[test]
    fn an_unknown_zone_is_one_problem_for_every_answer() {
        let rule = RuleSchedule::new(timing(Some("0 9 * * *"), Some("Asia/Riyad")));
        let now = at("2026-03-02T06:00:00Z");
        assert!(rule.zone_problem().is_some());
        assert_eq!(rule.zone(), Zone::DEFAULT, "shown on Riyadh's clock");
        let next = rule.reschedule(now, false);
        assert_eq!(next.next_run.next_run_time, now + TimeDelta::minutes(30));
        assert!(next.problem.is_some_and(|p| p.contains("Asia/Riyad")));
        assert!(rule.upcoming(now, 3).is_empty(), "it runs at none of them");
        assert!(rule.schedule().is_err());
    }

    #[test]
    fn no_cron_expression_is_retried_and_said_so() {
        let rule = RuleSchedule::new(timing(None, None));
        let now = at("2026-03-02T06:00:00Z");
        assert_eq!(
            rule.describe(),
            "no cron expression: the rule is retried every 30 minutes"
        );
        let failed = rule.reschedule(now, true);
        assert_eq!(failed.next_run.next_run_time, now + TimeDelta::minutes(5));
        assert_eq!(
            failed.problem.as_deref(),
            Some("the rule has no cron expression")
        );
    }

    #[test]
    fn the_sentence_names_the_jitter_and_the_overlap_policy() {
        let rule = RuleSchedule::new(timing(Some("*/30 * * * *"), Some("UTC")));
        let seconds = jitter_offset(Uuid::from_u128(42), 60).num_seconds();
        assert_eq!(
            rule.describe(),
            format!(
                "every 30 minutes, 08:00–18:00 UTC; each run {seconds} s after its cron time \
                 (jitter 60 s); a run that outlasts its period is followed by one more at \
                 once (buffer_one)"
            )
        );
        let plain = RuleSchedule::new(RuleTiming {
            jitter_seconds: 0,
            overlap: OverlapPolicy::Skip,
            ..timing(Some("@every 90m"), Some("UTC"))
        });
        assert_eq!(
            plain.describe(),
            "every 90 minutes from each opening, 08:00–18:00 UTC"
        );
    }

    #[test]
    fn upcoming_lists_the_jittered_occurrences_from_a_time_on_the_schedule() {
        let rule = RuleSchedule::new(timing(Some("0 * * * *"), Some("UTC")));
        let seconds = jitter_offset(Uuid::from_u128(42), 60).num_seconds();
        let first = at("2026-03-02T08:00:00Z") + TimeDelta::seconds(seconds);
        assert_eq!(
            rule.upcoming(first, 3),
            vec![
                first,
                first + TimeDelta::hours(1),
                first + TimeDelta::hours(2)
            ]
        );
        let evening = at("2026-03-02T17:30:00Z");
        assert_eq!(
            rule.upcoming(evening, 1),
            vec![at("2026-03-03T08:00:00Z") + TimeDelta::seconds(seconds)],
            "the next opening"
        );
    }
}
