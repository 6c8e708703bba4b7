//! Deterministic jitter: a fleet's rules that share a cron time (every branch's
//! `0 * * * *`) would all be claimed in the same second. With `jitter_seconds` set, each
//! branch rule runs a fixed number of seconds after its cron time instead, derived from its
//! id, so the cloud and the site compute the same instant without telling each other.

use chrono::TimeDelta;
use uuid::Uuid;

/// The largest jitter a rule may have: an hour.
pub const MAX_JITTER_SECONDS: u32 = 3_600;

/// The offset of branch rule `id` under `jitter_seconds`: whole seconds in
/// `[0, jitter_seconds)`, the same wherever it is computed. Zero without jitter; a jitter
/// above [`MAX_JITTER_SECONDS`] counts as the maximum.
pub fn jitter_offset(id: Uuid, jitter_seconds: u32) -> TimeDelta {
    let jitter = jitter_seconds.min(MAX_JITTER_SECONDS);
    if jitter == 0 {
        return TimeDelta::zero();
    }
    // A v4 id's low 62 bits are random, so the remainder is spread evenly.
    let seconds = u128::from_be_bytes(*id.as_bytes()) % u128::from(jitter);
    TimeDelta::seconds(i64::try_from(seconds).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_fixed_per_id_and_inside_the_jitter() {
        let id: Uuid = "6f1c2a9e-3b7d-4c1a-9e2f-0a1b2c3d4e5f"
            .parse()
            .expect("uuid");
        assert_eq!(jitter_offset(id, 60), jitter_offset(id, 60));
        assert_eq!(jitter_offset(id, 0), TimeDelta::zero());
        assert_eq!(jitter_offset(id, 1), TimeDelta::zero());
        // The id as a number is 0x6f1c…4e5f; its remainder by 60 is fixed forever.
        let expected =
            u128::from_str_radix("6f1c2a9e3b7d4c1a9e2f0a1b2c3d4e5f", 16).expect("hex") % 60;
        assert_eq!(jitter_offset(id, 60), TimeDelta::seconds(expected as i64));
        assert!(jitter_offset(id, 100_000) < TimeDelta::seconds(i64::from(MAX_JITTER_SECONDS)));
    }

    #[test]
    fn offsets_spread_over_the_jitter() {
        let mut buckets = [0u32; 6];
        for _ in 0..6_000 {
            let offset = jitter_offset(Uuid::new_v4(), 60).num_seconds();
            assert!((0..60).contains(&offset));
            buckets[(offset / 10) as usize] += 1;
        }
        // 1,000 expected per ten seconds; a fair spread stays well within ±20 %.
        for count in buckets {
            assert!((800..1_200).contains(&count), "{buckets:?}");
        }
    }
}
