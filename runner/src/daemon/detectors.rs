//! Detector process groups on disk. The `command` executor runs each program as the leader
//! of its own process group; while it runs, `state_dir/detectors/<group>` records it with
//! the leader's start time. A runner killed with `kill -9` cannot stop its detectors, so
//! the next boot ends every recorded group whose leader is still the same process (same
//! start time, so a recycled pid is never signalled): SIGTERM, then SIGKILL after the
//! grace period. Between the crash and that restart they keep running.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::workflow::executors::ProcessLedger;

/// The record directory of one state directory.
#[derive(Debug)]
pub(crate) struct DetectorLedger {
    dir: PathBuf,
}

impl DetectorLedger {
    /// Opens (creating) `state_dir/detectors`.
    pub(crate) fn open(state_dir: &Path) -> io::Result<DetectorLedger> {
        let dir = state_dir.join("detectors");
        fs::create_dir_all(&dir)?;
        Ok(DetectorLedger { dir })
    }

    /// Ends the groups an earlier boot left running; returns how many were still alive.
    pub(crate) fn end_orphans(&self, grace: Duration) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut alive = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let recorded = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse::<i32>().ok())
                .zip(fs::read_to_string(&path).ok());
            if let Some((group, started)) = recorded
                && start_time(group).as_deref() == Some(started.trim())
            {
                tracing::warn!(
                    process_group = group,
                    "a detector of an earlier boot is still running: ending it"
                );
                let _ = killpg(Pid::from_raw(group), Signal::SIGTERM);
                alive.push(group);
            }
            let _ = fs::remove_file(&path);
        }
        let deadline = Instant::now() + grace;
        while alive.iter().any(|g| group_exists(*g)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        for group in &alive {
            if group_exists(*group) {
                let _ = killpg(Pid::from_raw(*group), Signal::SIGKILL);
            }
        }
        alive.len()
    }
}

impl ProcessLedger for DetectorLedger {
    fn started(&self, group: i32) {
        let Some(started) = start_time(group) else {
            return;
        };
        if let Err(error) =
            crate::plan::file::write_atomic(&self.dir.join(group.to_string()), started.as_bytes())
        {
            tracing::warn!(%error, "cannot record a detector's process group; a crash would leave it running");
        }
    }

    fn ended(&self, group: i32) {
        let _ = fs::remove_file(self.dir.join(group.to_string()));
    }
}

/// Whether any process is still in `group`.
fn group_exists(group: i32) -> bool {
    killpg(Pid::from_raw(group), None).is_ok()
}

/// The start time (clock ticks since boot) of process `pid`, from `/proc/<pid>/stat`.
fn start_time(pid: i32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 22 of the whole line is the 20th after the name.
    rest.split_whitespace().nth(19).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn an_orphaned_group_is_ended_and_a_recycled_pid_is_left_alone() {
        let state = std::env::temp_dir().join(format!("res-detectors-{}", uuid::Uuid::new_v4()));
        let ledger = DetectorLedger::open(&state).expect("opens");
        let mut orphan = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let group = i32::try_from(orphan.id()).expect("pid");
        ledger.started(group);
        // A record whose pid now belongs to another process (start time differs).
        fs::write(ledger.dir.join(std::process::id().to_string()), "1").expect("record");
        let ended = DetectorLedger::open(&state)
            .expect("reopens")
            .end_orphans(Duration::from_secs(2));
        assert_eq!(ended, 1);
        let status = orphan.wait().expect("reaped");
        assert!(!status.success(), "killed, not finished: {status}");
        assert_eq!(fs::read_dir(&ledger.dir).expect("dir").count(), 0);
        fs::remove_dir_all(&state).ok();
    }
}
