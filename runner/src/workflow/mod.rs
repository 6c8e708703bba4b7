//! The workflow engine: what a claimed branch rule runs.
//!
//! A [`res_workflow::Workflow`] is loaded and checked once (by the checker the functions
//! share); the [`engine::Engine`] runs it for an
//! execution with [`executors`] behind one trait, stops it at the deadline, the runtime
//! limit or on request ([`stop`]), pauses it at long delays ([`state`]) and reports every
//! node it ran ([`report`]).

pub mod engine;
pub mod executors;
pub(crate) mod lines;
pub(crate) mod metrics;
pub(crate) mod output;
pub mod prepare;
pub mod report;
pub mod secrets;
pub mod services;
pub(crate) mod state;
pub(crate) mod stop;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Lines of the engine's sources that name a module of the crate the engine must not
    /// know (the needles are built here so this file does not match itself).
    fn forbidden_references(dir: &Path, found: &mut Vec<String>) {
        let needles: Vec<String> = ["daemon", "plan", "cloud", "commands"]
            .iter()
            .map(|module| format!("{}::{module}", "crate"))
            .collect();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                forbidden_references(&path, found);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (n, line) in text.lines().enumerate() {
                if needles.iter().any(|needle| line.contains(needle.as_str())) {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }

    #[test]
    fn the_engine_knows_nothing_of_the_daemon_the_plan_or_the_cloud_client() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/workflow");
        assert!(
            dir.join("engine.rs").exists(),
            "sources at {}",
            dir.display()
        );
        let mut found = Vec::new();
        forbidden_references(&dir, &mut found);
        assert!(found.is_empty(), "{found:#?}");
    }
}
