//! Checking a config: every node, edge and expression, every problem with its path.

use std::collections::{BTreeMap, BTreeSet};

use res_expr::Expression;
use res_shared::wire::{ActionTemplate, MAX_PAUSE_SECONDS};
use serde_json::Value;
use uuid::Uuid;

use super::cycles::cycles_without_delay;
use super::{Action, ConfigErrors, Edge, Node, Problem, Workflow};
use crate::actions::{ActionKind, Catalogue, ExecutorField};

/// Collects problems while loading.
struct Checker<'t> {
    problems: Vec<Problem>,
    templates: &'t BTreeMap<Uuid, ActionTemplate>,
    actions: &'t dyn Catalogue,
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
        let executor = match self.actions.executor_of(kind, named, &config) {
            Ok(executor) => executor,
            Err((field, message)) => {
                let where_ = match field {
                    ExecutorField::Action => format!("{path}.action"),
                    ExecutorField::Executor => format!("{at}.config.executor"),
                };
                self.problem(where_, message);
                return None;
            }
        };
        let problems = self.actions.check_config(executor, &config);
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
    /// Checks a config against the templates it may name and the actions that can run;
    /// every problem is reported at once.
    pub fn check(
        config: &Value,
        templates: &BTreeMap<Uuid, ActionTemplate>,
        actions: &dyn Catalogue,
    ) -> Result<Workflow, ConfigErrors> {
        let mut check = Checker {
            problems: Vec::new(),
            templates,
            actions,
        };
        let Some(root) = config.as_object() else {
            check.problem("$", "the workflow config must be a JSON object");
            return Err(ConfigErrors(check.problems));
        };
        let nodes = check.nodes(root.get("nodes"));
        let node_ids: BTreeSet<&str> = root
            .get("nodes")
            .and_then(Value::as_object)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let start = check.start_node(root.get("start_node"), &node_ids);
        let edges = check.edges(root.get("edges"), &node_ids);
        let consolidation = check.expression(
            "$.consolidation_logic".into(),
            root.get("consolidation_logic"),
        );
        let max_runtime_seconds = check.max_runtime(root.get("max_runtime_seconds"));
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
}

impl Checker<'_> {
    /// `$.nodes`: every node that loads.
    fn nodes(&mut self, nodes: Option<&Value>) -> BTreeMap<String, Node> {
        let mut loaded = BTreeMap::new();
        match nodes {
            Some(Value::Object(map)) if !map.is_empty() => {
                for (id, node) in map {
                    let path = format!("$.nodes.{id}");
                    if let Some(node) = load_node(self, &path, node) {
                        loaded.insert(id.clone(), node);
                    }
                }
            }
            Some(Value::Object(_)) => self.problem("$.nodes", "has no nodes"),
            Some(_) => self.problem("$.nodes", "must be an object of nodes by id"),
            None => self.problem("$.nodes", "is missing"),
        }
        loaded
    }

    /// `$.start_node`: one of the nodes.
    fn start_node(&mut self, start: Option<&Value>, node_ids: &BTreeSet<&str>) -> String {
        match start {
            Some(Value::String(id)) if node_ids.contains(id.as_str()) => id.clone(),
            Some(Value::String(id)) => {
                self.problem("$.start_node", format!("unknown node '{id}'"));
                id.clone()
            }
            Some(_) => {
                self.problem("$.start_node", "must be a node id");
                String::new()
            }
            None => {
                self.problem("$.start_node", "is missing");
                String::new()
            }
        }
    }

    /// `$.edges`: between known nodes, with optional conditions, in written order.
    fn edges(&mut self, edges: Option<&Value>, node_ids: &BTreeSet<&str>) -> Vec<Edge> {
        let mut loaded = Vec::new();
        let list = match edges {
            None | Some(Value::Null) => return loaded,
            Some(Value::Array(list)) => list,
            Some(_) => {
                self.problem("$.edges", "must be an array");
                return loaded;
            }
        };
        for (i, edge) in list.iter().enumerate() {
            let path = format!("$.edges[{i}]");
            let from = self.edge_end(&path, edge, "from", node_ids);
            let to = self.edge_end(&path, edge, "to", node_ids);
            let condition = self.expression(format!("{path}.condition"), edge.get("condition"));
            if let (Some(from), Some(to)) = (from, to) {
                loaded.push(Edge {
                    from,
                    to,
                    condition,
                });
            }
        }
        loaded
    }

    /// One end (`from` or `to`) of the edge at `path`.
    fn edge_end(
        &mut self,
        path: &str,
        edge: &Value,
        key: &str,
        node_ids: &BTreeSet<&str>,
    ) -> Option<String> {
        match edge.get(key) {
            Some(Value::String(id)) if node_ids.contains(id.as_str()) => Some(id.clone()),
            Some(Value::String(id)) => {
                self.problem(format!("{path}.{key}"), format!("unknown node '{id}'"));
                None
            }
            _ => {
                self.problem(format!("{path}.{key}"), "must be a node id");
                None
            }
        }
    }

    /// `$.max_runtime_seconds`: absent, or a positive whole number.
    fn max_runtime(&mut self, value: Option<&Value>) -> Option<u64> {
        match value {
            None | Some(Value::Null) => None,
            Some(value) => {
                let seconds = value.as_u64().filter(|s| *s > 0);
                if seconds.is_none() {
                    self.problem(
                        "$.max_runtime_seconds",
                        "must be a positive whole number of seconds",
                    );
                }
                seconds
            }
        }
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
                let known = check.actions.names(ActionKind::Business).join(", ");
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
