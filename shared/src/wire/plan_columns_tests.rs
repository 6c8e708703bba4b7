use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::wire::SharedPlan;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.into()).expect("JSON")
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// Two branches (one with its own zone), two rules (one without an expression), a brand
/// rule that overrides the expression, a template, and three entries: one at every default,
/// one with every field away from it (a window ending at 24:00 included), one bare.
fn plan() -> PlanResponse {
    let brand = Brand {
        id: id(1),
        name: "Brand".into(),
        timezone: "Asia/Riyadh".into(),
        calendars: Default::default(),
    };
    let branch = |n, timezone: Option<&str>| Branch {
        id: id(n),
        brand_id: brand.id,
        name: format!("Branch {n}"),
        is_active: true,
        timezone: timezone.map(str::to_owned),
        hours: None,
    };
    let rule = |n, cron: Option<&str>| Rule {
        id: id(n),
        name: format!("Rule {n}"),
        status: crate::schedule::RuleStatus::Active,
        cron_expression: cron.map(str::to_owned),
    };
    let brand_rule = BrandRule {
        id: id(30),
        brand_id: brand.id,
        rule_id: id(20),
        cron_expression: Some("0 * * * *".into()),
        settings: raw(r#"{"threshold": 3}"#),
    };
    let template = ActionTemplate {
        id: id(40),
        name: "Queue".into(),
        kind: "detection".into(),
        config: raw(r#"{"executor": "http"}"#),
    };
    let workflow: Arc<RawValue> = Arc::from(raw(r#"{"start_node": "detect"}"#));
    let entry = |n, branch: Uuid, rule: Uuid, cron: Option<&str>, zone: &str| -> PlanEntry {
        serde_json::from_value(json!({
            "id": id(n), "branch_id": branch, "rule_id": rule, "brand_rule_id": null,
            "is_active": true, "cron_expression": cron, "timezone": zone,
            "next_run_time": "2026-03-02T11:30:00Z", "updated_at": "2026-03-02T11:00:00.123456Z",
        }))
        .expect("an entry")
    };
    let mut plain = entry(100, id(10), id(20), Some("*/30 * * * *"), "Asia/Riyadh");
    plain.workflow_config = Some(workflow.clone());
    let mut busy = entry(101, id(11), id(20), Some("0 * * * *"), "Europe/Paris");
    busy.workflow_config = Some(workflow);
    busy.brand_rule_id = Some(brand_rule.id);
    busy.is_active = false;
    busy.is_archived = true;
    busy.is_force_stopped = true;
    busy.is_paused = true;
    busy.run_requested_at = Some("2026-03-02T11:01:00Z".parse().expect("time"));
    busy.is_currently_running = true;
    busy.resume_at = Some("2026-03-02T11:02:00Z".parse().expect("time"));
    busy.last_run_time = Some("2026-03-02T10:30:00.25Z".parse().expect("time"));
    busy.operation_time_from = NaiveTime::from_hms_opt(8, 0, 0);
    busy.operation_time_to = crate::schedule::read_stored_time("24:00:00");
    busy.jitter_seconds = 45;
    busy.overlap_policy = OverlapPolicy::BufferOne;
    busy.run_count = 7;
    busy.failure_count = 2;
    busy.is_last_run_failed = true;
    busy.revision = Some(12);
    let mut bare = entry(102, id(10), id(21), None, "Asia/Riyadh");
    bare.next_run_time = None;
    let template_id = template.id;
    let detail = |n, branch_rule| ActionDetail {
        id: id(n),
        branch_rule_id: branch_rule,
        action_template_id: template_id,
        config: raw(&format!(r#"{{"camera": "cam-{n}"}}"#)),
    };
    let mut lookups = PlanLookups::default();
    lookups.brands.insert(brand.id, brand.clone());
    for b in [branch(10, None), branch(11, Some("Europe/Paris"))] {
        lookups.branches.insert(b.id, b);
    }
    for r in [rule(20, Some("*/30 * * * *")), rule(21, None)] {
        lookups.rules.insert(r.id, r);
    }
    lookups.brand_rules.insert(brand_rule.id, brand_rule);
    lookups.action_templates.insert(template.id, template);
    // The last one configures a branch rule the plan has no entry for.
    for d in [
        detail(50, id(100)),
        detail(51, id(101)),
        detail(52, id(999)),
    ] {
        lookups.action_details.insert(d.id, d);
    }
    PlanResponse {
        generated_at: "2026-03-02T11:00:00Z".parse().expect("time"),
        cursor: "c".into(),
        full: true,
        workflows: vec![plain, busy, bare],
        removed: vec![id(7)],
        wait_seconds: 240,
        offline_owners: Vec::new(),
        secrets: Vec::new(),
        lookups,
    }
}

fn columns(plan: &PlanResponse) -> String {
    serde_json::to_string(&ColumnarPlan::new(plan).expect("every reference resolves"))
        .expect("encodes")
}

fn as_json(plan: &PlanResponse) -> serde_json::Value {
    serde_json::to_value(plan).expect("JSON")
}

#[test]
fn format_3_reads_back_into_the_same_plan_smaller_than_format_2() {
    let plan = plan();
    let text = columns(&plan);
    let back: PlanResponse = serde_json::from_str(&text).expect("decodes");
    assert_eq!(as_json(&back), as_json(&plan), "{text}");
    let wire: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(wire["format"], 3);
    let entries = &wire["tables"]["entries"];
    for derived in ["cron_expression", "timezone"] {
        assert!(
            entries.get(derived).is_none(),
            "{derived} is left to the lookups: {text}"
        );
    }
    assert_eq!(entries["flags"], json!([0, 63, 0]));
    assert_eq!(
        wire["tables"]["other_branch_rules"],
        json!([id(999)]),
        "a detail of no entry keeps its branch rule"
    );
    assert_eq!(text.matches("start_node").count(), 1, "each workflow once");
    let shared = serde_json::to_string(&SharedPlan(&plan)).expect("encodes");
    assert!(
        text.len() < shared.len(),
        "{} < {}",
        text.len(),
        shared.len()
    );
}

#[test]
fn an_entry_the_definitions_do_not_explain_sends_the_whole_column() {
    let mut plan = plan();
    plan.workflows[0].cron_expression = Some("*/5 * * * *".into());
    plan.workflows[2].timezone = "UTC".into();
    let text = columns(&plan);
    let wire: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        wire["tables"]["entries"]["cron_expression"],
        json!(["*/5 * * * *", "0 * * * *", null])
    );
    assert_eq!(
        wire["tables"]["entries"]["timezone"],
        json!(["Asia/Riyadh", "Europe/Paris", "UTC"])
    );
    let back: PlanResponse = serde_json::from_str(&text).expect("decodes");
    assert_eq!(as_json(&back), as_json(&plan));
}

#[test]
fn an_entry_whose_definitions_are_missing_is_not_written_as_columns() {
    let mut plan = plan();
    plan.lookups.branches.remove(&id(11));
    assert!(ColumnarPlan::new(&plan).is_none());
    let mut plan = self::plan();
    plan.lookups.action_templates.clear();
    assert!(ColumnarPlan::new(&plan).is_none());
}

#[test]
fn an_empty_plan_and_a_delta_read_back() {
    let mut plan = plan();
    plan.workflows.clear();
    plan.lookups = PlanLookups::default();
    plan.full = false;
    let back: PlanResponse = serde_json::from_str(&columns(&plan)).expect("decodes");
    assert_eq!(as_json(&back), as_json(&plan));
}

/// The plan's format 3 text with `value` put at `key` of what `parent` points to, read back.
fn read_edited(parent: &str, key: &str, value: serde_json::Value) -> Result<PlanResponse, String> {
    let mut wire: serde_json::Value = serde_json::from_str(&columns(&plan())).expect("JSON");
    match wire.pointer_mut(parent).expect("a place in the plan") {
        serde_json::Value::Array(items) => items[key.parse::<usize>().expect("an index")] = value,
        serde_json::Value::Object(fields) => {
            fields.insert(key.into(), value);
        }
        other => panic!("{parent} is {other}"),
    }
    serde_json::from_str(&wire.to_string()).map_err(|e| e.to_string())
}

#[test]
fn a_broken_table_is_refused_naming_what_does_not_hold() {
    let entries = "/tables/entries";
    for (expected, parent, key, value) in [
        (
            "plan column `next_run_time` has 2 values for 3 rows",
            entries,
            "next_run_time",
            json!([1, 2]),
        ),
        (
            "plan refers to branch 9, which it does not carry",
            "/tables/entries/branch",
            "1",
            json!(9),
        ),
        (
            "plan refers to branch rule 7, which it does not carry",
            "/tables/action_details/branch_rule",
            "0",
            json!(7),
        ),
        (
            "plan column `updated_at` holds 9223372036854775807, not an instant",
            "/tables/entries/updated_at",
            "0",
            json!(i64::MAX),
        ),
        ("unknown field `colour`", entries, "colour", json!([])),
        (
            "a plan has `workflows` or `tables`, not both",
            "",
            "workflows",
            json!([]),
        ),
    ] {
        let error = read_edited(parent, key, value).expect_err(expected);
        assert!(error.contains(expected), "{error} (expected {expected})");
    }
}

#[test]
fn format_4_sends_each_timing_and_calendar_once_and_reads_back_into_the_same_plan() {
    let mut plan = plan();
    let timing: crate::schedule::TimingSpec =
        serde_json::from_value(json!({"while_open": {"before_seconds": 1800}})).expect("timing");
    for entry in plan.workflows.iter_mut().take(2) {
        entry.timing = Some(timing.clone());
    }
    let hours: crate::schedule::HoursSpec = serde_json::from_value(json!({
        "week": {"sat-thu": ["09:00-12:00", "16:00-23:00"]}, "calendars": ["holidays"]
    }))
    .expect("hours");
    for branch in plan.lookups.branches.values_mut() {
        branch.hours = Some(hours.clone());
    }
    for brand in plan.lookups.brands.values_mut() {
        brand.calendars = serde_json::from_value(
            json!({"holidays": [{"date": "2026-09-23", "name": "National Day"}]}),
        )
        .expect("calendars");
    }
    let text = columns(&plan);
    let back: PlanResponse = serde_json::from_str(&text).expect("decodes");
    assert_eq!(as_json(&back), as_json(&plan), "{text}");
    let wire: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(wire["format"], 4);
    assert_eq!(wire["tables"]["timings"].as_array().map(Vec::len), Some(1));
    assert_eq!(wire["tables"]["entries"]["timing"], json!([1, 1, 0]));
    assert_eq!(text.matches("National Day").count(), 1, "the calendar once");
    // A timing position the plan does not carry is refused, naming it.
    let broken = text.replace("\"timing\":[1,1,0]", "\"timing\":[1,2,0]");
    let error = serde_json::from_str::<PlanResponse>(&broken).expect_err("refused");
    assert!(error.to_string().contains("timing 1"), "{error}");
}
