//! Wall-clock time in an IANA time zone, and the DST rules that turn it into instants.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use super::error::ScheduleError;

/// No UTC offset in the tz database lies outside these bounds (hours), with margin.
const OFFSET_BOUND_HOURS: i64 = 15;

/// The time zone a rule's cron expression and operation window are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Zone(Tz);

/// How a wall-clock time maps onto instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// The wall-clock time happens once.
    Single(DateTime<Utc>),
    /// The clock went back: the time happens twice, earlier instant first.
    Ambiguous(DateTime<Utc>, DateTime<Utc>),
    /// The clock went forward over this time: it never happens.
    Gap,
}

impl Zone {
    /// The zone RES assumes when a branch and its brand name none.
    pub const DEFAULT: Zone = Zone(Tz::Asia__Riyadh);

    /// Parses an IANA name such as `Asia/Riyadh`.
    pub fn parse(name: &str) -> Result<Zone, ScheduleError> {
        Tz::from_str(name.trim())
            .map(Zone)
            .map_err(|_| ScheduleError::TimeZone(name.to_owned()))
    }

    /// Parses an optional name, falling back to [`Zone::DEFAULT`] when none is given.
    pub fn parse_or_default(name: Option<&str>) -> Result<Zone, ScheduleError> {
        name.map_or(Ok(Zone::DEFAULT), Zone::parse)
    }

    /// The IANA name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// An instant as people at the branch read it: "2026-11-25 12:30 Asia/Riyadh".
    pub fn wall_clock(&self, instant: DateTime<Utc>) -> String {
        format!(
            "{} {}",
            self.local(instant).format("%Y-%m-%d %H:%M"),
            self.name()
        )
    }

    /// The wall-clock time at an instant, to the second (sub-seconds are dropped).
    pub fn local(&self, instant: DateTime<Utc>) -> NaiveDateTime {
        let local = self.local_exact(instant);
        local.with_nanosecond(0).unwrap_or(local)
    }

    fn local_exact(&self, instant: DateTime<Utc>) -> NaiveDateTime {
        let utc = instant.naive_utc();
        let offset = self.0.offset_from_utc_datetime(&utc).fix();
        utc + TimeDelta::seconds(i64::from(offset.local_minus_utc()))
    }

    /// How a wall-clock time maps onto instants.
    pub(crate) fn resolve(&self, civil: NaiveDateTime) -> Resolved {
        match self.0.from_local_datetime(&civil) {
            LocalResult::Single(t) => Resolved::Single(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(a, b) => {
                let (a, b) = (a.with_timezone(&Utc), b.with_timezone(&Utc));
                Resolved::Ambiguous(a.min(b), a.max(b))
            }
            LocalResult::None => Resolved::Gap,
        }
    }

    /// The instant a wall-clock boundary (a window edge) stands for: inside a gap it moves
    /// to the first instant after the gap; when the time happens twice it takes the first.
    pub(crate) fn boundary(&self, civil: NaiveDateTime) -> DateTime<Utc> {
        match self.resolve(civil) {
            Resolved::Single(t) | Resolved::Ambiguous(t, _) => t,
            Resolved::Gap => self.after_gap(civil),
        }
    }

    /// The first instant after the DST gap that swallowed `civil`: the moment the clock
    /// jumped, whose wall-clock time is the end of the gap.
    pub(crate) fn after_gap(&self, civil: NaiveDateTime) -> DateTime<Utc> {
        let as_utc = civil.and_utc();
        // Wall-clock time only moves forward around a gap, so bisect for the first instant
        // whose wall-clock time is past `civil`.
        self.first_instant_where(
            as_utc - TimeDelta::hours(OFFSET_BOUND_HOURS),
            as_utc + TimeDelta::hours(OFFSET_BOUND_HOURS),
            |u| self.local_exact(u) > civil,
        )
    }

    /// The moment the clock goes back, for an instant `earlier` in the first pass of a
    /// repeated hour whose second pass contains `later`.
    pub(crate) fn fall_back_instant(
        &self,
        earlier: DateTime<Utc>,
        later: DateTime<Utc>,
    ) -> DateTime<Utc> {
        let later_offset = self.offset_seconds(later);
        self.first_instant_where(earlier, later, |u| self.offset_seconds(u) == later_offset)
    }

    /// The zone's offset (seconds east of UTC) when it is the same at both civil times —
    /// no change of offset between them, as zones change theirs months apart — so every
    /// civil time between is that far from UTC.
    pub(crate) fn steady_offset(&self, from: NaiveDateTime, to: NaiveDateTime) -> Option<i32> {
        let offset = self.offset_seconds(self.boundary(from));
        (offset == self.offset_seconds(self.boundary(to))).then_some(offset)
    }

    fn offset_seconds(&self, instant: DateTime<Utc>) -> i32 {
        self.0
            .offset_from_utc_datetime(&instant.naive_utc())
            .fix()
            .local_minus_utc()
    }

    /// Bisects whole seconds in `(low, high]` for the first instant where `flipped` holds;
    /// `flipped` must be false at `low` and true from some point on.
    fn first_instant_where(
        &self,
        low: DateTime<Utc>,
        high: DateTime<Utc>,
        flipped: impl Fn(DateTime<Utc>) -> bool,
    ) -> DateTime<Utc> {
        let (mut low, mut high) = (low.timestamp(), high.timestamp());
        let at = |seconds: i64| DateTime::<Utc>::from_timestamp(seconds, 0).unwrap_or_default();
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if flipped(at(middle)) {
                high = middle;
            } else {
                low = middle;
            }
        }
        at(high)
    }
}

impl Default for Zone {
    fn default() -> Self {
        Zone::DEFAULT
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Zone {
    type Err = ScheduleError;

    fn from_str(name: &str) -> Result<Zone, ScheduleError> {
        Zone::parse(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn civil(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").expect("test timestamp")
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("test instant")
            .with_timezone(&Utc)
    }

    fn berlin() -> Zone {
        Zone::parse("Europe/Berlin").expect("known zone")
    }

    #[test]
    fn unknown_zones_are_named_in_the_error() {
        let error = Zone::parse("Asia/Riyad").expect_err("not a zone");
        assert_eq!(
            error.to_string(),
            "unknown time zone 'Asia/Riyad' (expected an IANA name such as Asia/Riyadh)"
        );
    }

    #[test]
    fn riyadh_is_the_default() {
        assert_eq!(Zone::default().name(), "Asia/Riyadh");
    }

    #[test]
    fn a_gap_boundary_moves_to_the_first_instant_after_it() {
        // Berlin jumps from 02:00 CET to 03:00 CEST on 2026-03-29 (01:00 UTC).
        assert_eq!(
            berlin().resolve(civil("2026-03-29 02:30:00")),
            Resolved::Gap
        );
        assert_eq!(
            berlin().boundary(civil("2026-03-29 02:30:00")),
            utc("2026-03-29T01:00:00Z")
        );
        assert_eq!(
            berlin().local(utc("2026-03-29T01:00:00Z")),
            civil("2026-03-29 03:00:00")
        );
    }

    #[test]
    fn an_ambiguous_boundary_takes_the_first_instant() {
        // Berlin goes back from 03:00 CEST to 02:00 CET on 2026-10-25 (01:00 UTC).
        let twice = civil("2026-10-25 02:30:00");
        assert_eq!(
            berlin().resolve(twice),
            Resolved::Ambiguous(utc("2026-10-25T00:30:00Z"), utc("2026-10-25T01:30:00Z"))
        );
        assert_eq!(berlin().boundary(twice), utc("2026-10-25T00:30:00Z"));
    }

    #[test]
    fn finds_the_fall_back_moment() {
        let moment =
            berlin().fall_back_instant(utc("2026-10-25T00:30:00Z"), utc("2026-10-25T01:30:00Z"));
        assert_eq!(moment, utc("2026-10-25T01:00:00Z"));
    }

    #[test]
    fn local_drops_sub_seconds() {
        let instant = utc("2026-03-02T11:00:00.750Z");
        assert_eq!(Zone::DEFAULT.local(instant), civil("2026-03-02 14:00:00"));
    }
}
