//! Commands over configuration documents that need no functions: the JSON Schema, and
//! checking a document with the same validation an apply runs.

use std::io::Read;
use std::path::Path;

use res_config::{Catalogue, Document, Problem, Report};
use serde_json::json;

use crate::cli::ConfigCommand;

/// What an offline command printed and whether it succeeded.
pub(crate) struct Outcome {
    pub(crate) output: String,
    pub(crate) ok: bool,
}

/// Runs `resctl config schema|validate`.
pub(crate) fn run(command: &ConfigCommand, json: bool) -> Result<Outcome, String> {
    match command {
        ConfigCommand::Schema => {
            let schema = serde_json::to_string_pretty(&res_config::json_schema())
                .map_err(|e| format!("cannot print the schema: {e}"))?;
            Ok(Outcome {
                output: format!("{schema}\n"),
                ok: true,
            })
        }
        ConfigCommand::Validate { file, catalogue } => {
            let stored = match read_catalogue(catalogue.as_deref(), json)? {
                Ok(stored) => stored,
                Err(outcome) => return Ok(outcome),
            };
            let report = match read_document(file)? {
                Ok(mut document) => {
                    res_config::resolve_names(&mut document, stored.as_ref());
                    res_config::validate(&document, stored.as_ref())
                }
                Err(problem) => Report {
                    errors: vec![problem],
                    warnings: Vec::new(),
                },
            };
            if report.is_valid() {
                Ok(accepted(file, &report.warnings, json))
            } else {
                Ok(refused(file, &report.errors, &report.warnings, json))
            }
        }
        ConfigCommand::Compare {
            from,
            file,
            catalogue,
            prune,
        } => compare(from, file, catalogue.as_deref(), *prune, json),
        ConfigCommand::History { .. } | ConfigCommand::Show { .. } => {
            Err("this command reads the functions; it is not one of the offline ones".into())
        }
    }
}

/// `--catalogue`'s catalogue, or the outcome refusing it.
fn read_catalogue(
    path: Option<&Path>,
    json: bool,
) -> Result<Result<Option<Catalogue>, Outcome>, String> {
    let Some(path) = path else {
        return Ok(Ok(None));
    };
    match read_document(path)? {
        Ok(Document {
            catalogue: Some(catalogue),
            ..
        }) => Ok(Ok(Some(catalogue))),
        Ok(_) => Err(format!("{} has no `catalogue`", path.display())),
        Err(problem) => Ok(Err(refused(path, &[problem], &[], json))),
    }
}

/// Both documents valid, then what turns `from` into `file`.
fn compare(
    from: &Path,
    file: &Path,
    catalogue: Option<&Path>,
    prune: bool,
    json: bool,
) -> Result<Outcome, String> {
    let stored = match read_catalogue(catalogue, json)? {
        Ok(stored) => stored,
        Err(outcome) => return Ok(outcome),
    };
    let mut documents = Vec::new();
    for path in [from, file] {
        let report = match read_document(path)? {
            Ok(mut document) => {
                res_config::resolve_names(&mut document, stored.as_ref());
                let report = res_config::validate(&document, stored.as_ref());
                documents.push(document);
                report
            }
            Err(problem) => Report {
                errors: vec![problem],
                warnings: Vec::new(),
            },
        };
        if !report.is_valid() {
            return Ok(refused(path, &report.errors, &report.warnings, json));
        }
    }
    for document in &mut documents {
        document.normalize();
    }
    let [before, after] = documents.as_slice() else {
        return Err("both documents are needed".into());
    };
    let diff = res_config::diff(before, after, stored.as_ref(), chrono::Utc::now(), prune);
    let output = if json {
        serde_json::to_string_pretty(&diff).map_err(|e| format!("cannot print the diff: {e}"))?
            + "\n"
    } else {
        diff.to_string()
    };
    Ok(Outcome { output, ok: true })
}

/// The file's text parsed, or the parse problem; `Err` when it cannot be read at all.
fn read_document(path: &Path) -> Result<Result<Document, Problem>, String> {
    Ok(res_config::parse(&read_text(path)?))
}

/// A document's text (`-`: standard input), read up to one byte past the largest
/// document so the parser can say it is too large. Unreadable input and bytes that are not
/// UTF-8 text are both bad input (exit 2), named with the file.
pub(crate) fn read_text(path: &Path) -> Result<String, String> {
    let limit = res_config::MAX_DOCUMENT_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    let stdin = path == Path::new("-");
    let name = if stdin {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    };
    let read = if stdin {
        std::io::stdin().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|e| format!("cannot read {name}: {e}"))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{name} is not UTF-8 text (at byte offset {}): documents are YAML or JSON in UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

fn lines(kind: &str, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("{kind}: {}: {}\n", p.path, p.message))
        .collect()
}

fn as_json(valid: bool, errors: &[Problem], warnings: &[Problem]) -> String {
    let list = |problems: &[Problem]| {
        problems
            .iter()
            .map(|p| json!({"path": p.path, "message": p.message}))
            .collect::<Vec<_>>()
    };
    let body = json!({"valid": valid, "errors": list(errors), "warnings": list(warnings)});
    format!("{body:#}\n")
}

fn accepted(file: &Path, warnings: &[Problem], json: bool) -> Outcome {
    let output = if json {
        as_json(true, &[], warnings)
    } else {
        format!(
            "{}{} is valid ({} warning{})\n",
            lines("warning", warnings),
            file.display(),
            warnings.len(),
            if warnings.len() == 1 { "" } else { "s" }
        )
    };
    Outcome { output, ok: true }
}

fn refused(file: &Path, errors: &[Problem], warnings: &[Problem], json: bool) -> Outcome {
    let output = if json {
        as_json(false, errors, warnings)
    } else {
        format!(
            "{}{}{} has {} problem{}; nothing was checked against the functions\n",
            lines("error", errors),
            lines("warning", warnings),
            file.display(),
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        )
    };
    Outcome { output, ok: false }
}
