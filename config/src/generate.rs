//! Documents of any size, for benchmarks and round-trip tests: a catalogue of `rules`
//! rules over two templates, and a brand running every one of them at each of `branches`
//! branches, with a window and an action detail each.

use std::fmt::Write;

/// A catalogue of `rules` rules (`Rule 0` …), every one detect → violation.
pub fn catalogue_text(rules: usize) -> String {
    let mut text = String::from(
        "catalogue:\n  action_templates:\n    - name: Detector\n      kind: detection\n      config: {executor: http, url: \"http://127.0.0.1:9/d\"}\n    - name: Violation\n      kind: business\n  rules:\n",
    );
    for r in 0..rules {
        let _ = write!(
            text,
            "    - name: Rule {r}\n      schedule: \"*/{} * * * *\"\n      workflow:\n        start_node: detect\n        nodes:\n          detect: {{type: detection, template: Detector}}\n          violation: {{type: business, action: create_violation, template: Violation}}\n        edges:\n          - {{from: detect, to: violation, condition: \"violations > 0\"}}\n",
            5 + r % 10
        );
    }
    text
}

/// A brand in `zone` running the catalogue's `rules` rules at `branches` branches.
pub fn brand_text(name: &str, zone: &str, branches: usize, rules: usize) -> String {
    let mut text = format!("brand:\n  name: {name}\n  zone: {zone}\n  rules:\n");
    for r in 0..rules {
        let _ = writeln!(text, "    Rule {r}: {{jitter_seconds: 60}}");
    }
    text.push_str("  branches:\n");
    for b in 0..branches {
        let _ = write!(text, "    - name: Branch {b}\n      rules:\n");
        for r in 0..rules {
            let _ = writeln!(
                text,
                "        Rule {r}: {{window: {{from: \"08:00\", to: \"22:00\"}}, actions: {{Detector: {{camera_ids: [cam-{b}-1, cam-{b}-2]}}}}}}"
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{diff, parse, to_yaml, validate};

    #[test]
    fn generated_documents_validate_and_survive_the_round_trip() {
        let catalogue = parse(&catalogue_text(5)).expect("catalogue").catalogue;
        for (branches, rules) in [(1, 1), (3, 5), (40, 5)] {
            let brand = parse(&brand_text("Fleet", "Asia/Riyadh", branches, rules)).expect("brand");
            let report = validate(&brand, catalogue.as_ref());
            assert!(report.is_valid(), "{:?}", report.errors);
            let written = to_yaml(&brand, "generated").expect("writes");
            assert_eq!(parse(&written).expect("reads back"), brand);
            let now = chrono::Utc::now();
            assert!(
                diff(&brand, &brand, catalogue.as_ref(), now, false)
                    .changes
                    .is_empty()
            );
        }
    }
}
