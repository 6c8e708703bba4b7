//! Cron occurrences as instants: the wall-clock search made DST-aware.
//!
//! The wall clock is searched with bitmasks; each matching wall-clock time is then
//! resolved in the zone, with the OCPS rules croner follows: a fixed-time job caught in a
//! spring-forward gap runs at the first instant after it, and runs only in the first pass
//! of a fall-back overlap; an interval job skips the gap and runs in both passes.

use chrono::{DateTime, TimeDelta, Utc};

use super::FieldSets;
use crate::schedule::zone::{Resolved, Zone};

/// Wall-clock matches examined before giving up. Only DST oddities cost a candidate
/// without returning, and a zone changes its clock at most a few times a year.
const MAX_CANDIDATES: usize = 64;

/// The first occurrence strictly after `now`.
pub(super) fn next_after(
    sets: &FieldSets,
    zone: Zone,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let wall = zone.local(now);
    let ahead = walk(
        sets,
        zone,
        wall.checked_add_signed(TimeDelta::seconds(1))?,
        now,
    );
    if sets.is_fixed_time() {
        return ahead;
    }
    // On the first pass of a repeated hour, the wall clock walked above never revisits
    // the second pass, where an interval job also runs: walk it from its start too.
    if let Resolved::Ambiguous(_, later) = zone.resolve(wall)
        && now < later
    {
        let fall_back = zone.fall_back_instant(now, later);
        let repeated = walk(sets, zone, zone.local(fall_back), now);
        return match (ahead, repeated) {
            (Some(a), Some(r)) => Some(a.min(r)),
            (a, r) => a.or(r),
        };
    }
    ahead
}

/// Walks the wall clock from `cursor` (inclusive) to the first match whose instant is
/// after `now`.
fn walk(
    sets: &FieldSets,
    zone: Zone,
    mut cursor: chrono::NaiveDateTime,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let fixed = sets.is_fixed_time();
    for _ in 0..MAX_CANDIDATES {
        let wall = sets.next_on_or_after(cursor)?;
        match zone.resolve(wall) {
            Resolved::Single(t) if t > now => return Some(t),
            Resolved::Single(_) => {}
            Resolved::Ambiguous(first, _) if first > now => return Some(first),
            Resolved::Ambiguous(_, second) if !fixed && second > now => return Some(second),
            Resolved::Ambiguous(..) => {}
            Resolved::Gap => {
                let after = zone.after_gap(wall);
                let resumed = zone.local(after);
                if fixed && after > now && sets.date_matches(resumed.date()) {
                    return Some(after);
                }
                // Nothing else in the gap exists; carry on from its end.
                if resumed > wall {
                    cursor = resumed;
                    continue;
                }
            }
        }
        cursor = wall.checked_add_signed(TimeDelta::seconds(1))?;
    }
    None
}
