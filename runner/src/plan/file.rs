//! The plan on disk: written to a temporary file, fsynced and renamed over the old one, so
//! a crash leaves either the old plan or the new, never half of one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Plan;

/// The file format version; a file of another version is ignored (and refetched).
pub(crate) const FORMAT_VERSION: u32 = 1;

/// What is stored.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PlanFile {
    /// [`FORMAT_VERSION`].
    pub(crate) version: u32,
    /// When it was written.
    pub(crate) saved_at: DateTime<Utc>,
    pub(crate) plan: Plan,
}

/// Why a plan file could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanFileError {
    /// Reading failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The content is not a plan (truncated, corrupt, another program's file).
    #[error("{path} is not a valid plan file ({message}); it is ignored")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
}

/// Reads a plan file; `Ok(None)` when there is none.
pub(crate) fn load(path: &Path) -> Result<Option<PlanFile>, PlanFileError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(PlanFileError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut file: PlanFile =
        serde_json::from_slice(&bytes).map_err(|e| PlanFileError::Corrupt {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    if file.version != FORMAT_VERSION {
        return Err(PlanFileError::Corrupt {
            path: path.to_owned(),
            message: format!("format version {}, expected {FORMAT_VERSION}", file.version),
        });
    }
    // Each entry's branch hours are parsed from the lookups, not written with it.
    file.plan.link_hours(None);
    Ok(Some(file))
}

/// Writes `bytes` to `path` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with(path, bytes, 0o666)
}

/// [`write_atomic`] to a file only its owner may read or write (0600).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with(path, bytes, 0o600)
}

/// Writes through a temporary file created with `mode` (less the umask).
fn write_with(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true).mode(mode);
    let tmp = path.with_extension("tmp");
    // A leftover temporary file keeps its old mode; start afresh.
    let _ = fs::remove_file(&tmp);
    let written = options.open(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(error) = written {
        // A full disk keeps nothing half-written: what little space there is stays free.
        let _ = fs::remove_file(&tmp);
        return Err(error);
    }
    fs::rename(&tmp, path)?;
    // The rename itself must reach the disk, or a power cut can bring back the old name.
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Serialises a plan as a plan file.
pub fn encode(plan: &Plan, now: DateTime<Utc>) -> serde_json::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Borrowed<'a> {
        version: u32,
        saved_at: DateTime<Utc>,
        plan: &'a Plan,
    }
    serde_json::to_vec(&Borrowed {
        version: FORMAT_VERSION,
        saved_at: now,
        plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_plan_reads_back_and_a_broken_one_is_reported() {
        let dir = std::env::temp_dir().join(format!("res-plan-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("plan.json");
        assert!(load(&path).expect("no file is fine").is_none());
        let plan = Plan {
            cursor: Some("c9".into()),
            ..Plan::default()
        };
        write_atomic(&path, &encode(&plan, crate::clock::now()).expect("encodes")).expect("writes");
        let back = load(&path).expect("reads").expect("a plan");
        assert_eq!(back.plan.cursor.as_deref(), Some("c9"));

        let bytes = fs::read(&path).expect("bytes");
        fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
        let error = load(&path).expect_err("truncated");
        assert!(
            error.to_string().contains("not a valid plan file"),
            "{error}"
        );
        fs::write(&path, br#"{"version": 7, "saved_at": "2026-01-01T00:00:00Z", "plan": {"workflows": {}, "lookups": {"branches": {}, "rules": {}, "brands": {}, "brand_rules": {}, "action_details": {}, "action_templates": {}}}}"#).expect("write");
        let error = load(&path).expect_err("other version");
        assert!(error.to_string().contains("format version 7"), "{error}");
        fs::remove_dir_all(&dir).ok();
    }
}
