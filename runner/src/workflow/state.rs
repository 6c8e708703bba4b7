//! The engine's state during a run. It is also the context a paused execution saves
//! through `executions_pause` and gets back from the claim that resumes it, so a different
//! runner can continue exactly where this one stopped.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};
use res_shared::wire::NodeOutput;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::report::{Consolidation, NodeRecord};

/// Version of the saved context; a runner refuses contexts it does not understand.
pub(crate) const CONTEXT_VERSION: u32 = 1;

/// A node waiting to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) node_id: String,
    /// Index in `nodes` of the run whose edge led here (its result is the input).
    pub(crate) from: Option<usize>,
}

/// Where a paused execution waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PausedAt {
    /// Index in `nodes` of the delay's record.
    pub(crate) record: usize,
    /// The delay node.
    pub(crate) node_id: String,
}

/// Everything needed to continue a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunState {
    /// [`CONTEXT_VERSION`].
    pub(crate) version: u32,
    /// When the execution first started.
    pub(crate) started_at: DateTime<Utc>,
    /// Running time of earlier segments, milliseconds.
    pub(crate) active_ms: u64,
    /// How many times it was resumed.
    pub(crate) resumed_count: u32,
    /// Nodes to run, in order.
    pub(crate) queue: VecDeque<Pending>,
    /// Node runs so far.
    pub(crate) nodes: Vec<NodeRecord>,
    /// Results of action nodes so far.
    pub(crate) aggregated: Vec<Value>,
    /// The consolidation decision, once made.
    pub(crate) consolidation: Option<Consolidation>,
    /// Runs per node so far.
    pub(crate) visits: BTreeMap<String, u32>,
    /// Set while paused.
    pub(crate) paused_at: Option<PausedAt>,
    /// What this segment's programs printed. Not saved in a paused context (it would
    /// outgrow the pause request): a resumed run reports its last segment's output.
    #[serde(skip)]
    pub(crate) output: Vec<NodeOutput>,
}

/// Why a saved context cannot be continued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the paused execution's context cannot be resumed: {0}")]
pub(crate) struct ContextError(pub String);

impl RunState {
    /// A fresh run starting at `start`.
    pub(crate) fn new(start: &str, now: DateTime<Utc>) -> RunState {
        RunState {
            version: CONTEXT_VERSION,
            started_at: now,
            active_ms: 0,
            resumed_count: 0,
            queue: VecDeque::from([Pending {
                node_id: start.to_owned(),
                from: None,
            }]),
            nodes: Vec::new(),
            aggregated: Vec::new(),
            consolidation: None,
            visits: BTreeMap::new(),
            paused_at: None,
            output: Vec::new(),
        }
    }

    /// Reads a saved context; it must be a paused run of a known version whose indexes
    /// point at its own records.
    pub(crate) fn restore(context: &str) -> Result<RunState, ContextError> {
        let state: RunState =
            serde_json::from_str(context).map_err(|e| ContextError(e.to_string()))?;
        if state.version != CONTEXT_VERSION {
            return Err(ContextError(format!(
                "it has version {}, this runner understands {CONTEXT_VERSION}",
                state.version
            )));
        }
        let Some(paused) = &state.paused_at else {
            return Err(ContextError("it is not paused at a delay node".into()));
        };
        let in_range = |i: usize| i < state.nodes.len();
        if !in_range(paused.record)
            || state
                .queue
                .iter()
                .any(|p| p.from.is_some_and(|i| !in_range(i)))
        {
            return Err(ContextError(
                "it refers to node runs it does not contain".into(),
            ));
        }
        Ok(state)
    }

    /// The input of a pending node: the result of the run that led to it.
    pub(crate) fn input_of(&self, pending: &Pending) -> Option<&Value> {
        pending
            .from
            .and_then(|i| self.nodes.get(i))
            .and_then(|record| record.result.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::report::NodeStatus;

    fn paused() -> RunState {
        let now = crate::clock::now();
        let mut state = RunState::new("detect", now);
        state.queue.clear();
        state.nodes.push(NodeRecord {
            node_id: "wait".into(),
            node_type: "delay".into(),
            action: None,
            visit: 1,
            status: NodeStatus::Paused,
            started_at: now,
            finished_at: now,
            duration_ms: 0,
            result: None,
            error: None,
        });
        state.paused_at = Some(PausedAt {
            record: 0,
            node_id: "wait".into(),
        });
        state
    }

    #[test]
    fn a_saved_context_round_trips() {
        let state = paused();
        let saved = serde_json::to_string(&state).expect("state serializes");
        assert_eq!(RunState::restore(&saved), Ok(state));
    }

    #[test]
    fn contexts_that_cannot_continue_are_refused_with_the_reason() {
        let mut newer = paused();
        newer.version = 2;
        let error = RunState::restore(&serde_json::to_string(&newer).expect("serializes"))
            .expect_err("unknown version");
        assert!(error.0.contains("version 2"), "{error}");

        let mut dangling = paused();
        dangling.queue.push_back(Pending {
            node_id: "x".into(),
            from: Some(7),
        });
        let error = RunState::restore(&serde_json::to_string(&dangling).expect("serializes"))
            .expect_err("dangling index");
        assert!(error.0.contains("does not contain"), "{error}");

        let mut running = paused();
        running.paused_at = None;
        assert!(RunState::restore(&serde_json::to_string(&running).expect("serializes")).is_err());
        assert!(RunState::restore("{\"version\": 1}").is_err());
        assert!(RunState::restore("not json").is_err());
    }
}
