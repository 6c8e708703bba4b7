//! A workflow as a person reads it: its nodes in the order a run meets them.

use std::collections::{BTreeSet, VecDeque};

use crate::document::WorkflowDoc;

/// The node ids from `start_node`, breadth first along the edges in their order, then any
/// node no edge reaches (which a run never meets), by id.
pub fn node_order(workflow: &WorkflowDoc) -> Vec<&str> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut order = Vec::with_capacity(workflow.nodes.len());
    let mut queue: VecDeque<&str> = VecDeque::new();
    if workflow.nodes.contains_key(&workflow.start_node) {
        queue.push_back(&workflow.start_node);
    }
    while let Some(node) = queue.pop_front() {
        if !seen.insert(node) {
            continue;
        }
        order.push(node);
        for edge in workflow.edges.iter().filter(|e| e.from == node) {
            if workflow.nodes.contains_key(&edge.to) && !seen.contains(edge.to.as_str()) {
                queue.push_back(&edge.to);
            }
        }
    }
    for id in workflow.nodes.keys() {
        if seen.insert(id) {
            order.push(id);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn nodes_come_in_the_order_a_run_meets_them_and_unreachable_ones_last() {
        let document = parse(
            "catalogue:\n  rules:\n    - name: R\n      workflow:\n        start_node: detect\n        nodes:\n          a_lonely: {type: delay, seconds: 1}\n          detect: {type: detection, template: T}\n          tell: {type: business, action: notify, template: N}\n          violation: {type: business, action: create_violation, template: V}\n        edges:\n          - {from: detect, to: violation}\n          - {from: violation, to: tell}\n          - {from: detect, to: tell}\n",
        )
        .expect("parses");
        let rule = &document.catalogue.expect("catalogue").rules[0];
        assert_eq!(
            node_order(&rule.workflow),
            ["detect", "violation", "tell", "a_lonely"]
        );
    }
}
