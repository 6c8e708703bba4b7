//! The consolidation example over 100 detection results.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use res_expr::{Expression, Limits, Scope, Value as PyValue};
use serde_json::{Value, json};

fn consolidation(c: &mut Criterion) {
    let expression =
        Expression::compile("any(d['violations'] > 0 for d in aggregated_actions_details)")
            .expect("compiles");
    // None has violations, so every result is inspected (the slowest case).
    let results: Vec<Value> = (0..100)
        .map(|i| json!({"feature_result": "detection_complete", "is_success": true, "people": i % 9, "violations": 0, "camera_id": format!("cam-{i}")}))
        .collect();
    c.bench_function("expr/consolidation-100", |b| {
        b.iter(|| {
            let mut scope = Scope::new();
            scope.set(
                "aggregated_actions_details",
                PyValue::JsonArray(black_box(&results)),
            );
            expression.is_true(&scope, Limits::default())
        })
    });
}

criterion_group!(benches, consolidation);
criterion_main!(benches);
