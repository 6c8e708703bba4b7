//! The loop rule: every cycle must pass through a delay node, else it would spin.

use std::collections::{BTreeMap, BTreeSet};

use super::{Edge, Node};

/// Cycles in the node graph that pass through no delay node, each once, as node paths
/// that begin where execution from `start` first enters them.
pub(super) fn cycles_without_delay(
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
