//! What needs someone now, against what was already announced: the items to open (a
//! message each) and those to resolve (a message each). One message per item, however
//! many sweeps see it.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Why an item needs someone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AlertKind {
    /// A rule failed too often in a row or its schedule cannot be used.
    NeedsAttention,
    /// A rule is overdue and its branch's runners are all silent.
    Overdue,
    /// A runner has been silent past the gone threshold.
    RunnerGone,
    /// A branch's offline owner has been silent past the stale threshold.
    OfflineOwnerAbsent,
}

impl AlertKind {
    /// The spelling in `alert_items.kind` and in messages.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AlertKind::NeedsAttention => "needs_attention",
            AlertKind::Overdue => "overdue",
            AlertKind::RunnerGone => "runner_gone",
            AlertKind::OfflineOwnerAbsent => "offline_owner_absent",
        }
    }

    const ALL: [AlertKind; 4] = [
        AlertKind::NeedsAttention,
        AlertKind::Overdue,
        AlertKind::RunnerGone,
        AlertKind::OfflineOwnerAbsent,
    ];

    /// Parses a stored kind.
    pub(crate) fn parse(name: &str) -> Option<AlertKind> {
        AlertKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl TryFrom<String> for AlertKind {
    type Error = String;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        AlertKind::parse(&name).ok_or_else(|| format!("unknown alert kind {name:?}"))
    }
}

/// What an item is about, as its messages say it (kept with the open item, so the resolve
/// message names what the firing one named).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Subject {
    pub(crate) brand_id: Uuid,
    pub(crate) brand_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) branch_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) branch_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) branch_rule_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rule_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) runner_id: Option<String>,
    /// Why, in words.
    pub(crate) reason: String,
    /// Since when it has been so.
    pub(crate) since: DateTime<Utc>,
}

/// An item as the fleet shows it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CurrentItem {
    /// Stable while the condition lasts; a new flag of a rule is a new key.
    pub(crate) key: String,
    pub(crate) kind: AlertKind,
    pub(crate) subject: Subject,
    /// Acknowledged by an operator: not announced while it lasts. One already announced
    /// stays open, and is resolved when it clears, closing the incident it opened.
    pub(crate) silenced: bool,
}

/// An item already announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenItem {
    pub(crate) key: String,
    pub(crate) kind: AlertKind,
    pub(crate) subject: Subject,
}

/// What a sweep announces.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    /// New items nobody silenced: a firing message each.
    pub(crate) opened: Vec<CurrentItem>,
    /// Announced items whose condition cleared: a resolve message each.
    pub(crate) resolved: Vec<OpenItem>,
}

/// The items to open and to resolve. An item still there stays open, silenced or not; a
/// silenced new item waits, and is announced if it outlasts its acknowledgement; an
/// announced item that clears is resolved, silenced or not.
pub(crate) fn diff(current: Vec<CurrentItem>, open: Vec<OpenItem>) -> Changes {
    let announced: HashSet<&str> = open.iter().map(|o| o.key.as_str()).collect();
    let present: HashSet<&str> = current.iter().map(|c| c.key.as_str()).collect();
    let resolved = open
        .iter()
        .filter(|o| !present.contains(o.key.as_str()))
        .cloned()
        .collect();
    let opened = current
        .iter()
        .filter(|c| !c.silenced && !announced.contains(c.key.as_str()))
        .cloned()
        .collect();
    Changes { opened, resolved }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject() -> Subject {
        Subject {
            brand_id: Uuid::nil(),
            brand_name: "Acme".into(),
            branch_id: None,
            branch_name: None,
            branch_rule_id: None,
            rule_name: None,
            runner_id: None,
            reason: "failed 3 times in a row".into(),
            since: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    fn now(key: &str, silenced: bool) -> CurrentItem {
        CurrentItem {
            key: key.into(),
            kind: AlertKind::NeedsAttention,
            subject: subject(),
            silenced,
        }
    }

    fn was(key: &str) -> OpenItem {
        OpenItem {
            key: key.into(),
            kind: AlertKind::NeedsAttention,
            subject: subject(),
        }
    }

    fn keys<T>(items: &[T], key: impl Fn(&T) -> &str) -> Vec<String> {
        items.iter().map(|i| key(i).to_owned()).collect()
    }

    #[test]
    fn a_new_item_opens_once_and_resolves_once() {
        let first = diff(vec![now("a", false)], vec![]);
        assert_eq!(keys(&first.opened, |i| &i.key), ["a"]);
        assert!(first.resolved.is_empty());
        let again = diff(vec![now("a", false)], vec![was("a")]);
        assert_eq!(again, Changes::default(), "seen again: nothing to say");
        let cleared = diff(vec![], vec![was("a")]);
        assert!(cleared.opened.is_empty());
        assert_eq!(keys(&cleared.resolved, |i| &i.key), ["a"]);
    }

    #[test]
    fn an_acknowledgement_silences_a_new_item_and_keeps_an_announced_one_open() {
        assert_eq!(diff(vec![now("a", true)], vec![]), Changes::default());
        assert_eq!(
            diff(vec![now("a", true)], vec![was("a")]),
            Changes::default(),
            "acknowledged after it was announced: no resolve while it lasts"
        );
        let outlasted = diff(vec![now("a", false)], vec![]);
        assert_eq!(keys(&outlasted.opened, |i| &i.key), ["a"]);
    }

    #[test]
    fn an_acknowledged_item_that_clears_is_resolved_if_announced_and_silent_if_not() {
        // Announced, then acknowledged (still silenced when it clears): resolved.
        let announced = diff(vec![], vec![was("a")]);
        assert_eq!(keys(&announced.resolved, |i| &i.key), ["a"]);
        // Acknowledged before it was announced, cleared while silenced: nothing to say.
        assert_eq!(diff(vec![], vec![]), Changes::default());
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in AlertKind::ALL {
            assert_eq!(AlertKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).ok(),
                Some(serde_json::json!(kind.as_str()))
            );
        }
        assert_eq!(AlertKind::parse("other"), None);
    }
}
