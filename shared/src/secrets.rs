//! Secrets by name. A configuration never holds a credential: it holds a reference,
//! `${secret:NAME}`, anywhere inside a string (`"Bearer ${secret:analytics-token}"`,
//! `"rtsp://viewer:${secret:camera-17-rtsp}@10.0.0.7/stream"`). The functions store the
//! values sealed and send a site the ones its rules refer to; the runner resolves the
//! references just before an action runs and masks every value in what comes back.
//!
//! The string form (rather than an object such as `{secret: NAME}`) is what lets a secret be
//! part of a URL or a header, which is where credentials live.

use std::collections::BTreeSet;

mod mask;
mod piece;
mod reading;
mod spelling;

pub use mask::{Edges, MIN_PIECE_BYTES, Masker};

use serde_json::Value;

/// Where a reference starts; `}` ends it.
const OPENING: &str = "${secret:";
/// Longest secret name.
pub const MAX_NAME_CHARS: usize = 63;
/// Shortest value: a shorter one could not be masked without garbling every output that
/// happens to contain those characters.
pub const MIN_VALUE_BYTES: usize = 4;
/// Longest value (a private key or a certificate fits).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// What a masked value is replaced by.
pub const MASK: &str = "***";

/// Why a name or a value is refused, in words that name neither the value nor its parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The name breaks the naming rule.
    #[error(
        "'{0}' is not a secret name: 1-63 characters, lower-case letters, digits, '.', '_' and '-', starting with a letter or digit"
    )]
    BadName(String),
    /// A `${secret:` with no closing `}` or an empty name.
    #[error("an unfinished secret reference (write ${{secret:NAME}})")]
    Unfinished,
    /// The value is empty or too short to mask.
    #[error("the value is shorter than {MIN_VALUE_BYTES} bytes (too short to mask in output)")]
    TooShort,
    /// The value is longer than [`MAX_VALUE_BYTES`].
    #[error("the value is longer than {MAX_VALUE_BYTES} bytes")]
    TooLong,
    /// The value holds a NUL byte, which no header, URL or environment variable can carry.
    #[error("the value contains a NUL character")]
    Nul,
    /// A reference names a secret the site was not given.
    #[error("secret '{0}' is not available here (it does not exist, or not for this branch)")]
    Missing(String),
}

/// Checks a secret's name.
pub fn check_name(name: &str) -> Result<(), SecretError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if first_ok && rest_ok && name.len() <= MAX_NAME_CHARS {
        Ok(())
    } else {
        Err(SecretError::BadName(name.chars().take(80).collect()))
    }
}

/// Checks a secret's value.
pub fn check_value(value: &str) -> Result<(), SecretError> {
    if value.len() < MIN_VALUE_BYTES {
        Err(SecretError::TooShort)
    } else if value.len() > MAX_VALUE_BYTES {
        Err(SecretError::TooLong)
    } else if value.contains('\0') {
        Err(SecretError::Nul)
    } else {
        Ok(())
    }
}

/// The names `text` refers to, in order.
pub fn references_in(text: &str) -> Result<Vec<&str>, SecretError> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPENING) {
        let after = &rest[start + OPENING.len()..];
        let end = after.find('}').ok_or(SecretError::Unfinished)?;
        let name = &after[..end];
        if name.is_empty() {
            return Err(SecretError::Unfinished);
        }
        check_name(name)?;
        names.push(name);
        rest = &after[end + 1..];
    }
    Ok(names)
}

/// A reference problem at a JSON path inside a value (`.headers.Authorization`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceProblem {
    /// Where, below the value given.
    pub path: String,
    /// What is wrong.
    pub error: SecretError,
}

/// Every secret `value`'s strings (object keys excluded) refer to, each with its first path.
pub fn references(value: &Value) -> Result<Vec<(String, String)>, ReferenceProblem> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    walk_strings(value, &mut String::new(), &mut |path, text| {
        for name in references_in(text).map_err(|error| ReferenceProblem {
            path: path.to_owned(),
            error,
        })? {
            if seen.insert(name.to_owned()) {
                found.push((name.to_owned(), path.to_owned()));
            }
        }
        Ok(())
    })?;
    Ok(found)
}

fn walk_strings<E>(
    value: &Value,
    path: &mut String,
    visit: &mut impl FnMut(&str, &str) -> Result<(), E>,
) -> Result<(), E> {
    match value {
        Value::String(text) => visit(path, text),
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let walked = walk_strings(item, path, visit);
            path.truncate(len);
            walked
        }),
        Value::Object(fields) => fields.iter().try_for_each(|(key, item)| {
            let len = path.len();
            path.push('.');
            path.push_str(key);
            let walked = walk_strings(item, path, visit);
            path.truncate(len);
            walked
        }),
        _ => Ok(()),
    }
}

/// `text` with each reference replaced by its value.
pub fn resolve_str<'v>(
    text: &str,
    lookup: &impl Fn(&str) -> Option<&'v str>,
) -> Result<String, SecretError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPENING) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPENING.len()..];
        let end = after.find('}').ok_or(SecretError::Unfinished)?;
        let name = &after[..end];
        let value = lookup(name).ok_or_else(|| SecretError::Missing(name.to_owned()))?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Replaces every reference in `value`'s strings by its value; the first missing secret is
/// the error, and `value` is then partly resolved (the caller drops it).
pub fn resolve<'v>(
    value: &mut Value,
    lookup: &impl Fn(&str) -> Option<&'v str>,
) -> Result<(), SecretError> {
    match value {
        Value::String(text) if text.contains(OPENING) => {
            *text = resolve_str(text, lookup)?;
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|item| resolve(item, lookup)),
        Value::Object(fields) => fields
            .iter_mut()
            .try_for_each(|(_, item)| resolve(item, lookup)),
        _ => Ok(()),
    }
}

/// Why `text` looks like a credential written inline, and the fix; `None` when it does not.
pub fn inline_credential(text: &str) -> Option<&'static str> {
    if text.contains(OPENING) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    if let Some(scheme_end) = lower.find("://") {
        let authority = lower[scheme_end + 3..]
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && userinfo.contains(':')
        {
            return Some(
                "a URL with a password written inline: put the password in a secret and write ${secret:NAME} in its place",
            );
        }
    }
    let token_schemes = ["bearer ", "basic ", "token "];
    if token_schemes
        .iter()
        .any(|scheme| lower.starts_with(scheme) && text.len() > scheme.len() + 8)
    {
        return Some(
            "a credential written inline: put it in a secret and write ${secret:NAME} in its place",
        );
    }
    None
}

/// Inline-looking credentials among `value`'s strings, at their paths.
pub fn inline_credentials(value: &Value) -> Vec<(String, &'static str)> {
    let mut found = Vec::new();
    let _ = walk_strings::<()>(value, &mut String::new(), &mut |path, text| {
        if let Some(why) = inline_credential(text) {
            found.push((path.to_owned(), why));
        }
        Ok(())
    });
    found
}

#[cfg(test)]
mod tests;
