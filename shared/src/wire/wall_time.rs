//! Window ends on the wire: `HH:MM:SS` as chrono writes a `NaiveTime`, read back with
//! PostgreSQL's `24:00:00` (a stored window that ends at midnight) as `00:00:00`, which is
//! what the native column decode gives. A plan built from JSON the database wrote (the
//! delta) and one built from native rows (the full plan) then carry the same window.

use chrono::NaiveTime;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error};

use crate::schedule::read_stored_time;

/// `#[serde(with = "wall_time::option")]` for `Option<NaiveTime>`.
pub mod option {
    use super::*;

    /// Writes `null` or the time as chrono does.
    pub fn serialize<S: Serializer>(
        time: &Option<NaiveTime>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        time.serialize(serializer)
    }

    /// Reads `null` or a time of day, `24:00:00` included.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<NaiveTime>, D::Error> {
        let Some(text) = Option::<String>::deserialize(deserializer)? else {
            return Ok(None);
        };
        read_stored_time(&text)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("'{text}' is not a time of day")))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Window {
        #[serde(with = "super::option")]
        to: Option<NaiveTime>,
    }

    fn read(json: &str) -> Result<Window, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn reads_postgresql_end_of_day_as_the_native_decode_does() {
        assert_eq!(
            read(r#"{"to": "24:00:00"}"#).expect("end of day").to,
            Some(NaiveTime::MIN)
        );
        assert_eq!(read(r#"{"to": null}"#).expect("none").to, None);
        let six = Window {
            to: NaiveTime::from_hms_opt(18, 0, 0),
        };
        let text = serde_json::to_string(&six).expect("json");
        assert_eq!(text, r#"{"to":"18:00:00"}"#, "what chrono writes");
        assert_eq!(read(&text).expect("round trip"), six);
        let error = read(r#"{"to": "24:30:00"}"#).expect_err("not a time");
        assert!(
            error
                .to_string()
                .contains("'24:30:00' is not a time of day")
        );
    }
}
