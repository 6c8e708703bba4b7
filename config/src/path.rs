//! Paths into a document as problems name them: `brand.branches[3].rules["Queue length"].window.to`.

use std::fmt::Write;

/// Where in the document, built up as validation walks it.
#[derive(Debug, Clone)]
pub(crate) struct Path(String);

impl Path {
    pub(crate) fn root(name: &str) -> Path {
        Path(name.to_owned())
    }

    /// `self.field`.
    pub(crate) fn field(&self, field: &str) -> Path {
        Path(format!("{}.{field}", self.0))
    }

    /// `self[i]`.
    pub(crate) fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    /// `self["key"]`, the key quoted as JSON so any name reads unambiguously.
    pub(crate) fn key(&self, key: &str) -> Path {
        let mut text = self.0.clone();
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("{key:?}"));
        let _ = write!(text, "[{quoted}]");
        Path(text)
    }

    /// `self` followed by a path written below it (`.headers.Authorization`, `[0]`).
    pub(crate) fn suffixed(&self, rest: &str) -> Path {
        Path(format!("{}{rest}", self.0))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}
