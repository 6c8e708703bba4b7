//! What pages show, as plain strings: times in the branch's zone and relative to now,
//! durations, statuses as words. Templates only place them (and escape them).

use chrono::{DateTime, Utc};
use res_shared::schedule::{Zone, relative_time};

/// The frame around every page: who is signed in and what they may do.
#[derive(Debug, Clone)]
pub(crate) struct Chrome {
    pub(crate) key_name: String,
    pub(crate) role: &'static str,
    /// Operator keys see the action forms; viewer keys do not.
    pub(crate) may_act: bool,
    pub(crate) csrf: String,
    /// The navigation entry of this page.
    pub(crate) section: &'static str,
}

/// An instant as a person reads it: local time with its zone named, and how long ago or
/// how soon; `iso` for the `<time>` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct When {
    pub(crate) iso: String,
    pub(crate) local: String,
    pub(crate) relative: String,
}

/// `at` in the zone named `zone` (UTC when the name is unknown, and then it says so).
pub(crate) fn when(at: DateTime<Utc>, zone: &str, now: DateTime<Utc>) -> When {
    let local = match Zone::parse(zone) {
        Ok(zone) => format!(
            "{} {}",
            zone.local(at).format("%Y-%m-%d %H:%M:%S"),
            zone.name()
        ),
        Err(_) => format!("{} UTC", at.format("%Y-%m-%d %H:%M:%S")),
    };
    When {
        iso: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        local,
        relative: relative_time(at, now),
    }
}

pub(crate) fn when_opt(at: Option<DateTime<Utc>>, zone: &str, now: DateTime<Utc>) -> Option<When> {
    at.map(|at| when(at, zone, now))
}

/// An acknowledgement as pages show it: by whom, until when, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Acked {
    pub(crate) by: String,
    pub(crate) until: When,
    pub(crate) why: String,
}

pub(crate) fn acked(
    ack: &res_shared::wire::Acknowledgement,
    zone: &str,
    now: DateTime<Utc>,
) -> Acked {
    Acked {
        by: ack.by.clone(),
        until: when(ack.until, zone, now),
        why: ack.reason.clone(),
    }
}

pub(crate) use res_shared::wire::run_report::duration_in_words as duration;

/// A status word, and the style class that colours it (the word is always shown, so no
/// state is told by colour alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Badge {
    pub(crate) text: String,
    pub(crate) class: &'static str,
}

/// A rule's state as one word: its condition, or "overdue" for an idle rule nobody takes.
pub(crate) fn rule_badge(condition: res_shared::wire::RuleCondition, overdue: bool) -> Badge {
    if overdue && condition == res_shared::wire::RuleCondition::Idle {
        badge("overdue")
    } else {
        badge(condition.as_str())
    }
}

pub(crate) fn badge(word: &str) -> Badge {
    let class = match word {
        "completed" | "alive" | "idle" => "good",
        "running" | "scheduled" | "paused" | "waiting" | "stale" => "busy",
        "failed"
        | "crashed"
        | "timeout"
        | "needs_attention"
        | "gone"
        | "overdue"
        | "operation_window_exceeded" => "bad",
        _ => "quiet",
    };
    Badge {
        text: word.replace('_', " "),
        class,
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn times_are_local_with_the_zone_named_and_relative() {
        let at = Utc.with_ymd_and_hms(2026, 11, 24, 9, 30, 0).single();
        let at = at.unwrap_or_default();
        let shown = when(at, "Asia/Riyadh", at + chrono::TimeDelta::minutes(3));
        assert_eq!(shown.local, "2026-11-24 12:30:00 Asia/Riyadh");
        assert_eq!(shown.relative, "3 min ago");
        assert_eq!(shown.iso, "2026-11-24T09:30:00Z");
        assert_eq!(
            when(at, "Mars/Olympus", at).local,
            "2026-11-24 09:30:00 UTC"
        );
    }

    #[test]
    fn statuses_are_words_first() {
        assert_eq!(badge("needs_attention").text, "needs attention");
        assert_eq!(badge("failed").class, "bad");
    }
}
