//! The plan at 10,000 branch rules: merging a full server answer, writing the plan file,
//! and selecting ready rules (and the next wake-up) — what every scheduler cycle does.

use std::hint::black_box;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use res_runner::plan::file::{encode, write_atomic};
use res_runner::plan::merge::{MergeSettings, merge};
use res_runner::plan::{Plan, ready};
use res_shared::schedule::{DaySpec, HoursSpec, RuleStatus, TimingSpec};
use res_shared::wire::{
    ActionTemplate, Branch, Brand, ColumnarPlan, PlanEntry, PlanLookups, PlanResponse, PlanSecret,
    Rule, SecretValue,
};
use serde_json::json;
use serde_json::value::RawValue;
use uuid::Uuid;

const RULES: usize = 10_000;
const BRANCHES: usize = 100;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0)
        .single()
        .expect("valid")
}

/// 100 branches × 100 rules; `due` of them are due at `now`, the rest later today; every
/// third has an overnight window, every third a day window.
fn response(due: usize) -> PlanResponse {
    let config: Arc<RawValue> = Arc::from(
        RawValue::from_string(
            json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": Uuid::nil()}}, "edges": [], "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"})
                .to_string(),
        )
        .expect("raw"),
    );
    let branches: Vec<Uuid> = (0..BRANCHES).map(|_| Uuid::new_v4()).collect();
    let rules: Vec<Uuid> = (0..RULES / BRANCHES).map(|_| Uuid::new_v4()).collect();
    let mut lookups = PlanLookups::default();
    for id in &branches {
        lookups.branches.insert(
            *id,
            Branch {
                id: *id,
                brand_id: Uuid::nil(),
                name: "Branch".into(),
                is_active: true,
                timezone: None,
                hours: None,
            },
        );
    }
    for id in &rules {
        lookups.rules.insert(
            *id,
            Rule {
                id: *id,
                name: "Rule".into(),
                status: RuleStatus::Active,
                cron_expression: Some("*/30 * * * *".into()),
            },
        );
    }
    let workflows = (0..RULES)
        .map(|i| {
            let (from, to) = match i % 3 {
                0 => (None, None),
                1 => (Some("08:00"), Some("23:00")),
                _ => (Some("22:00"), Some("13:00")),
            };
            let next = if i < due { now() - TimeDelta::seconds(i as i64 % 50) } else { now() + TimeDelta::seconds(60 + i as i64) };
            let mut w: PlanEntry = serde_json::from_value(json!({
                "id": Uuid::new_v4(), "branch_id": branches[i % BRANCHES], "rule_id": rules[i / BRANCHES],
                "brand_rule_id": null, "is_active": true, "is_archived": false, "is_force_stopped": false,
                "is_currently_running": false, "next_run_time": next, "last_run_time": null,
                "operation_time_from": from.map(|t| format!("{t}:00")), "operation_time_to": to.map(|t| format!("{t}:00")),
                "cron_expression": "*/30 * * * *", "timezone": "Asia/Riyadh", "workflow_config": null,
                "run_count": 3, "failure_count": 0, "is_last_run_failed": false, "updated_at": now()
            }))
            .expect("workflow");
            w.workflow_config = Some(Arc::clone(&config));
            w
        })
        .collect();
    PlanResponse {
        generated_at: now(),
        cursor: "c1".into(),
        full: true,
        workflows,
        removed: vec![],
        wait_seconds: 0,
        offline_owners: Vec::new(),
        secrets: Vec::new(),
        lookups,
    }
}

/// [`response`] whose one template sends a header with a secret, and the secret with it:
/// every rule refers to it.
fn with_secrets(mut response: PlanResponse) -> PlanResponse {
    let template: ActionTemplate = serde_json::from_value(json!({
        "id": Uuid::nil(), "name": "Detector", "kind": "detection",
        "config": {"executor": "http", "url": "http://127.0.0.1:9/d",
                   "headers": {"Authorization": "Bearer ${secret:analytics-token}"}}
    }))
    .expect("template");
    response
        .lookups
        .action_templates
        .insert(template.id, template);
    response.secrets = vec![PlanSecret {
        brand_id: Uuid::nil(),
        name: "analytics-token".into(),
        version: 1,
        value: SecretValue("tok_bench_0123456789".into()),
        branch_ids: None,
    }];
    response
}

/// [`response`] with opening hours: each branch's split week naming two brand calendars
/// (60 dates between them, sent once with the brand), and every third rule running while
/// open; the rest as before.
fn with_hours(mut response: PlanResponse) -> PlanResponse {
    let first = chrono::NaiveDate::from_ymd_opt(2026, 3, 1).expect("a date");
    let day = |i: u64, hours: Vec<String>| DaySpec {
        date: first + chrono::Days::new(i * 6),
        until: None,
        name: Some(format!("Holiday {i}")),
        calendar: None,
        hours,
    };
    let calendars: std::collections::BTreeMap<String, Vec<DaySpec>> = [
        (
            "holidays".to_owned(),
            (0..40).map(|i| day(i, Vec::new())).collect(),
        ),
        (
            "season".to_owned(),
            (40..60)
                .map(|i| day(i, vec!["10:00-14:00".into()]))
                .collect(),
        ),
    ]
    .into_iter()
    .collect();
    response.lookups.brands.insert(
        Uuid::nil(),
        Brand {
            id: Uuid::nil(),
            name: "Brand".into(),
            timezone: "Asia/Riyadh".into(),
            calendars,
        },
    );
    let hours: HoursSpec = serde_json::from_value(json!({
        "week": {"sat-thu": ["09:00-12:00", "16:00-23:00"], "fri": ["16:00-23:30"]},
        "calendars": ["holidays", "season"]
    }))
    .expect("hours");
    for branch in response.lookups.branches.values_mut() {
        branch.hours = Some(hours.clone());
    }
    let open: TimingSpec =
        serde_json::from_value(json!({"while_open": {"before_seconds": 1800}})).expect("timing");
    for (i, entry) in response.workflows.iter_mut().enumerate() {
        if i % 3 == 0 {
            entry.timing = Some(open.clone());
        }
    }
    response
}

/// The body the functions send in `format`, as they encode it.
fn body_bytes(response: &PlanResponse) -> usize {
    let columns = ColumnarPlan::new(response).expect("every definition is in the plan");
    serde_json::to_vec(&columns).expect("encodes").len()
}

fn settings(first: bool) -> MergeSettings {
    MergeSettings {
        refresh_interval: TimeDelta::seconds(20),
        max_age: TimeDelta::hours(24),
        first,
    }
}

fn plan_of(response: PlanResponse) -> Plan {
    let mut plan = Plan::default();
    merge(&mut plan, response, now(), settings(true));
    plan
}

/// Merging `answer` into a copy of `existing`, 30 s after it was fetched.
fn bench_merge(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    existing: &Plan,
    answer: &PlanResponse,
) {
    group.bench_function(name, |b| {
        b.iter_batched(
            || (existing.clone(), answer.clone()),
            |(mut plan, answer)| {
                merge(
                    &mut plan,
                    answer,
                    now() + TimeDelta::seconds(30),
                    settings(false),
                )
            },
            BatchSize::LargeInput,
        )
    });
}

fn bench(c: &mut Criterion) {
    let full = response(100);
    let existing = plan_of(full.clone());
    let mut group = c.benchmark_group("plan-10k");
    group.sample_size(20);
    bench_merge(&mut group, "merge-full", &existing, &full);
    let secret_full = with_secrets(full.clone());
    let secret_existing = plan_of(secret_full.clone());
    bench_merge(
        &mut group,
        "merge-full-with-secrets",
        &secret_existing,
        &secret_full,
    );
    let hours_full = with_hours(full.clone());
    let hours_existing = plan_of(hours_full.clone());
    bench_merge(
        &mut group,
        "merge-full-with-hours",
        &hours_existing,
        &hours_full,
    );
    // The same plan with its brand (a real one always carries it) but no hours.
    let mut plain_full = hours_full.clone();
    for branch in plain_full.lookups.branches.values_mut() {
        branch.hours = None;
    }
    for brand in plain_full.lookups.brands.values_mut() {
        brand.calendars.clear();
    }
    for entry in &mut plain_full.workflows {
        entry.timing = None;
    }
    let (plain, hours) = (body_bytes(&plain_full), body_bytes(&hours_full));
    eprintln!(
        "plan body, format 4: {plain} bytes without hours, {hours} with ({:+.2} %)",
        (hours as f64 / plain as f64 - 1.0) * 100.0
    );
    let dir = std::env::temp_dir().join(format!("res-bench-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("plan.json");
    let bytes = encode(&existing, now()).expect("encodes").len();
    eprintln!("plan file: {bytes} bytes for {RULES} rules");
    group.bench_function("write", |b| {
        b.iter(|| {
            let encoded = encode(black_box(&existing), now()).expect("encodes");
            write_atomic(&path, &encoded).expect("writes");
        })
    });
    let nothing = |_: Uuid| false;
    group.bench_function("ready-100-due", |b| {
        b.iter(|| ready::ready(black_box(&existing), now(), 10, &nothing))
    });
    let all_due = plan_of(response(RULES));
    group.bench_function("ready-all-due", |b| {
        b.iter(|| ready::ready(black_box(&all_due), now(), 10, &nothing))
    });
    group.bench_function("next-wake", |b| {
        b.iter(|| ready::next_wake(black_box(&existing), now()))
    });
    group.bench_function("ready-100-due-with-hours", |b| {
        b.iter(|| ready::ready(black_box(&hours_existing), now(), 10, &nothing))
    });
    group.bench_function("next-wake-with-hours", |b| {
        b.iter(|| ready::next_wake(black_box(&hours_existing), now()))
    });
    group.finish();
    std::fs::remove_dir_all(&dir).ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
