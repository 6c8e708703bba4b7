//! `http` detection: the job POSTed to a detector service on the site host.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use url::Url;

/// A template config for `http`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Always `http` (it is how this executor was chosen).
    pub executor: String,
    /// The detector's endpoint.
    pub url: String,
    /// Longest wait for the reply (default 60 s); the deadline may cut it shorter.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Extra request headers (e.g. an API key of the detector service).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Passed to the detector in `action.parameters`.
    #[serde(default)]
    pub parameters: Value,
}

fn default_timeout() -> u64 {
    60
}

impl HttpConfig {
    /// Every problem with an `http` template config.
    pub fn problems(config: &Value) -> Vec<String> {
        super::problems_of(config, |parsed: &HttpConfig| {
            let mut problems = Vec::new();
            if let Err(problem) = endpoint(&parsed.url) {
                problems.push(problem);
            }
            if parsed.timeout_seconds == 0 {
                problems.push("timeout_seconds: must be at least 1".into());
            }
            problems.extend(header_problems(&parsed.headers));
            problems
        })
    }
}

/// An http(s) URL, or the problem with it (naming the field `url`).
pub fn endpoint(url: &str) -> Result<Url, String> {
    match Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(parsed),
        Ok(_) => Err(format!("url: '{url}' is not an http(s) URL")),
        Err(error) => Err(format!("url: '{url}' is not a URL ({error})")),
    }
}

/// Header names that HTTP would refuse.
pub(super) fn header_problems(headers: &BTreeMap<String, String>) -> Vec<String> {
    headers
        .keys()
        .filter(|name| http::HeaderName::from_bytes(name.as_bytes()).is_err())
        .map(|name| format!("headers: '{name}' is not a valid header name"))
        .collect()
}
