//! A brand of 2,000 branches × 20 rules (40,000 branch rules) over a 20-rule catalogue:
//! parse, validate and diff, the pure part of `config_apply` (docs/benchmarks.md).

use std::fmt::Write;

use criterion::{Criterion, criterion_group, criterion_main};
use res_config::{Document, diff, parse, validate};

const BRANCHES: usize = 2_000;
const RULES: usize = 20;

fn catalogue() -> String {
    let mut text = String::from(
        "catalogue:\n  action_templates:\n    - name: Detector\n      kind: detection\n      config: {executor: http, url: \"http://127.0.0.1:9/d\"}\n    - name: Violation\n      kind: business\n  rules:\n",
    );
    for r in 0..RULES {
        let _ = write!(
            text,
            "    - name: Rule {r}\n      schedule: \"*/{} * * * *\"\n      workflow:\n        start_node: detect\n        nodes:\n          detect: {{type: detection, template: Detector}}\n          violation: {{type: business, action: create_violation, template: Violation}}\n        edges:\n          - {{from: detect, to: violation, condition: \"violations > 0\"}}\n",
            5 + r % 10
        );
    }
    text
}

fn brand(zone: &str) -> String {
    let mut text = format!("brand:\n  name: Fleet\n  zone: {zone}\n  rules:\n");
    for r in 0..RULES {
        let _ = writeln!(text, "    Rule {r}: {{jitter_seconds: 60}}");
    }
    text.push_str("  branches:\n");
    for b in 0..BRANCHES {
        let _ = write!(text, "    - name: Branch {b}\n      rules:\n");
        for r in 0..RULES {
            let _ = writeln!(
                text,
                "        Rule {r}: {{window: {{from: \"08:00\", to: \"22:00\"}}, actions: {{Detector: {{camera_ids: [cam-{b}-1, cam-{b}-2]}}}}}}"
            );
        }
    }
    text
}

fn documents(c: &mut Criterion) {
    let catalogue_text = catalogue();
    let text = brand("Asia/Riyadh");
    eprintln!("brand document: {} bytes", text.len());
    let stored = parse(&catalogue_text)
        .expect("catalogue")
        .catalogue
        .expect("a catalogue");
    let before: Document = parse(&text).expect("brand");
    let one_window = parse(&text.replacen("from: \"08:00\"", "from: \"09:00\"", 1)).expect("edit");
    let every_rule = parse(&brand("Asia/Dubai")).expect("zone");
    let now = chrono::Utc::now();
    let report = validate(&before, Some(&stored));
    assert!(
        report.is_valid(),
        "{:?}",
        &report.errors[..report.errors.len().min(3)]
    );
    assert_eq!(
        diff(&before, &one_window, Some(&stored), now, false)
            .changes
            .len(),
        1
    );
    assert_eq!(
        diff(&before, &every_rule, Some(&stored), now, false)
            .changes
            .len(),
        1 + BRANCHES * RULES
    );

    let mut group = c.benchmark_group("brand of 40,000 branch rules");
    group.sample_size(10);
    group.bench_function("parse", |b| b.iter(|| parse(&text).expect("parses")));
    group.bench_function("validate", |b| b.iter(|| validate(&before, Some(&stored))));
    group.bench_function("diff, one window moved", |b| {
        b.iter(|| diff(&before, &one_window, Some(&stored), now, false))
    });
    group.bench_function("diff, every rule moved (zone)", |b| {
        b.iter(|| diff(&before, &every_rule, Some(&stored), now, false))
    });
    group.finish();
}

criterion_group!(benches, documents);
criterion_main!(benches);
