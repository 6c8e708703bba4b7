//! Writing a document back as YAML (export), so that reading it gives the same document.

use crate::document::Document;

/// The document as YAML, with a first line saying where it came from.
pub fn to_yaml(document: &Document, header: &str) -> Result<String, String> {
    let body = serde_saphyr::to_string(document).map_err(|e| format!("cannot write YAML: {e}"))?;
    let header: String = header.lines().map(|line| format!("# {line}\n")).collect();
    Ok(format!("{header}{body}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn what_is_written_reads_back_the_same() {
        let text = format!(
            "{}{}",
            include_str!("../../docs/config/catalogue.yaml"),
            include_str!("../../docs/config/brand.yaml")
        );
        let mut document = parse(&text).expect("parses");
        document.base_revision = Some(7);
        let written = to_yaml(&document, "exported\nby a test").expect("writes");
        assert!(
            written.starts_with("# exported\n# by a test\n"),
            "{written}"
        );
        assert_eq!(parse(&written).expect("reads back"), document, "{written}");
    }

    #[test]
    fn window_times_are_written_in_one_form_quoted() {
        let mut document = parse(include_str!("../../docs/config/brand.yaml")).expect("parses");
        document.normalize();
        for rule in document
            .brand
            .iter_mut()
            .flat_map(|b| b.branches.iter_mut())
            .flat_map(|b| b.rules.values_mut())
        {
            rule.window = Some(crate::Window {
                from: "08:30".into(),
                to: "22:00".into(),
            });
        }
        let written = to_yaml(&document, "exported").expect("writes");
        assert!(
            written.contains("from: \"08:30\"") && written.contains("to: \"22:00\""),
            "{written}"
        );
        assert!(!written.contains("from: 08:30") && !written.contains("to: 22:00"));
        let json = serde_json::to_value(&document).expect("json");
        assert_eq!(
            json["brand"]["branches"][0]["rules"]["Empty shelves"]["window"]["from"],
            "08:30"
        );
    }
}
