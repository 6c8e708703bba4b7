//! `resctl secrets`: a brand's secrets by name. A value is read from standard input or a
//! file — never from the command line, where `ps` and shell history would keep it — and is
//! never printed back.

use std::io::Read;
use std::path::Path;

use chrono::{DateTime, Utc};
use res_shared::secrets::{MAX_VALUE_BYTES, check_name, check_value};
use res_shared::untrusted::Untrusted;
use res_shared::wire::{SecretChange, SecretSetResponse, SecretSummary};

use crate::render::{relative, table};
use crate::resolve::Unresolved;

/// The value in `from` (`-`: standard input), without one trailing newline (`echo` adds
/// one; a value that needs it can be written with `printf`). Checked here as the
/// functions would, so a bad value is refused before it travels.
pub(crate) fn read_value(name: &str, from: &Path) -> Result<String, Unresolved> {
    check_name(name).map_err(|e| Unresolved::BadInput(format!("name: {e}")))?;
    let mut bytes = Vec::new();
    // One byte more than the limit is enough to tell that it is over.
    let limit = u64::try_from(MAX_VALUE_BYTES + 2).unwrap_or(u64::MAX);
    let read = if from == Path::new("-") {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(from).and_then(|file| file.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|e| Unresolved::BadInput(format!("value: cannot read {}: {e}", from.display())))?;
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    let value = String::from_utf8(bytes)
        .map_err(|_| Unresolved::BadInput("value: not UTF-8 text".into()))?;
    check_value(&value).map_err(|e| Unresolved::BadInput(format!("value: {e}")))?;
    Ok(value)
}

/// One row a secret: everything but its value.
pub(crate) fn list(secrets: &[SecretSummary], now: DateTime<Utc>) -> String {
    if secrets.is_empty() {
        return "no secrets\n".to_owned();
    }
    let rows: Vec<Vec<String>> = secrets
        .iter()
        .map(|s| {
            vec![
                Untrusted(&s.brand_name).to_string(),
                s.name.clone(),
                scope(s),
                s.version.to_string(),
                format!(
                    "{} {}",
                    Untrusted(&s.updated_by),
                    relative(s.updated_at, now)
                ),
            ]
        })
        .collect();
    table(&["BRAND", "NAME", "BRANCHES", "VERSION", "SET BY"], &rows)
}

fn scope(secret: &SecretSummary) -> String {
    match &secret.branch_ids {
        None => "all".to_owned(),
        Some(branches) => branches
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// What `secrets set` did.
pub(crate) fn set(answer: &SecretSetResponse) -> String {
    let s = &answer.secret;
    format!(
        "{} secret '{}' (version {}, branches: {})\n",
        if answer.created { "created" } else { "set" },
        s.name,
        s.version,
        scope(s)
    )
}

/// One row a change, newest first.
pub(crate) fn history(name: &str, changes: &[SecretChange], now: DateTime<Utc>) -> String {
    if changes.is_empty() {
        return format!("no changes to a secret '{name}'\n");
    }
    let rows: Vec<Vec<String>> = changes
        .iter()
        .map(|c| {
            vec![
                c.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                relative(c.at, now),
                c.action.clone(),
                c.version.map_or_else(|| "-".to_owned(), |v| v.to_string()),
                Untrusted(&c.by).to_string(),
            ]
        })
        .collect();
    table(&["AT", "WHEN", "CHANGE", "VERSION", "BY"], &rows)
}
