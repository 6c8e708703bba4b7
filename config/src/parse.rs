//! Reading a document: YAML (JSON is YAML too, so both go through one parser and one set of
//! limits), refused whole with a located message when it cannot be read.

use res_workflow::Problem;
use serde_saphyr::options::DuplicateKeyPolicy;

use crate::document::Document;

/// The largest document read, in bytes: a 2,000-branch brand with 20 rules at each is
/// about 4.7 MB as written by hand and 9 MB as exported (every object with its id).
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// Most objects (templates, rules, brand rules, branches, branch rules) in one document.
pub const MAX_OBJECTS: usize = 60_000;

/// Reads a YAML or JSON document. Duplicate keys, alias bombs, deep nesting and documents
/// past [`MAX_DOCUMENT_BYTES`] are refused before anything is built from them.
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
            max_events: 4_000_000,
            max_nodes: 2_000_000,
            max_depth: 32,
            max_documents: 1,
            max_aliases: 1_000,
            max_anchors: 1_000,
        },
        duplicate_keys: DuplicateKeyPolicy::Error,
        strict_booleans: true,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options::<Document>(text, options).map_err(|error| {
        let at = error
            .location()
            .map(|l| format!("line {}, column {}", l.line(), l.column()))
            .unwrap_or_else(|| "$".to_owned());
        Problem {
            path: at,
            message: first_line(&error.to_string()),
        }
    })
}

/// The message without the parser's trailing context lines.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
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
        for text in [
            "brand:\n  name: A\n  name: B\n",
            r#"{"brand": {"name": "A", "name": "B"}}"#,
            "brand:\n  name: A\n  branches:\n    - name: X\n      rules:\n        R: {}\n        R: {}\n",
        ] {
            let problem = refused(text);
            assert!(
                problem.message.to_lowercase().contains("duplicate"),
                "{problem:?}"
            );
            assert!(problem.path.starts_with("line "), "{problem:?}");
        }
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_refused_with_their_place() {
        let problem = refused("brand:\n  name: A\n  zones: Europe/Berlin\n");
        assert!(problem.message.contains("zones"), "{problem:?}");
        assert_eq!(problem.path, "line 3, column 3");
        let problem = refused("brand:\n  name: A\n  branches:\n    - name: X\n      active: yes\n");
        assert!(problem.path.starts_with("line 5"), "{problem:?}");
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
        let deep = format!(
            "brand: {{name: A, branches: {}{}}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        refused(&deep);
        let huge = format!("brand:\n  name: A\n# {}\n", "x".repeat(MAX_DOCUMENT_BYTES));
        assert!(refused(&huge).message.contains("at most"));
        refused("brand: {name: A}\n---\nbrand: {name: B}\n");
        refused("\u{0}");
    }
}
