//! The shipped Prometheus alert rules and Grafana dashboard (infra/observability): valid
//! and unit-tested by `promtool` (Debian's `prometheus` package), and naming only metrics
//! the functions and the runner declare.

use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/observability")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The metric names after `prefix` in `text`, without a counter's or histogram's series
/// suffix (`_total`, `_bucket`, `_sum`, `_count`).
fn metric_names(text: &str, prefix: &str) -> Vec<String> {
    text.match_indices(prefix)
        .map(|(at, _)| {
            let rest = &text[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            ["_total", "_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name)
                .to_owned()
        })
        .collect()
}

#[test]
fn every_metric_the_alerts_and_the_dashboard_name_is_declared_in_the_code() {
    let sources = [
        ("res_functions_", res_functions::metrics::Metrics::NAMES),
        ("res_runner_", res_runner::daemon::METRIC_NAMES),
    ];
    for file in ["alerts.yml", "alerts_test.yml", "grafana-res.json"] {
        let text = read(file);
        let mut named = 0;
        for (prefix, declared) in sources {
            for name in metric_names(&text, prefix) {
                named += 1;
                assert!(
                    declared.contains(&name.as_str()),
                    "{file} names {prefix}{name}, which is not declared in the code"
                );
            }
        }
        assert!(named >= 10, "{file} names only {named} metrics");
    }
    // The scanner itself: suffixes go, names stay whole.
    assert_eq!(
        metric_names(
            "rate(res_runner_executions_total[5m]) res_functions_request_duration_seconds_bucket{",
            "res_"
        ),
        ["runner_executions", "functions_request_duration_seconds"]
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("grafana-res.json")).expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() > 10));
}

/// `promtool`, which the README lists for the tests (installed when missing where it may be).
fn promtool(args: &[&str]) -> String {
    if let Err(message) = res_setup::require(
        &[res_setup::Tool::Promtool],
        "checking the shipped alert rules",
    ) {
        panic!("{message}");
    }
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): install Debian's `prometheus` package (see the README's requirements)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let checked = promtool(&["check", "rules", "alerts.yml"]);
    assert!(checked.contains("SUCCESS: 15 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "alerts_test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    // Every alert has a unit test.
    let rules = read("alerts.yml");
    let tests = read("alerts_test.yml");
    for alert in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "{alert} has no unit test in alerts_test.yml"
        );
    }
}
