//! Workflow configs (`action_template_connections.workflow_config`): loaded once, checked
//! completely, every problem reported with its JSON path. The types are here; checking is
//! in `load`, the loop rule in `cycles`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use res_expr::Expression;
use serde_json::Value;
use uuid::Uuid;

use super::executors::Executor;

/// A checked workflow, ready to run many times.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// Where execution starts.
    pub(crate) start: String,
    pub(crate) nodes: BTreeMap<String, Node>,
    /// Edges in config order (outgoing edges are followed in this order).
    pub(crate) edges: Vec<Edge>,
    /// Decides, when execution first reaches a business node, whether business runs.
    pub(crate) consolidation: Option<Expression>,
    /// Runs longer than this end with status `timeout`.
    pub(crate) max_runtime_seconds: Option<u64>,
}

/// What a node does.
#[derive(Debug, Clone)]
pub(crate) enum Node {
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
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Node::Detection(_) => "detection",
            Node::Business(_) => "business",
            Node::Delay { .. } => "delay",
        }
    }

    /// The action of a detection or business node.
    pub(crate) fn action(&self) -> Option<&Action> {
        match self {
            Node::Detection(action) | Node::Business(action) => Some(action),
            Node::Delay { .. } => None,
        }
    }
}

/// An action node's template, resolved to its executor.
#[derive(Clone)]
pub(crate) struct Action {
    pub(crate) template_id: Uuid,
    pub(crate) name: String,
    /// Its config (the executor's settings).
    pub(crate) config: Value,
    /// `config.parameters`, handed to the action.
    pub(crate) parameters: Value,
    /// What runs it.
    pub(crate) executor: Arc<dyn Executor>,
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
pub(crate) struct Edge {
    pub(crate) from: String,
    /// Target node.
    pub(crate) to: String,
    /// Followed only when this holds; always without one.
    pub(crate) condition: Option<Expression>,
}

/// Every problem found in a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<Problem>);

/// One problem, at a JSON path such as `$.edges[1].to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where.
    pub(crate) path: String,
    pub(crate) message: String,
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

impl Workflow {
    /// The edges leaving `node`, in config order.
    pub(crate) fn outgoing<'w>(&'w self, node: &'w str) -> impl Iterator<Item = &'w Edge> + 'w {
        self.edges.iter().filter(move |e| e.from == node)
    }
}

mod cycles;
mod load;

#[cfg(test)]
mod tests;
