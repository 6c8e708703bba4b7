//! Workflow configs (`action_template_connections.workflow_config`): their types and the one
//! checker that the functions run before a config is written and the runner runs before it
//! executes one, so both refuse the same configs with the same words. Every problem is
//! reported with its JSON path. Checking is in `check`, the loop rule in `cycles`, the
//! actions a node may name in `actions`.

use std::collections::BTreeMap;
use std::fmt;

use res_expr::Expression;
use serde_json::Value;
use uuid::Uuid;

pub mod actions;
mod check;
mod cycles;

pub use actions::{ActionKind, Catalogue, ExecutorField, StandardActions};

/// A checked workflow, ready to run many times.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// Where execution starts.
    pub start: String,
    /// The nodes by id.
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

/// An action node's template, resolved to the action that runs it.
#[derive(Debug, Clone)]
pub struct Action {
    /// The action template.
    pub template_id: Uuid,
    /// The template's name.
    pub name: String,
    /// Its config (the executor's settings).
    pub config: Value,
    /// `config.parameters`, handed to the action.
    pub parameters: Value,
    /// The executor that runs it (`http`, `command`, `create_violation`, `notify`, ...).
    pub executor: &'static str,
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
    /// What is wrong there.
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

impl Workflow {
    /// The edges leaving `node`, in config order.
    pub fn outgoing<'w>(&'w self, node: &'w str) -> impl Iterator<Item = &'w Edge> + 'w {
        self.edges.iter().filter(move |e| e.from == node)
    }
}

#[cfg(test)]
mod tests;
