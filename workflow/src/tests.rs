//! Loading the contract's example and every kind of problem.

use res_shared::wire::ActionTemplate;
use serde_json::json;

use super::*;

const DETECT: &str = "00000000-0000-0000-0000-000000000001";
const VIOLATION: &str = "00000000-0000-0000-0000-000000000002";
const ALERT: &str = "00000000-0000-0000-0000-000000000003";

fn templates() -> BTreeMap<Uuid, ActionTemplate> {
    [
        (
            DETECT,
            "detection",
            json!({"executor": "http", "url": "http://127.0.0.1:9/detect"}),
        ),
        (VIOLATION, "business", json!({"kind": "queue_too_long"})),
        (ALERT, "business", json!({"url": "http://127.0.0.1:9/hook"})),
    ]
    .into_iter()
    .map(|(id, kind, config)| {
        let template: ActionTemplate = serde_json::from_value(json!({
            "id": id, "name": format!("{kind} {id}"), "kind": kind, "config": config,
        }))
        .expect("a template");
        (template.id, template)
    })
    .collect()
}

fn example() -> Value {
    json!({
        "start_node": "detect",
        "nodes": {
            "detect":    {"type": "detection", "action_template_id": DETECT},
            "cooldown":  {"type": "delay", "seconds": 600},
            "violation": {"type": "business", "action": "create_violation", "action_template_id": VIOLATION},
            "alert":     {"type": "business", "action": "notify", "action_template_id": ALERT}
        },
        "edges": [
            {"from": "detect", "to": "violation", "condition": "feature_result == 'detection_complete'"},
            {"from": "violation", "to": "alert", "condition": "is_success"}
        ],
        "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
    })
}

fn load(config: &Value) -> Result<Workflow, ConfigErrors> {
    Workflow::check(config, &templates(), &StandardActions)
}

fn problems(config: &Value) -> Vec<(String, String)> {
    load(config)
        .expect_err("the config is invalid")
        .0
        .into_iter()
        .map(|p| (p.path, p.message))
        .collect()
}

#[test]
fn the_contract_example_loads() {
    let workflow = load(&example()).expect("valid");
    assert_eq!(workflow.start, "detect");
    assert_eq!(workflow.nodes.len(), 4);
    assert!(matches!(&workflow.nodes["detect"], Node::Detection(a) if a.executor == "http"));
    assert!(matches!(&workflow.nodes["alert"], Node::Business(a) if a.executor == "notify"));
    assert!(matches!(
        workflow.nodes["cooldown"],
        Node::Delay { seconds: 600 }
    ));
    let out: Vec<&str> = workflow.outgoing("detect").map(|e| e.to.as_str()).collect();
    assert_eq!(out, ["violation"]);
    assert!(workflow.consolidation.is_some());
}

#[test]
fn every_problem_is_reported_at_once_with_its_path() {
    let mut config = example();
    config["start_node"] = json!("nowhere");
    config["edges"][0]["to"] = json!("ghost");
    config["edges"][1]["condition"] = json!("is_success and");
    config["nodes"]["alert"]["action"] = json!("fax");
    config["consolidation_logic"] = json!("__import__('os')");
    let found = problems(&config);
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "$.nodes.alert.action",
            "$.start_node",
            "$.edges[0].to",
            "$.edges[1].condition",
            "$.consolidation_logic"
        ],
        "{found:?}"
    );
    assert!(
        found[0]
            .1
            .contains("unknown business action 'fax' (create_violation, notify)")
    );
    assert!(found[1].1.contains("unknown node 'nowhere'"));
    assert!(found[2].1.contains("unknown node 'ghost'"));
    assert!(
        found[3].1.contains("invalid Python expression"),
        "{}",
        found[3].1
    );
    assert!(found[4].1.contains("not allowed"), "{}", found[4].1);
    let message = load(&config).expect_err("invalid").to_string();
    assert!(
        message.starts_with("invalid workflow config: $.nodes.alert.action: "),
        "{message}"
    );
}

#[test]
fn a_loop_needs_a_delay_node() {
    let mut config = example();
    config["edges"]
        .as_array_mut()
        .expect("edges")
        .push(json!({"from": "alert", "to": "detect"}));
    let found = problems(&config);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "$.edges");
    assert!(
        found[0].1.contains("detect → violation → alert → detect"),
        "{}",
        found[0].1
    );

    let edges = config["edges"].as_array_mut().expect("edges");
    edges.pop();
    edges.push(json!({"from": "alert", "to": "cooldown"}));
    edges.push(json!({"from": "cooldown", "to": "detect"}));
    assert!(load(&config).is_ok());
}

#[test]
fn templates_must_exist_match_the_node_and_configure_their_executor() {
    let mut config = example();
    config["nodes"]["detect"]["action_template_id"] = json!(VIOLATION);
    config["nodes"]["violation"]["action_template_id"] = json!("not-a-uuid");
    config["nodes"]["alert"]["action_template_id"] = json!("00000000-0000-0000-0000-0000000000ff");
    config["nodes"]["cooldown"]["seconds"] = json!(-5);
    let found = problems(&config);
    let text = format!("{found:?}");
    assert!(
        text.contains("is a business template, not detection"),
        "{text}"
    );
    assert!(text.contains("'not-a-uuid' is not a UUID"), "{text}");
    assert!(text.contains("is not in the plan"), "{text}");
    assert!(text.contains("$.nodes.cooldown.seconds"), "{text}");

    let mut templates = templates();
    let broken: ActionTemplate = serde_json::from_value(json!({
        "id": DETECT, "name": "Queue", "kind": "detection",
        "config": {"executor": "http", "timeout_seconds": "soon"},
    }))
    .expect("template");
    templates.insert(broken.id, broken);
    let found = Workflow::check(&example(), &templates, &StandardActions)
        .expect_err("the detector config is incomplete")
        .0;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].path,
        "$.nodes.detect.action_template_id (template 'Queue').config"
    );
    assert!(
        found[0].message.starts_with("timeout_seconds: "),
        "{}",
        found[0].message
    );
}

#[test]
fn shape_errors_are_problems_not_panics() {
    for config in [
        json!(null),
        json!([]),
        json!("x"),
        json!({"nodes": 3}),
        json!({"nodes": {}}),
    ] {
        assert!(!problems(&config).is_empty(), "{config}");
    }
    let mut config = example();
    config["nodes"]["detect"] = json!("detection");
    config["edges"] = json!({"from": "detect"});
    config["max_runtime_seconds"] = json!(0);
    let found = problems(&config);
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"$.nodes.detect"), "{paths:?}");
    assert!(paths.contains(&"$.edges"), "{paths:?}");
    assert!(paths.contains(&"$.max_runtime_seconds"), "{paths:?}");
}
