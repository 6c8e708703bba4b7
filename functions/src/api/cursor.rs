//! The opaque plan cursor: the database snapshot a plan was read at, when, and for which
//! scope. A delta is exactly the changes committed after that snapshot.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::access::Scope;

/// Change records are kept this long; an older cursor gets a full plan.
pub(crate) const CHANGE_RETENTION_HOURS: i32 = 24;

/// A decoded cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PlanCursor {
    /// Format version.
    v: u8,
    /// `pg_snapshot` text (`xmin:xmax:xip,...`).
    pub(crate) snapshot: String,
    /// Database time of the plan.
    pub(crate) at: DateTime<Utc>,
    /// Fingerprint of the caller's scope when the plan was read.
    pub(crate) scope: String,
}

/// Full snapshot or delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlanKind {
    /// Everything in scope.
    Full,
    /// Changes since this cursor.
    Delta(PlanCursor),
}

impl PlanCursor {
    /// A cursor for a plan read now.
    pub(crate) fn new(snapshot: String, at: DateTime<Utc>, scope: String) -> PlanCursor {
        PlanCursor {
            v: 1,
            snapshot,
            at,
            scope,
        }
    }

    /// The opaque text handed to the caller.
    pub(crate) fn encode(&self) -> String {
        // Serialising this plain struct cannot fail.
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Reads a cursor back; the error says what is wrong with it.
    pub(crate) fn decode(text: &str) -> Result<PlanCursor, String> {
        let invalid = || "since is not a cursor returned by get-execution-plan-v2".to_owned();
        let bytes = URL_SAFE_NO_PAD.decode(text.trim()).map_err(|_| invalid())?;
        let cursor: PlanCursor = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if cursor.v != 1 || !is_snapshot_text(&cursor.snapshot) {
            return Err(invalid());
        }
        Ok(cursor)
    }
}

/// Decides between a full plan and a delta: a delta needs a cursor for the same scope
/// that is younger than the change records kept.
pub(crate) fn plan_kind(since: Option<PlanCursor>, scope: &str, now: DateTime<Utc>) -> PlanKind {
    // An hour of margin keeps a cursor from outliving the records it depends on.
    let oldest = now - TimeDelta::hours(i64::from(CHANGE_RETENTION_HOURS) - 1);
    match since {
        Some(cursor) if cursor.scope == scope && cursor.at >= oldest && cursor.at <= now => {
            PlanKind::Delta(cursor)
        }
        _ => PlanKind::Full,
    }
}

/// A fingerprint of a scope: a cursor is only valid for the scope it was read with.
pub(crate) fn scope_key(scope: Scope<'_>) -> String {
    let mut hasher = Sha256::new();
    match scope {
        Scope::All => hasher.update(b"all"),
        Scope::Branches(ids) => {
            let mut sorted = ids.to_vec();
            sorted.sort_unstable();
            for id in sorted {
                hasher.update(id.as_bytes());
            }
        }
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A well-formed `pg_snapshot` text (`xmin:xmax:xip,...` with `xmin <= xip < xmax`,
/// ascending), so a forged cursor cannot make the database cast fail.
fn is_snapshot_text(text: &str) -> bool {
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut parts = text.split(':');
    let (Some(xmin), Some(xmax), Some(xip), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Some(xmin), Some(xmax)) = (number(xmin), number(xmax)) else {
        return false;
    };
    if xmin == 0 || xmin > xmax {
        return false;
    }
    if xip.is_empty() {
        return true;
    }
    let mut previous = None;
    xip.split(',').all(|id| match number(id) {
        Some(id) if id >= xmin && id < xmax && previous.is_none_or(|p| p < id) => {
            previous = Some(id);
            true
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("test instant")
    }

    #[test]
    fn cursors_round_trip() {
        let cursor = PlanCursor::new(
            "10:20:12,15".into(),
            at("2026-03-02T11:00:00Z"),
            "ab".into(),
        );
        assert_eq!(PlanCursor::decode(&cursor.encode()), Ok(cursor));
    }

    #[test]
    fn garbage_is_not_a_cursor() {
        for text in ["", "abc", "eyJ2IjoxfQ", "!!!"] {
            assert!(PlanCursor::decode(text).is_err(), "{text}");
        }
        for snapshot in [
            "1:2:3;DROP",
            "5:3:",
            "0:1:",
            "3:9:2",
            "3:9:9",
            "3:9:5,4",
            "1:99999999999999999999999:",
        ] {
            let forged = PlanCursor::new(snapshot.into(), at("2026-03-02T11:00:00Z"), "ab".into());
            assert!(PlanCursor::decode(&forged.encode()).is_err(), "{snapshot}");
        }
        for snapshot in ["1:1:", "3:9:", "3:9:3,5,8"] {
            let valid = PlanCursor::new(snapshot.into(), at("2026-03-02T11:00:00Z"), "ab".into());
            assert!(PlanCursor::decode(&valid.encode()).is_ok(), "{snapshot}");
        }
    }

    #[test]
    fn same_scope_recent_cursor_gives_a_delta() {
        let now = at("2026-03-02T11:00:00Z");
        let cursor = PlanCursor::new("1:1:".into(), at("2026-03-02T10:59:40Z"), "s".into());
        assert_eq!(
            plan_kind(Some(cursor.clone()), "s", now),
            PlanKind::Delta(cursor)
        );
    }

    #[test]
    fn other_scope_old_or_future_cursor_gives_a_full_plan() {
        let now = at("2026-03-02T11:00:00Z");
        let cursor =
            |when: &str, scope: &str| PlanCursor::new("1:1:".into(), at(when), scope.into());
        assert_eq!(plan_kind(None, "s", now), PlanKind::Full);
        assert_eq!(
            plan_kind(Some(cursor("2026-03-02T10:59:40Z", "t")), "s", now),
            PlanKind::Full
        );
        assert_eq!(
            plan_kind(Some(cursor("2026-03-01T10:00:00Z", "s")), "s", now),
            PlanKind::Full
        );
        assert_eq!(
            plan_kind(Some(cursor("2026-03-02T12:00:00Z", "s")), "s", now),
            PlanKind::Full
        );
    }

    #[test]
    fn scope_keys_ignore_order_and_tell_scopes_apart() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(
            scope_key(Scope::Branches(&[a, b])),
            scope_key(Scope::Branches(&[b, a]))
        );
        assert_ne!(
            scope_key(Scope::Branches(&[a])),
            scope_key(Scope::Branches(&[a, b]))
        );
        assert_ne!(scope_key(Scope::All), scope_key(Scope::Branches(&[])));
    }
}
