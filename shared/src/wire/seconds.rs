//! Whole-second request fields: any JSON integer is read (saturating at `i64`'s bounds) so
//! that the handler's range check gives the one documented error, 422, for every value
//! outside the range — negative, huge or merely too long. A fraction or a non-number is a
//! type error naming the field.

use serde::{Deserialize, Deserializer};

/// Reads a whole number of seconds.
pub(crate) fn whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(value) = number.as_i64() {
        return Ok(value);
    }
    if number.as_u64().is_some() {
        return Ok(i64::MAX);
    }
    match number.as_f64() {
        // `as` saturates, which is what an out-of-range check wants.
        Some(value) if value.fract() == 0.0 => Ok(value as i64),
        _ => Err(serde::de::Error::custom(format!(
            "expected a whole number of seconds, got {number}"
        ))),
    }
}

/// Reads an optional whole number of seconds.
pub(crate) fn whole_opt<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    struct Whole(#[serde(deserialize_with = "whole")] i64);
    Ok(Option::<Whole>::deserialize(deserializer)?.map(|w| w.0))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Body {
        #[serde(deserialize_with = "super::whole")]
        seconds: i64,
        #[serde(default, deserialize_with = "super::whole_opt")]
        lease: Option<i64>,
    }

    fn read(json: &str) -> Result<Body, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn integers_of_any_size_are_read_and_saturate() {
        let body = read(r#"{"seconds": -5, "lease": 99999999999999999999}"#).expect("reads");
        assert_eq!((body.seconds, body.lease), (-5, Some(i64::MAX)));
        assert_eq!(
            read(r#"{"seconds": -1e30}"#).expect("reads").seconds,
            i64::MIN
        );
        assert_eq!(
            read(r#"{"seconds": 3, "lease": null}"#)
                .expect("reads")
                .lease,
            None
        );
    }

    #[test]
    fn fractions_and_other_types_are_refused() {
        assert!(read(r#"{"seconds": 1.5}"#).is_err());
        assert!(read(r#"{"seconds": "5"}"#).is_err());
    }
}
