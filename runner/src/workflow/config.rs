//! Workflow configs (`action_template_connections.workflow_config`): loaded once, checked
//! completely, every problem reported with its JSON path.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use res_shared::wire::{ActionTemplate, MAX_PAUSE_SECONDS};
use serde_json::Value;
use uuid::Uuid;

use super::executors::{ActionKind, Executor, Executors};
use res_expr::Expression;

/// A checked workflow, ready to run many times.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// Where execution starts.
    pub start: String,
    /// Nodes by id.
    pub nodes: BTreeMap<String, Node>,
    /// Edges in config order (outgoing edges are followed in this order).
    pub edges: Vec<Edge>,
    /// Decides, when execution first reaches a business node, whether business runs.
    pub consolidation: Option<Expression>,
    /// Runs longer than this end with status `timeout`.
    pub max_runtime_seconds: Option<u64>,
}

/// What a node does.
#[derive(Debug, Clone)]
pub enum Node {
    /// Analyse the branch's cameras with the template's executor.
    Detection(Action),
    /// Turn results into a violation or a notification.
    Business(Action),
    /// Wait.
    Delay {
        /// How long.
        seconds: u32,
    },
}

impl Node {
    /// `detection`, `business` or `delay`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Node::Detection(_) => "detection",
            Node::Business(_) => "business",
            Node::Delay { .. } => "delay",
        }
    }

    /// The action of a detection or business node.
    pub fn action(&self) -> Option<&Action> {
        match self {
            Node::Detection(action) | Node::Business(action) => Some(action),
            Node::Delay { .. } => None,
        }
    }
}

/// An action node's template, resolved to its executor.
#[derive(Clone)]
pub struct Action {
    /// The template.
    pub template_id: Uuid,
    /// Its name.
    pub name: String,
    /// Its config (the executor's settings).
    pub config: Value,
    /// `config.parameters`, handed to the action.
    pub parameters: Value,
    /// What runs it.
    pub executor: Arc<dyn Executor>,
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Action")
            .field("template_id", &self.template_id)
            .field("name", &self.name)
            .field("executor", &self.executor.name())
            .finish_non_exhaustive()
    }
}

/// A transition between nodes.
#[derive(Debug, Clone)]
pub struct Edge {
    /// Source node.
    pub from: String,
    /// Target node.
    pub to: String,
    /// Followed only when this holds; always without one.
    pub condition: Option<Expression>,
}

/// Every problem found in a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<Problem>);

/// One problem, at a JSON path such as `$.edges[1].to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where.
    pub path: String,
    /// What.
    pub message: String,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid workflow config: ")?;
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{}: {}", problem.path, problem.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects problems while loading.
struct Checker<'t> {
    problems: Vec<Problem>,
    templates: &'t BTreeMap<Uuid, ActionTemplate>,
    executors: &'t Executors,
}

impl Checker<'_> {
    fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            message: message.into(),
        });
    }

    fn expression(&mut self, path: String, value: Option<&Value>) -> Option<Expression> {
        match value {
            None | Some(Value::Null) => None,
            Some(Value::String(source)) if source.trim().is_empty() => None,
            Some(Value::String(source)) => match Expression::compile(source) {
                Ok(expression) => Some(expression),
                Err(error) => {
                    self.problem(path, error.message);
                    None
                }
            },
            Some(_) => {
                self.problem(path, "must be a Python expression in a string");
                None
            }
        }
    }

    /// The template a node names, resolved to its executor: the node's `action` for
    /// business nodes, the template's `config.executor` for detection nodes.
    fn action(
        &mut self,
        path: &str,
        node: &Value,
        kind: ActionKind,
        named: Option<&str>,
    ) -> Option<Action> {
        let field = format!("{path}.action_template_id");
        let id = match node.get("action_template_id") {
            Some(Value::String(text)) => match Uuid::parse_str(text) {
                Ok(id) => id,
                Err(_) => {
                    self.problem(field, format!("'{text}' is not a UUID"));
                    return None;
                }
            },
            Some(_) => {
                self.problem(field, "must be a UUID string");
                return None;
            }
            None => {
                self.problem(field, "is missing");
                return None;
            }
        };
        let Some(template) = self.templates.get(&id) else {
            self.problem(field, format!("template {id} is not in the plan"));
            return None;
        };
        let at = format!("{field} (template '{}')", template.name);
        if template.kind != kind.as_str() {
            self.problem(
                &at,
                format!("is a {} template, not {}", template.kind, kind.as_str()),
            );
        }
        let config: Value = match serde_json::from_str(template.config.get()) {
            Ok(config @ Value::Object(_)) => config,
            _ => {
                self.problem(format!("{at}.config"), "must be a JSON object");
                return None;
            }
        };
        let name = match named {
            Some(name) => name.to_owned(),
            None => match config.get("executor").and_then(Value::as_str) {
                Some(name) => name.to_owned(),
                None => {
                    self.problem(
                        format!("{at}.config.executor"),
                        format!("is missing ({})", self.executors.names(kind).join(", ")),
                    );
                    return None;
                }
            },
        };
        let executor = match self.executors.get(&name) {
            Some(executor) if executor.kind() == kind => Arc::clone(executor),
            _ => {
                let where_ = if named.is_some() {
                    format!("{path}.action")
                } else {
                    format!("{at}.config.executor")
                };
                self.problem(
                    where_,
                    format!(
                        "unknown {} action '{name}' ({})",
                        kind.as_str(),
                        self.executors.names(kind).join(", ")
                    ),
                );
                return None;
            }
        };
        let problems = executor.check_config(&config);
        let usable = problems.is_empty();
        for message in problems {
            self.problem(format!("{at}.config"), message);
        }
        usable.then(|| Action {
            template_id: id,
            name: template.name.clone(),
            parameters: config.get("parameters").cloned().unwrap_or(Value::Null),
            config,
            executor,
        })
    }
}

impl Workflow {
    /// Loads and checks a config against the plan's templates and the known executors;
    /// every problem is reported at once.
    pub fn load(
        config: &Value,
        templates: &BTreeMap<Uuid, ActionTemplate>,
        executors: &Executors,
    ) -> Result<Workflow, ConfigErrors> {
        let mut check = Checker {
            problems: Vec::new(),
            templates,
            executors,
        };
        let Some(root) = config.as_object() else {
            check.problem("$", "the workflow config must be a JSON object");
            return Err(ConfigErrors(check.problems));
        };
        let mut nodes = BTreeMap::new();
        match root.get("nodes") {
            Some(Value::Object(map)) if !map.is_empty() => {
                for (id, node) in map {
                    let path = format!("$.nodes.{id}");
                    if let Some(node) = load_node(&mut check, &path, node) {
                        nodes.insert(id.clone(), node);
                    }
                }
            }
            Some(Value::Object(_)) => check.problem("$.nodes", "has no nodes"),
            Some(_) => check.problem("$.nodes", "must be an object of nodes by id"),
            None => check.problem("$.nodes", "is missing"),
        }
        let node_ids: BTreeSet<&str> = root
            .get("nodes")
            .and_then(Value::as_object)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let start = match root.get("start_node") {
            Some(Value::String(id)) if node_ids.contains(id.as_str()) => id.clone(),
            Some(Value::String(id)) => {
                check.problem("$.start_node", format!("unknown node '{id}'"));
                id.clone()
            }
            Some(_) => {
                check.problem("$.start_node", "must be a node id");
                String::new()
            }
            None => {
                check.problem("$.start_node", "is missing");
                String::new()
            }
        };
        let mut edges = Vec::new();
        match root.get("edges") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (i, edge) in list.iter().enumerate() {
                    let path = format!("$.edges[{i}]");
                    let end = |check: &mut Checker<'_>, key: &str| -> Option<String> {
                        match edge.get(key) {
                            Some(Value::String(id)) if node_ids.contains(id.as_str()) => {
                                Some(id.clone())
                            }
                            Some(Value::String(id)) => {
                                check.problem(
                                    format!("{path}.{key}"),
                                    format!("unknown node '{id}'"),
                                );
                                None
                            }
                            _ => {
                                check.problem(format!("{path}.{key}"), "must be a node id");
                                None
                            }
                        }
                    };
                    let (from, to) = (end(&mut check, "from"), end(&mut check, "to"));
                    let condition =
                        check.expression(format!("{path}.condition"), edge.get("condition"));
                    if let (Some(from), Some(to)) = (from, to) {
                        edges.push(Edge {
                            from,
                            to,
                            condition,
                        });
                    }
                }
            }
            Some(_) => check.problem("$.edges", "must be an array"),
        }
        let consolidation = check.expression(
            "$.consolidation_logic".into(),
            root.get("consolidation_logic"),
        );
        let max_runtime_seconds = match root.get("max_runtime_seconds") {
            None | Some(Value::Null) => None,
            Some(value) => match value.as_u64().filter(|s| *s > 0) {
                Some(seconds) => Some(seconds),
                None => {
                    check.problem(
                        "$.max_runtime_seconds",
                        "must be a positive whole number of seconds",
                    );
                    None
                }
            },
        };
        for cycle in cycles_without_delay(&nodes, &edges, &start) {
            check.problem(
                "$.edges",
                format!(
                    "cycle {} has no delay node, so it would loop without pause",
                    cycle.join(" → ")
                ),
            );
        }
        if check.problems.is_empty() {
            Ok(Workflow {
                start,
                nodes,
                edges,
                consolidation,
                max_runtime_seconds,
            })
        } else {
            Err(ConfigErrors(check.problems))
        }
    }

    /// The edges leaving `node`, in config order.
    pub fn outgoing<'w>(&'w self, node: &'w str) -> impl Iterator<Item = &'w Edge> + 'w {
        self.edges.iter().filter(move |e| e.from == node)
    }
}

fn load_node(check: &mut Checker<'_>, path: &str, node: &Value) -> Option<Node> {
    if !node.is_object() {
        check.problem(path.to_owned(), "must be an object");
        return None;
    }
    match node.get("type").and_then(Value::as_str) {
        Some("detection") => check
            .action(path, node, ActionKind::Detection, None)
            .map(Node::Detection),
        Some("business") => match node.get("action").and_then(Value::as_str) {
            Some(action) => check
                .action(path, node, ActionKind::Business, Some(action))
                .map(Node::Business),
            None => {
                let known = check.executors.names(ActionKind::Business).join(", ");
                check.problem(format!("{path}.action"), format!("is missing ({known})"));
                None
            }
        },
        Some("delay") => {
            match node.get("seconds").and_then(Value::as_u64) {
                Some(seconds) if seconds <= u64::from(MAX_PAUSE_SECONDS) => Some(Node::Delay {
                    seconds: u32::try_from(seconds).unwrap_or(MAX_PAUSE_SECONDS),
                }),
                _ => {
                    check.problem(
                    format!("{path}.seconds"),
                    format!("must be a whole number of seconds, at most {MAX_PAUSE_SECONDS} (7 days)"),
                );
                    None
                }
            }
        }
        Some(other) => {
            check.problem(
                format!("{path}.type"),
                format!("unknown node type '{other}' (detection, business or delay)"),
            );
            None
        }
        None => {
            check.problem(
                format!("{path}.type"),
                "is missing (detection, business or delay)",
            );
            None
        }
    }
}

/// Cycles in the node graph that pass through no delay node, each once, as node paths
/// that begin where execution from `start` first enters them.
fn cycles_without_delay(
    nodes: &BTreeMap<String, Node>,
    edges: &[Edge],
    start: &str,
) -> Vec<Vec<String>> {
    let order = reach_order(edges, start);
    let rank = |id: &String| order.iter().position(|o| o == id).unwrap_or(usize::MAX);
    let mut cycles = simple_cycles_without_delay(nodes, edges);
    for cycle in &mut cycles {
        // The path repeats its first node at the end; rotate the loop part.
        cycle.pop();
        if let Some(first) = (0..cycle.len()).min_by_key(|&i| rank(&cycle[i])) {
            cycle.rotate_left(first);
        }
        if let Some(head) = cycle.first().cloned() {
            cycle.push(head);
        }
    }
    cycles
}

/// Node ids in breadth-first order from `start`.
fn reach_order(edges: &[Edge], start: &str) -> Vec<String> {
    let mut order = vec![start.to_owned()];
    let mut next = 0;
    while let Some(at) = order.get(next).cloned() {
        for edge in edges.iter().filter(|e| e.from == at) {
            if !order.contains(&edge.to) {
                order.push(edge.to.clone());
            }
        }
        next += 1;
    }
    order
}

fn simple_cycles_without_delay(nodes: &BTreeMap<String, Node>, edges: &[Edge]) -> Vec<Vec<String>> {
    // Delay nodes break loops, so search the graph with them removed.
    let is_delay = |id: &str| matches!(nodes.get(id), Some(Node::Delay { .. }));
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut seen_sets: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for start in nodes.keys().filter(|id| !is_delay(id)) {
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for edge in edges.iter().filter(|e| e.from == at && !is_delay(&e.to)) {
                if edge.to == *start {
                    let members: BTreeSet<String> = path.iter().cloned().collect();
                    if seen_sets.insert(members) {
                        let mut cycle = path.clone();
                        cycle.push(start.clone());
                        found.push(cycle);
                    }
                } else if !path.contains(&edge.to) && path.len() < nodes.len() {
                    let mut next = path.clone();
                    next.push(edge.to.clone());
                    stack.push((edge.to.clone(), next));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    /// The example of the contract.
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
        Workflow::load(config, &templates(), &Executors::standard())
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
        assert!(
            matches!(&workflow.nodes["detect"], Node::Detection(a) if a.executor.name() == "http")
        );
        assert!(
            matches!(&workflow.nodes["alert"], Node::Business(a) if a.executor.name() == "notify")
        );
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
        config["nodes"]["alert"]["action_template_id"] =
            json!("00000000-0000-0000-0000-0000000000ff");
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
        let found = Workflow::load(&example(), &templates, &Executors::standard())
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
}
