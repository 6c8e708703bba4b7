//! A brand of 2,000 branches × 20 rules (40,000 branch rules) over a 20-rule catalogue:
//! parse, validate and diff, the pure part of `config_apply` (docs/benchmarks.md).

use criterion::{Criterion, criterion_group, criterion_main};
use res_config::generate::{brand_text, catalogue_text};
use res_config::{Document, diff, parse, validate};

const BRANCHES: usize = 2_000;
const RULES: usize = 20;

fn documents(c: &mut Criterion) {
    let catalogue_text = catalogue_text(RULES);
    let text = brand_text("Fleet", "Asia/Riyadh", BRANCHES, RULES);
    eprintln!("brand document: {} bytes", text.len());
    let stored = parse(&catalogue_text)
        .expect("catalogue")
        .catalogue
        .expect("a catalogue");
    let before: Document = parse(&text).expect("brand");
    let one_window = parse(&text.replacen("from: \"08:00\"", "from: \"09:00\"", 1)).expect("edit");
    let every_rule = parse(&brand_text("Fleet", "Asia/Dubai", BRANCHES, RULES)).expect("zone");
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
