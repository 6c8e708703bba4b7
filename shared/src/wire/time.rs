//! Instants on the wire: RFC 3339 in UTC with a `Z` (fractional seconds only when
//! present), written as one string. chrono's own serializer formats piecewise through
//! `collect_str`, which is several times slower on plans with tens of thousands of times.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serializer};

/// `#[serde(with = "time")]` for `DateTime<Utc>`.
pub fn serialize<S: Serializer>(t: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

/// Accepts any RFC 3339 instant.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
    DateTime::<Utc>::deserialize(deserializer)
}

/// `#[serde(with = "time::option")]` for `Option<DateTime<Utc>>`.
pub mod option {
    use super::*;

    /// Writes `null` or the instant.
    pub fn serialize<S: Serializer>(
        t: &Option<DateTime<Utc>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::serialize(t, serializer),
            None => serializer.serialize_none(),
        }
    }

    /// Reads `null` or an instant.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<DateTime<Utc>>, D::Error> {
        Option::<DateTime<Utc>>::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Stamp {
        #[serde(with = "super")]
        at: DateTime<Utc>,
        #[serde(with = "super::option", default)]
        maybe: Option<DateTime<Utc>>,
    }

    #[test]
    fn writes_what_chrono_writes() {
        for text in [
            "2026-03-02T11:30:00Z",
            "2026-03-02T11:30:00.250Z",
            "2026-03-02T11:30:00.123456Z",
        ] {
            let at: DateTime<Utc> = text.parse().expect("instant");
            let ours = serde_json::to_string(&Stamp {
                at,
                maybe: Some(at),
            })
            .expect("json");
            let chrono = serde_json::to_string(&at).expect("json");
            assert_eq!(ours, format!("{{\"at\":{chrono},\"maybe\":{chrono}}}"));
            let back: Stamp = serde_json::from_str(&ours).expect("parse");
            assert_eq!(back.at, at);
        }
        let none = serde_json::to_string(&Stamp {
            at: Utc::now(),
            maybe: None,
        })
        .expect("json");
        assert!(none.ends_with("\"maybe\":null}"));
    }
}
