//! The secrets one execution may use: resolved into an action's settings just before the
//! action runs (never into the workflow, the branch rule or expressions), and masked in
//! everything that comes back — results, errors, output and log lines — before it is
//! stored, reported, logged or shown.

use std::borrow::Cow;
use std::collections::BTreeMap;

use res_shared::secrets::{Masker, SecretError};
use serde_json::Value;

/// Values by name, and their masker.
#[derive(Debug, Clone, Default)]
pub struct ActionSecrets {
    values: BTreeMap<String, String>,
    masker: Masker,
}

impl ActionSecrets {
    /// The secrets given, by name.
    pub fn new(values: BTreeMap<String, String>) -> ActionSecrets {
        let masker = Masker::new(values.values().map(String::as_str));
        ActionSecrets { values, masker }
    }

    /// `value` with its references resolved (borrowed when it has none).
    pub(crate) fn resolve<'v>(&self, value: &'v Value) -> Result<Cow<'v, Value>, SecretError> {
        if !mentions(value) {
            return Ok(Cow::Borrowed(value));
        }
        let mut resolved = value.clone();
        res_shared::secrets::resolve(&mut resolved, &|name: &str| {
            self.values.get(name).map(String::as_str)
        })?;
        Ok(Cow::Owned(resolved))
    }

    /// `text` with every value masked.
    pub(crate) fn mask<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.masker.mask(text)
    }

    /// Masks every string of `value`.
    pub(crate) fn mask_json(&self, value: &mut Value) {
        self.masker.mask_json(value);
    }

    /// The masker, for output read on other tasks.
    pub(crate) fn masker(&self) -> &Masker {
        &self.masker
    }
}

/// Whether any string of `value` holds a reference (most settings hold none).
fn mentions(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains("${secret:"),
        Value::Array(items) => items.iter().any(mentions),
        Value::Object(fields) => fields.values().any(mentions),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn settings_are_resolved_only_when_they_refer_and_values_are_masked() {
        let secrets =
            ActionSecrets::new(BTreeMap::from([("cam".to_owned(), "p@ss-w0rd".to_owned())]));
        let plain = json!({"url": "rtsp://10.0.0.7/s"});
        assert!(matches!(secrets.resolve(&plain), Ok(Cow::Borrowed(_))));
        let referring = json!({"url": "rtsp://u:${secret:cam}@10.0.0.7/s"});
        assert_eq!(
            secrets.resolve(&referring).expect("resolves").into_owned(),
            json!({"url": "rtsp://u:p@ss-w0rd@10.0.0.7/s"})
        );
        assert_eq!(
            secrets
                .resolve(&json!(["${secret:other}"]))
                .expect_err("missing"),
            SecretError::Missing("other".into())
        );
        assert_eq!(
            secrets.mask("cannot connect to rtsp://u:p%40ss%2Dw0rd@10.0.0.7"),
            "cannot connect to rtsp://u:***@10.0.0.7"
        );
    }
}
