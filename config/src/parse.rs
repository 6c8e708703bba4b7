//! Reading a document: YAML (JSON is YAML too, so both go through one parser and one set of
//! limits), refused whole with a located message when it cannot be read.

use res_workflow::Problem;
use serde::Deserialize;
use serde_saphyr::options::DuplicateKeyPolicy;

use crate::document::Document;
use crate::path::Path;

/// The largest document read, in bytes: a 2,000-branch brand with 20 rules at each is
/// about 4.7 MB as written by hand and 9 MB as exported (every object with its id).
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// Most objects (templates, rules, brand rules, branches, branch rules) in one document.
pub const MAX_OBJECTS: usize = 60_000;

/// Reads a YAML or JSON document. Duplicate keys, alias bombs, deep nesting and documents
/// past [`MAX_DOCUMENT_BYTES`] are refused before anything is built from them. A problem is
/// named at its path in the document (`brand.branches[2].rules["Queue length"].window.to`)
/// with its line and column, in words of the document, not of the parser.
pub fn parse(text: &str) -> Result<Document, Problem> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(Problem {
            path: "$".into(),
            message: format!(
                "the document is {} bytes; at most {MAX_DOCUMENT_BYTES} are read (split it: one brand per document)",
                text.len()
            ),
        });
    }
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_events: MAX_EVENTS,
            max_nodes: MAX_NODES,
            max_depth: MAX_DEPTH,
            max_documents: 1,
            max_aliases: MAX_ALIASES,
            max_anchors: MAX_ALIASES,
        },
        duplicate_keys: DuplicateKeyPolicy::Error,
        strict_booleans: true,
        with_snippet: false,
    };
    let mut failed_at = None;
    serde_saphyr::with_deserializer_from_str_with_options(text, options, |deserializer| {
        let mut track = serde_path_to_error::Track::new();
        let tracked = serde_path_to_error::Deserializer::new(deserializer, &mut track);
        Document::deserialize(tracked).inspect_err(|_| failed_at = Some(track.path()))
    })
    .map_err(|error| {
        let at = error
            .location()
            .map(|l| format!(" (line {}, column {})", l.line(), l.column()))
            .unwrap_or_default();
        Problem {
            path: failed_at
                .as_ref()
                .map_or_else(|| "$".to_owned(), document_path),
            message: format!("{}{at}", in_words(&error.to_string())),
        }
    })
}

const MAX_EVENTS: usize = 4_000_000;
const MAX_NODES: usize = 2_000_000;
const MAX_DEPTH: usize = 32;
const MAX_ALIASES: usize = 1_000;

/// Where a problem is, as validation names places: struct fields as `.field`, the names
/// that key a map of objects (rules, actions, nodes) as `["name"]`, list items as `[i]`.
fn document_path(at: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut path: Option<Path> = None;
    let mut keyed_by_name = false;
    for segment in at.iter() {
        let (next, names) = match (segment, &path) {
            (Segment::Map { key }, None) => (Path::root(key), false),
            (Segment::Map { key }, Some(p)) if keyed_by_name => (p.key(key), false),
            (Segment::Map { key }, Some(p)) => (
                p.field(key),
                matches!(key.as_str(), "rules" | "actions" | "nodes"),
            ),
            (Segment::Seq { index }, Some(p)) => (p.index(*index), false),
            (Segment::Enum { .. } | Segment::Unknown | Segment::Seq { .. }, _) => continue,
        };
        path = Some(next);
        keyed_by_name = names;
    }
    path.map_or_else(|| "$".to_owned(), |p| p.as_str().to_owned())
}

/// The parser's message in the document's words: no parser options or internal names,
/// and without its own `at line …` (the caller adds the place).
fn in_words(raw: &str) -> String {
    let first = raw.lines().next().unwrap_or(raw).trim();
    let message = first
        .rsplit_once(" at line ")
        .map_or(first, |(message, _)| message);
    let quoted = |text: &str| text.trim().trim_matches('`').to_owned();
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(", set ").next().unwrap_or(rest);
        return format!("the key '{}' appears twice here", quoted(key));
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (field, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        return match expected.strip_prefix("one of ") {
            Some(known) => format!("unknown key '{}' (known keys: {known})", quoted(field)),
            None => format!("unknown key '{}'", quoted(field)),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (value, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let expected = expected.strip_prefix("one of ").unwrap_or(expected);
        return format!("'{}' is not one of: {expected}", quoted(value));
    }
    if let Some(field) = message.strip_prefix("missing field ") {
        return format!("'{}' is missing", quoted(field));
    }
    if message.starts_with("budget breached") {
        return budget_breach(message);
    }
    let words = match message {
        "invalid u32" | "invalid u64" | "invalid i64" => "expected a whole number, 0 or more",
        "expected sequence start" => "expected a list",
        "expected mapping start" => "expected keys and values (a mapping)",
        "expected string scalar" => "expected text",
        m if m.starts_with("invalid boolean") => "expected true or false",
        m => return m.to_owned(),
    };
    words.to_owned()
}

/// What a budget the parser enforces says, in the limits the docs give.
fn budget_breach(message: &str) -> String {
    let limit = |what: &str, n: usize| format!("more than {n} {what}: the document is refused");
    if message.contains("Documents") {
        "one YAML document per file: this file has more than one (`---`)".to_owned()
    } else if message.contains("Aliases") {
        limit("aliases (`*name`)", MAX_ALIASES)
    } else if message.contains("Anchors") {
        limit("anchors (`&name`)", MAX_ALIASES)
    } else if message.contains("Depth") {
        format!("nested more than {MAX_DEPTH} levels deep: the document is refused")
    } else if message.contains("Nodes") {
        limit("values", MAX_NODES)
    } else {
        limit("parts (keys, values, aliases)", MAX_EVENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Problem {
        parse(text).expect_err("refused")
    }

    #[test]
    fn yaml_and_json_read_alike() {
        let yaml =
            parse("brand:\n  name: Acme # the brand\n  zone: Europe/Berlin\n").expect("yaml");
        let json = parse(r#"{"brand": {"name": "Acme", "zone": "Europe/Berlin"}}"#).expect("json");
        assert_eq!(yaml, json);
    }

    #[test]
    fn duplicate_keys_are_refused_in_yaml_and_in_json() {
        for (text, path) in [
            ("brand:\n  name: A\n  name: B\n", "brand"),
            (r#"{"brand": {"name": "A", "name": "B"}}"#, "brand"),
            (
                "brand:\n  name: A\n  branches:\n    - name: X\n      rules:\n        R: {}\n        R: {}\n",
                "brand.branches[0].rules",
            ),
        ] {
            let problem = refused(text);
            assert_eq!(problem.path, path, "{problem:?}");
            assert!(
                problem.message.contains("appears twice") && problem.message.contains("(line "),
                "{problem:?}"
            );
        }
    }

    /// Type and shape problems: each at its path in the document and its line, in words a
    /// person who writes documents reads (no parser options, no internal names).
    #[test]
    fn type_and_shape_problems_name_their_path_and_line() {
        let cases = [
            (
                "brand:\n  name: A\n  zones: Europe/Berlin\n",
                "brand.zones",
                "unknown key 'zones' (known keys: name, id, zone, defaults, hours, calendars, rules, branches) (line 3, column 3)",
            ),
            (
                "brand:\n  name: A\n  branches:\n    - name: X\n      active: yes\n",
                "brand.branches[0].active",
                "expected true or false (line 5, column 15)",
            ),
            (
                "brand:\n  name: A\n  defaults: {failure_threshold: -3}\n",
                "brand.defaults.failure_threshold",
                "expected a whole number, 0 or more (line 3, column 33)",
            ),
            (
                "brand:\n  name: A\n  branches:\n    - name: X\n    - name: Y\n      rules:\n        Queue length:\n          window: {from: \"08:00\"}\n",
                "brand.branches[1].rules[\"Queue length\"].window",
                "'to' is missing (line 8, column 20)",
            ),
            (
                "brand:\n  name: A\n  branches:\n    - name: X\n      rules:\n        Queue length: {jitter_seconds: lots}\n",
                "brand.branches[0].rules[\"Queue length\"].jitter_seconds",
                "expected a whole number, 0 or more (line 6, column 40)",
            ),
            (
                "brand:\n  name: A\n  branches: {}\n",
                "brand.branches",
                "expected a list (line 3, column 13)",
            ),
            (
                "brand: [1, 2]\n",
                "brand",
                "expected keys and values (a mapping) (line 1, column 8)",
            ),
            (
                "catalogue:\n  rules:\n    - name: R\n      workflow: {start_node: d, nodes: {d: {type: detectio}}}\n",
                "catalogue.rules[0].workflow.nodes[\"d\"].type",
                "'detectio' is not one of: detection, business, delay (line 4, column 51)",
            ),
        ];
        for (text, path, message) in cases {
            let problem = refused(text);
            assert_eq!(
                (problem.path.as_str(), problem.message.as_str()),
                (path, message),
                "{text}"
            );
        }
    }

    #[test]
    fn alias_bombs_deep_nesting_and_huge_documents_are_refused() {
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        bomb.push_str("brand: {name: A, branches: *a11}\n");
        refused(&bomb);
        let mut aliases = String::from("brand:\n  name: A\n  branches:\n    - &b {name: X}\n");
        aliases.push_str(&"    - *b\n".repeat(MAX_ALIASES + 1));
        let problem = refused(&aliases);
        assert!(
            problem
                .message
                .starts_with("more than 1000 aliases (`*name`)"),
            "{problem:?}"
        );
        let deep = format!(
            "catalogue: {{action_templates: [{{name: T, kind: detection, config: {{a: {}{}}}}}]}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        let problem = refused(&deep);
        assert!(
            problem
                .message
                .starts_with("nested more than 32 levels deep"),
            "{problem:?}"
        );
        let huge = format!("brand:\n  name: A\n# {}\n", "x".repeat(MAX_DOCUMENT_BYTES));
        assert!(refused(&huge).message.contains("at most"));
        let problem = refused("brand: {name: A}\n---\nbrand: {name: B}\n");
        assert!(
            problem.message.starts_with("one YAML document per file"),
            "{problem:?}"
        );
        refused("\u{0}");
        for problem in [refused(&bomb), refused(&deep), refused(&aliases)] {
            for internal in ["budget", "Options", "{ ", "Recorded"] {
                assert!(!problem.message.contains(internal), "{problem:?}");
            }
        }
    }
}
