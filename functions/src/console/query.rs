//! Reading a page's filters from its query string: empty means "any", anything else must
//! parse, and a value that does not is refused naming its field.

use chrono::{DateTime, NaiveDateTime, Utc};
use uuid::Uuid;

use super::error::ConsoleError;

/// `?done=…`: the page after an action, saying it was done.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct DoneQuery {
    pub(crate) done: Option<String>,
}

/// A filter's text, `None` when absent or blank.
pub(crate) fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

pub(crate) fn id(field: &str, value: &Option<String>) -> Result<Option<Uuid>, ConsoleError> {
    given(value)
        .map(|text| {
            Uuid::parse_str(text)
                .map_err(|_| ConsoleError::BadInput(format!("{field}: {text:?} is not an id")))
        })
        .transpose()
}

/// One of a fixed set of names (`parse` is the type's own parser).
pub(crate) fn named<T>(
    field: &str,
    value: &Option<String>,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, ConsoleError> {
    given(value)
        .map(|text| {
            parse(text).ok_or_else(|| {
                ConsoleError::BadInput(format!("{field}: {text:?} is not one of the choices"))
            })
        })
        .transpose()
}

/// The zone a page shows its times in: `None` (each row on its branch's clock) when absent
/// or `branch`, else an IANA zone, refused naming the field when it is none.
pub(crate) fn zone(field: &str, value: &Option<String>) -> Result<Option<String>, ConsoleError> {
    match given(value) {
        None | Some("branch") => Ok(None),
        Some(text) => res_shared::schedule::Zone::parse(text)
            .map(|zone| Some(zone.name().to_owned()))
            .map_err(|_| {
                ConsoleError::BadInput(format!(
                    "{field}: {text:?} is not a time zone (an IANA name such as Asia/Riyadh, or branch)"
                ))
            }),
    }
}

/// A time from a `datetime-local` field (UTC, as the form says) or RFC 3339.
pub(crate) fn time(
    field: &str,
    value: &Option<String>,
) -> Result<Option<DateTime<Utc>>, ConsoleError> {
    given(value)
        .map(|text| {
            DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&Utc))
                .or_else(|_| {
                    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M")
                        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S"))
                        .map(|t| t.and_utc())
                })
                .map_err(|_| {
                    ConsoleError::BadInput(format!(
                        "{field}: {text:?} is not a time (YYYY-MM-DDTHH:MM, UTC)"
                    ))
                })
        })
        .transpose()
}

/// The query string of a page with these filters (blank ones left out), for links to the
/// next page and to the same filters elsewhere.
pub(crate) fn encode(pairs: &[(&str, Option<String>)]) -> String {
    let kept: Vec<(&str, &str)> = pairs
        .iter()
        .filter_map(|(name, value)| {
            value
                .as_deref()
                .filter(|v| !v.is_empty())
                .map(|v| (*name, v))
        })
        .collect();
    serde_urlencoded::to_string(kept).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_filters_mean_any_and_bad_ones_name_their_field() {
        assert_eq!(id("branch", &Some("  ".into())).ok(), Some(None));
        let refused = id("branch", &Some("17".into()))
            .err()
            .map(|e| e.to_string());
        assert_eq!(refused.as_deref(), Some("branch: \"17\" is not an id"));
        let since = time("since", &Some("2026-11-24T08:00".into()))
            .ok()
            .flatten();
        assert_eq!(
            since.map(|t| t.to_rfc3339()),
            Some("2026-11-24T08:00:00+00:00".into())
        );
        assert!(time("until", &Some("yesterday".into())).is_err());
        assert_eq!(
            encode(&[
                ("a", Some("x y".into())),
                ("b", None),
                ("c", Some(String::new()))
            ]),
            "a=x+y"
        );
    }
}
