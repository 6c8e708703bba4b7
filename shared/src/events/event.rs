//! An event as a sender posts it, checked once for both intakes (the runner's local one and
//! the functions' `events_publish`): a refusal names the field, and nothing about a refused
//! event is kept.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The most bytes an event's `data` may take, as JSON.
pub const MAX_DATA_BYTES: usize = 16 * 1024;
/// The longest `id` a sender may choose.
pub const MAX_ID_CHARS: usize = 128;
/// The longest topic.
pub const MAX_TOPIC_CHARS: usize = 64;
/// How far ahead of the receiver's clock `occurred_at` may be (a sender's clock runs fast).
pub const MAX_AHEAD: TimeDelta = TimeDelta::minutes(5);

/// An accepted event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// What happened: `a-z 0-9 . _ - /`, starting with a letter or digit (`door/opened`).
    pub topic: String,
    /// The sender's id for it: a retry with the same id is the same event.
    pub id: String,
    /// The branch it happened at, when the receiver serves several.
    pub branch: Option<Uuid>,
    /// When it happened, by the sender's clock (the receiver's when not given).
    pub occurred_at: DateTime<Utc>,
    /// What the sender says about it: a JSON object, at most [`MAX_DATA_BYTES`].
    pub data: Map<String, Value>,
}

/// Why an event was refused: the field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct Refused {
    /// The field at fault (`topic`, `data`, …; `event` for the whole).
    pub field: &'static str,
    /// What is wrong, in words.
    pub problem: String,
    /// The event is too large (an HTTP intake answers 413 rather than 400).
    pub too_large: bool,
}

fn refused(field: &'static str, problem: impl Into<String>) -> Refused {
    Refused {
        field,
        problem: problem.into(),
        too_large: false,
    }
}

/// Checks a posted event (`body`, parsed JSON) received at `now`.
pub fn check(body: &Value, now: DateTime<Utc>) -> Result<Event, Refused> {
    let Some(object) = body.as_object() else {
        return Err(refused("event", "must be a JSON object"));
    };
    if let Some(unknown) = object
        .keys()
        .find(|k| !["topic", "id", "branch", "occurred_at", "data"].contains(&k.as_str()))
    {
        return Err(Refused {
            field: "event",
            problem: format!(
                "unknown field '{}' (topic, id, branch, occurred_at, data)",
                crate::untrusted::Untrusted(unknown)
            ),
            too_large: false,
        });
    }
    let text = |field: &'static str| match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(refused(field, "must be a string")),
    };
    let topic = text("topic")?.ok_or_else(|| refused("topic", "is missing"))?;
    check_topic(topic)?;
    let id =
        text("id")?.ok_or_else(|| refused("id", "is missing (the sender's id, for retries)"))?;
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS || id.chars().any(char::is_control) {
        return Err(refused(
            "id",
            format!("must be 1 to {MAX_ID_CHARS} characters without control characters"),
        ));
    }
    let branch = text("branch")?
        .map(|b| Uuid::parse_str(b).map_err(|_| refused("branch", "must be a branch id (a UUID)")))
        .transpose()?;
    let occurred_at = match text("occurred_at")? {
        None => now,
        Some(at) => {
            let at = DateTime::parse_from_rfc3339(at)
                .map_err(|_| refused("occurred_at", "must be an RFC 3339 time with its offset"))?
                .with_timezone(&Utc);
            if at > now + MAX_AHEAD {
                return Err(refused(
                    "occurred_at",
                    "is more than 5 minutes ahead of this clock",
                ));
            }
            at
        }
    };
    let data = match object.get("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(data)) => data.clone(),
        Some(_) => return Err(refused("data", "must be a JSON object")),
    };
    let size = serde_json::to_vec(&data).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_DATA_BYTES {
        return Err(Refused {
            field: "data",
            problem: format!("is {size} bytes; at most {MAX_DATA_BYTES}"),
            too_large: true,
        });
    }
    Ok(Event {
        topic: topic.to_owned(),
        id: id.to_owned(),
        branch,
        occurred_at,
        data,
    })
}

/// Whether `topic` is a topic's spelling (documents check the topics rules listen to alike).
pub fn check_topic(topic: &str) -> Result<(), Refused> {
    let mut chars = topic.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = topic.chars().all(|c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '/')
    });
    if first_ok && rest_ok && topic.len() <= MAX_TOPIC_CHARS && !topic.ends_with('/') {
        Ok(())
    } else {
        Err(refused(
            "topic",
            format!(
                "'{}' is not a topic: 1 to {MAX_TOPIC_CHARS} of a-z 0-9 . _ - /, starting with a letter or digit",
                crate::untrusted::Untrusted(topic)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-12-08T10:00:00Z".parse().expect("an instant")
    }

    #[test]
    fn a_well_formed_event_is_accepted_with_the_receivers_time_when_it_gives_none() {
        let event = check(
            &json!({"topic": "door/opened", "id": "nvr-7:1234", "data": {"door": "back"}}),
            now(),
        )
        .expect("accepted");
        assert_eq!(event.topic, "door/opened");
        assert_eq!(event.occurred_at, now());
        assert_eq!(event.data["door"], "back");
        let dated = check(
            &json!({"topic": "pos.void", "id": "1", "occurred_at": "2026-12-08T12:59:00+03:00",
                    "branch": "3b9e7d2a-0000-4000-8000-000000000001"}),
            now(),
        )
        .expect("accepted");
        assert_eq!(dated.occurred_at, now() - TimeDelta::minutes(1));
        assert!(dated.branch.is_some());
    }

    #[test]
    fn each_bad_field_is_refused_by_name() {
        let cases = [
            (json!([1]), "event"),
            (json!({"topic": "a", "id": "1", "colour": "red"}), "event"),
            (json!({"id": "1"}), "topic"),
            (json!({"topic": "Door", "id": "1"}), "topic"),
            (json!({"topic": "door/", "id": "1"}), "topic"),
            (json!({"topic": "a".repeat(65), "id": "1"}), "topic"),
            (json!({"topic": 7, "id": "1"}), "topic"),
            (json!({"topic": "a"}), "id"),
            (json!({"topic": "a", "id": ""}), "id"),
            (json!({"topic": "a", "id": "x\ny"}), "id"),
            (json!({"topic": "a", "id": "x".repeat(129)}), "id"),
            (json!({"topic": "a", "id": "1", "branch": "17"}), "branch"),
            (
                json!({"topic": "a", "id": "1", "occurred_at": "yesterday"}),
                "occurred_at",
            ),
            (
                json!({"topic": "a", "id": "1", "occurred_at": "2026-12-08T10:06:00Z"}),
                "occurred_at",
            ),
            (json!({"topic": "a", "id": "1", "data": [1, 2]}), "data"),
        ];
        for (body, field) in cases {
            let refusal = check(&body, now()).expect_err(&body.to_string());
            assert_eq!(refusal.field, field, "{body}: {refusal}");
            assert!(!refusal.too_large);
        }
    }

    #[test]
    fn data_over_the_limit_is_too_large_and_at_the_limit_is_not() {
        // {"k":"…"} is 8 bytes around the string.
        let at_limit =
            json!({"topic": "a", "id": "1", "data": {"k": "x".repeat(MAX_DATA_BYTES - 8)}});
        assert!(check(&at_limit, now()).is_ok());
        let over = json!({"topic": "a", "id": "1", "data": {"k": "x".repeat(MAX_DATA_BYTES - 7)}});
        let refusal = check(&over, now()).expect_err("too large");
        assert_eq!((refusal.field, refusal.too_large), ("data", true));
    }
}
