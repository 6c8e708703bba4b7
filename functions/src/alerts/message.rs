//! What a channel is sent: a generic webhook's JSON (the item, its event and its subject)
//! or a Slack-compatible `{"text": …}` with the untrusted names escaped as Slack asks.

use res_shared::wire::ChannelKind;
use serde_json::{Value, json};

use super::items::{AlertKind, Subject};

/// Why a message is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The item opened.
    Firing,
    /// Its condition cleared.
    Resolved,
    /// An operator asked to test the channel.
    Test,
}

impl Event {
    /// The spelling in `notification_outbox.event` and in messages.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Event::Firing => "firing",
            Event::Resolved => "resolved",
            Event::Test => "test",
        }
    }
}

/// The body sent to a channel of `format` about item `key` (`kind` is `None` for a test).
pub(crate) fn body(
    format: ChannelKind,
    event: Event,
    key: &str,
    kind: Option<AlertKind>,
    subject: &Subject,
) -> Value {
    match format {
        ChannelKind::Webhook => json!({
            "event": event.as_str(),
            "item": key,
            "kind": kind.map(AlertKind::as_str),
            "summary": summary(kind, subject),
            "subject": subject,
        }),
        ChannelKind::Slack => json!({"text": slack_text(event, kind, subject)}),
    }
}

/// One line saying what needs someone: "Queue length at Branch 17 (Acme) needs attention:
/// failed 3 times in a row".
fn summary(kind: Option<AlertKind>, s: &Subject) -> String {
    let place = match (&s.rule_name, &s.branch_name, &s.runner_id) {
        (Some(rule), Some(branch), _) => format!("{rule} at {branch} ({})", s.brand_name),
        (None, Some(branch), _) => format!("{branch} ({})", s.brand_name),
        (_, _, Some(runner)) => format!("runner {runner} ({})", s.brand_name),
        _ => s.brand_name.clone(),
    };
    let state = match kind {
        Some(AlertKind::NeedsAttention) => "needs attention",
        Some(AlertKind::Overdue) => "is overdue",
        Some(AlertKind::RunnerGone) => "is gone",
        Some(AlertKind::OfflineOwnerAbsent) => "lost its offline owner",
        None => "test message",
    };
    format!("{place} {state}: {}", s.reason)
}

fn slack_text(event: Event, kind: Option<AlertKind>, s: &Subject) -> String {
    let lead = match event {
        Event::Firing => ":rotating_light:",
        Event::Resolved => ":white_check_mark: Resolved:",
        Event::Test => ":wave: Test from RES:",
    };
    let since = s.since.format("%Y-%m-%d %H:%M UTC");
    format!("{lead} {} (since {since})", slack_escape(&summary(kind, s)))
}

/// Slack reads `&`, `<` and `>` as markup; a rule or branch name must not make a link or a
/// mention.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use uuid::Uuid;

    use super::*;

    fn subject() -> Subject {
        Subject {
            brand_id: Uuid::nil(),
            brand_name: "Acme".into(),
            branch_id: Some(Uuid::nil()),
            branch_name: Some("Branch <!channel> 17".into()),
            branch_rule_id: Some(Uuid::nil()),
            rule_name: Some("Queue & length".into()),
            runner_id: None,
            reason: "failed 3 times in a row".into(),
            since: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_webhook_gets_the_item_its_event_and_its_subject() {
        let body = body(
            ChannelKind::Webhook,
            Event::Firing,
            "needs_attention:x:1",
            Some(AlertKind::NeedsAttention),
            &subject(),
        );
        assert_eq!(body["event"], "firing");
        assert_eq!(body["item"], "needs_attention:x:1");
        assert_eq!(body["kind"], "needs_attention");
        assert_eq!(
            body["summary"],
            "Queue & length at Branch <!channel> 17 (Acme) needs attention: failed 3 times in a row"
        );
        assert_eq!(body["subject"]["brand_name"], "Acme");
        assert!(body["subject"].get("runner_id").is_none());
    }

    #[test]
    fn slack_gets_one_escaped_line() {
        let body = body(
            ChannelKind::Slack,
            Event::Resolved,
            "k",
            Some(AlertKind::NeedsAttention),
            &subject(),
        );
        assert_eq!(
            body["text"],
            ":white_check_mark: Resolved: Queue &amp; length at Branch &lt;!channel&gt; 17 (Acme) \
             needs attention: failed 3 times in a row (since 1970-01-01 00:00 UTC)"
        );
    }
}
