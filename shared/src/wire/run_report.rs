//! A stored run's `result` and `metrics` read for people: the console's execution page and
//! `resctl executions show` say the same thing, in human units.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

/// One node record as the runner reports it, read leniently: a field the runner did not
/// send is a blank, not an error.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ReportedNode {
    #[serde(default)]
    pub node_id: String,
    #[serde(default)]
    pub node_type: String,
    #[serde(default)]
    pub action: Option<String>,
    #[serde(default)]
    pub visit: u32,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub duration_ms: Option<i64>,
    #[serde(default)]
    pub error: Option<String>,
}

impl ReportedNode {
    /// "detection", or "business · create_violation".
    pub fn kind(&self) -> String {
        match &self.action {
            Some(action) => format!("{} · {action}", self.node_type),
            None => self.node_type.clone(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ReportedRun {
    #[serde(default)]
    nodes: Vec<ReportedNode>,
    #[serde(default)]
    consolidation: Option<ReportedConsolidation>,
}

#[derive(Debug, Deserialize)]
struct ReportedConsolidation {
    #[serde(default)]
    expression: String,
    #[serde(default)]
    passed: bool,
}

/// The nodes of a stored result, in the order they ran (none when it has no such shape).
pub fn reported_nodes(result: Option<&Value>) -> Vec<ReportedNode> {
    reported(result).nodes
}

/// The consolidation decision in words: "passed: any(...)" / "did not pass: ...".
pub fn consolidation_in_words(result: Option<&Value>) -> Option<String> {
    reported(result).consolidation.map(|c| {
        let verdict = if c.passed { "passed" } else { "did not pass" };
        format!("{verdict}: {}", c.expression)
    })
}

fn reported(result: Option<&Value>) -> ReportedRun {
    result
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default()
}

/// A duration in milliseconds as people say it: "0.6 s", "2 min 5 s", "1 h 3 min".
pub fn duration_in_words(ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "-".to_owned();
    };
    let ms = ms.max(0);
    match ms {
        0..=59_999 => format!("{:.1} s", ms as f64 / 1_000.0),
        60_000..=3_599_999 => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1_000),
        _ => format!("{} h {} min", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// How far `at` is from `now`, to a tenth of a second while close: "2.1 s ago", "in 28.0 s"
/// (where `schedule::relative_time` would say "now" to both).
pub fn offset_in_words(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let ms = (at - now).num_milliseconds();
    if ms > 0 {
        format!("in {}", duration_in_words(Some(ms)))
    } else {
        format!("{} ago", duration_in_words(Some(-ms)))
    }
}

/// Each metric named in words with its value in human units, by its name's unit suffix:
/// `process_memory_max_bytes: 52428800` → ("process memory max", "50.0 MiB").
pub fn metrics_in_words(metrics: Option<&Value>) -> Vec<(String, String)> {
    let Some(Value::Object(fields)) = metrics else {
        return Vec::new();
    };
    fields
        .iter()
        .map(|(name, value)| {
            let number = value.as_f64();
            let (label, shown) = match (
                name.strip_suffix("_bytes"),
                name.strip_suffix("_percent"),
                name.strip_suffix("_ms"),
                number,
            ) {
                (Some(label), _, _, Some(n)) => (label, bytes_in_words(n)),
                (_, Some(label), _, Some(n)) => (label, format!("{n:.1} %")),
                (_, _, Some(label), Some(n)) => (label, duration_in_words(Some(n as i64))),
                _ => (name.as_str(), plain(value)),
            };
            (label.replace('_', " "), shown)
        })
        .collect()
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn bytes_in_words(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut size = bytes.max(0.0);
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{size:.0} B")
    } else {
        format!("{size:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_offset_is_told_to_a_tenth_of_a_second_either_way() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T08:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("a time");
        let ms = chrono::TimeDelta::milliseconds;
        assert_eq!(offset_in_words(now - ms(2_100), now), "2.1 s ago");
        assert_eq!(offset_in_words(now + ms(28_000), now), "in 28.0 s");
        assert_eq!(offset_in_words(now, now), "0.0 s ago");
        assert_eq!(offset_in_words(now - ms(125_000), now), "2 min 5 s ago");
    }

    #[test]
    fn metrics_read_in_human_units() {
        let metrics = json!({
            "samples": 3,
            "process_memory_max_bytes": 52_428_800,
            "host_cpu_mean_percent": 12.345,
            "host_memory_total_bytes": 8_589_934_592_u64,
            "note": "ok",
        });
        let words = metrics_in_words(Some(&metrics));
        for pair in [
            ("samples", "3"),
            ("process memory max", "50.0 MiB"),
            ("host cpu mean", "12.3 %"),
            ("host memory total", "8.0 GiB"),
            ("note", "ok"),
        ] {
            assert!(
                words.contains(&(pair.0.to_owned(), pair.1.to_owned())),
                "{pair:?} in {words:?}"
            );
        }
        assert!(metrics_in_words(Some(&json!([1, 2]))).is_empty());
        assert!(metrics_in_words(None).is_empty());
    }

    #[test]
    fn results_read_leniently() {
        let result = json!({
            "nodes": [
                {"node_id": "detect", "node_type": "detection", "visit": 1, "status": "completed", "duration_ms": 640},
                {"node_id": "violation", "node_type": "business", "action": "create_violation", "status": "failed", "error": "boom"}
            ],
            "consolidation": {"expression": "any(x)", "passed": true}
        });
        let nodes = reported_nodes(Some(&result));
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].kind(), "business · create_violation");
        assert_eq!(
            consolidation_in_words(Some(&result)).as_deref(),
            Some("passed: any(x)")
        );
        assert!(reported_nodes(Some(&json!("text"))).is_empty());
        assert_eq!(duration_in_words(Some(125_000)), "2 min 5 s");
    }
}
