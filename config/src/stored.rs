//! A workflow in both its forms: the document's (templates by name) and the stored one
//! (`action_template_connections.workflow_config`, templates by id), which the runner loads.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::document::{EdgeDoc, NodeDoc, NodeKind, WorkflowDoc};

/// A workflow in its stored form (`action_template_connections.workflow_config`), each
/// node's template replaced by the id `id_of` gives its name (left out when it has none).
pub fn stored_workflow(workflow: &WorkflowDoc, id_of: impl Fn(&str) -> Option<Uuid>) -> Value {
    let nodes: Map<String, Value> = workflow
        .nodes
        .iter()
        .map(|(id, node)| {
            let mut stored = Map::new();
            let kind = match node.kind {
                NodeKind::Detection => "detection",
                NodeKind::Business => "business",
                NodeKind::Delay => "delay",
            };
            stored.insert("type".into(), kind.into());
            if let Some(template) = node.template.as_deref().and_then(&id_of) {
                stored.insert("action_template_id".into(), template.to_string().into());
            }
            if let Some(action) = &node.action {
                stored.insert("action".into(), action.clone().into());
            }
            if let Some(seconds) = node.seconds {
                stored.insert("seconds".into(), seconds.into());
            }
            (id.clone(), Value::Object(stored))
        })
        .collect();
    let mut stored = json!({
        "start_node": workflow.start_node,
        "nodes": nodes,
        "edges": workflow.edges.iter().map(|edge| {
            let mut stored = json!({"from": edge.from, "to": edge.to});
            if let Some(condition) = &edge.condition {
                stored["condition"] = condition.clone().into();
            }
            stored
        }).collect::<Vec<_>>(),
    });
    if let Some(logic) = &workflow.consolidation_logic {
        stored["consolidation_logic"] = logic.clone().into();
    }
    if let Some(seconds) = workflow.max_runtime_seconds {
        stored["max_runtime_seconds"] = seconds.into();
    }
    stored
}

/// The stored shape, read leniently: export shows what is stored, and validation then says
/// what is wrong with it.
#[derive(Deserialize)]
struct Stored {
    #[serde(default)]
    start_node: String,
    #[serde(default)]
    nodes: std::collections::BTreeMap<String, StoredNode>,
    #[serde(default)]
    edges: Vec<EdgeDoc>,
    #[serde(default)]
    consolidation_logic: Option<String>,
    #[serde(default)]
    max_runtime_seconds: Option<u64>,
}

#[derive(Deserialize)]
struct StoredNode {
    #[serde(rename = "type")]
    kind: NodeKind,
    #[serde(default)]
    action_template_id: Option<Uuid>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    seconds: Option<u64>,
}

/// A stored workflow as a document shows it, each template id replaced by the name
/// `name_of` gives (or the id itself, which validation will then name as unknown).
pub fn workflow_from_stored(
    stored: &Value,
    name_of: impl Fn(Uuid) -> Option<String>,
) -> Result<WorkflowDoc, String> {
    let stored: Stored = serde_json::from_value(stored.clone())
        .map_err(|e| format!("the stored workflow does not read as one: {e}"))?;
    Ok(WorkflowDoc {
        start_node: stored.start_node,
        nodes: stored
            .nodes
            .into_iter()
            .map(|(id, node)| {
                let template = node
                    .action_template_id
                    .map(|t| name_of(t).unwrap_or_else(|| t.to_string()));
                (
                    id,
                    NodeDoc {
                        kind: node.kind,
                        template,
                        action: node.action,
                        seconds: node.seconds,
                    },
                )
            })
            .collect(),
        edges: stored.edges,
        consolidation_logic: stored.consolidation_logic.filter(|l| !l.trim().is_empty()),
        max_runtime_seconds: stored.max_runtime_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn a_workflow_survives_the_round_trip_through_its_stored_form() {
        let catalogue = parse(include_str!("../../docs/config/catalogue.yaml"))
            .expect("parses")
            .catalogue
            .expect("a catalogue");
        let ids: Vec<(String, Uuid)> = catalogue
            .action_templates
            .iter()
            .map(|t| (t.name.clone(), Uuid::new_v4()))
            .collect();
        for rule in &catalogue.rules {
            let stored = stored_workflow(&rule.workflow, |name| {
                ids.iter().find(|(n, _)| n == name).map(|(_, id)| *id)
            });
            assert!(stored["nodes"]["detect"]["action_template_id"].is_string());
            let back = workflow_from_stored(&stored, |id| {
                ids.iter().find(|(_, i)| *i == id).map(|(n, _)| n.clone())
            })
            .expect("reads back");
            assert_eq!(back, rule.workflow);
        }
    }
}
