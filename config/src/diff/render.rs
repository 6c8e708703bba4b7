//! A diff as a person reads it, Terraform-style: `+` create, `~` change, `-` archive or
//! delete, fields `before → after`, then the next runs.

use std::fmt::{self, Write};

use super::{ChangeAction, Diff};

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        for change in &self.changes {
            let (mark, note) = match change.action {
                ChangeAction::Create if change.restored => {
                    ('+', " (restored: back under its id, with its history)")
                }
                ChangeAction::Create => ('+', ""),
                ChangeAction::Update => ('~', ""),
                ChangeAction::Archive => (
                    '-',
                    " (archived: kept with its history; --prune deletes it)",
                ),
                ChangeAction::Delete => ('-', " (deleted with its history)"),
            };
            let _ = writeln!(out, "{mark} {} '{}'{note}", change.kind, change.name);
            for field in &change.fields {
                let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(not set)".into());
                match change.action {
                    ChangeAction::Create => {
                        let _ = writeln!(out, "    {}: {}", field.field, show(&field.after));
                    }
                    _ => {
                        let _ = writeln!(
                            out,
                            "    {}: {} → {}",
                            field.field,
                            show(&field.before),
                            show(&field.after)
                        );
                    }
                }
            }
            if let Some(runs) = &change.runs {
                let _ = writeln!(out, "    next runs ({}):", runs.zone);
                if !runs.before.is_empty() {
                    let _ = writeln!(out, "      before: {}", runs.before.join(", "));
                }
                let _ = writeln!(out, "      after:  {}", runs.after.join(", "));
            }
        }
        let (created, changed, removed) = self.counts();
        let restored = self.changes.iter().filter(|c| c.restored).count();
        let restored = if restored > 0 {
            format!(" ({restored} restored)")
        } else {
            String::new()
        };
        if self.changes.is_empty() {
            out.push_str("No changes: the document says what is stored.\n");
        } else {
            let _ = writeln!(
                out,
                "{created} to create{restored}, {changed} to change, {removed} to archive or delete."
            );
        }
        f.write_str(&out)
    }
}
