//! The shutdown marker (reference 000): written at the end of a graceful stop, read and
//! removed at start, so an operator can tell a restart from a crash. Also the signals that
//! start a shutdown and the systemd watchdog.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Daemon;
use crate::plan::file::write_atomic;

/// What the marker holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Marker {
    pub(crate) shutdown_started_at: DateTime<Utc>,
    /// The process that stopped.
    pub(crate) pid: u32,
    /// The signal that stopped it.
    pub(crate) signal: String,
}

/// The marker's path in the state directory.
pub(crate) fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("shutdown-marker.json")
}

/// Writes the marker.
pub(crate) fn write(
    state_dir: &Path,
    shutdown_started_at: DateTime<Utc>,
    signal: &str,
) -> std::io::Result<()> {
    let marker = Marker {
        shutdown_started_at,
        pid: std::process::id(),
        signal: signal.to_owned(),
    };
    let bytes = serde_json::to_vec_pretty(&marker).map_err(std::io::Error::other)?;
    write_atomic(&path(state_dir), &bytes)
}

/// The boot record's path: written at every start, so a later start knows a run existed
/// even if that run was killed before it wrote its first plan file.
pub(crate) fn boot_path(state_dir: &Path) -> PathBuf {
    state_dir.join("boot.json")
}

/// When the file at `path` was last written, if it exists.
fn modified(path: &Path) -> Option<DateTime<Utc>> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .map(DateTime::<Utc>::from)
}

/// Reads and removes the marker, logs how the last run ended, records this boot, and
/// returns how the last run ended as text. A marker older than the last boot record (or
/// than the plan file, for state written before boot records existed) is stale: the
/// process that wrote it stopped gracefully, but a later one ran and ended without one.
pub(crate) fn report_last_stop(state_dir: &Path) -> String {
    let text = last_stop(state_dir);
    let boot = serde_json::json!({"pid": std::process::id(), "started_at": crate::clock::now()});
    if let Err(error) = write_atomic(&boot_path(state_dir), boot.to_string().as_bytes()) {
        tracing::warn!(%error, "cannot write the boot record; a crash of this run may be reported as a first start");
    }
    text
}

fn last_stop(state_dir: &Path) -> String {
    let marker_path = path(state_dir);
    let plan_written = modified(&state_dir.join("plan.json"));
    let booted = modified(&boot_path(state_dir));
    let text = match std::fs::read(&marker_path) {
        Ok(bytes) => match serde_json::from_slice::<Marker>(&bytes) {
            Ok(marker)
                if booted.is_some_and(|at| at > marker.shutdown_started_at)
                    || plan_written.is_some_and(|at| {
                        at > marker.shutdown_started_at + chrono::TimeDelta::seconds(60)
                    }) =>
            {
                tracing::warn!(marker_at = %marker.shutdown_started_at, plan_written = ?plan_written, booted = ?booted, "stale shutdown marker (older than the last start or plan write): the last run ended without a graceful shutdown");
                format!(
                    "crash: stale shutdown marker from {} (pid {}); a later run started and ended without one",
                    marker.shutdown_started_at.to_rfc3339(),
                    marker.pid
                )
            }
            Ok(marker) => {
                tracing::info!(pid = marker.pid, signal = %marker.signal, at = %marker.shutdown_started_at, "last stop was graceful");
                format!(
                    "graceful: pid {} stopped on {} at {}",
                    marker.pid,
                    marker.signal,
                    marker.shutdown_started_at.to_rfc3339()
                )
            }
            Err(error) => {
                tracing::warn!(%error, path = %marker_path.display(), "unreadable shutdown marker; treating the last stop as a crash");
                "crash (the shutdown marker was unreadable)".to_owned()
            }
        },
        Err(_) if plan_written.is_some() || booted.is_some() => {
            tracing::warn!(
                "no shutdown marker: the last run ended without a graceful shutdown (crash, kill -9 or power loss)"
            );
            "crash: no shutdown marker".to_owned()
        }
        Err(_) => "first start".to_owned(),
    };
    let _ = std::fs::remove_file(&marker_path);
    text
}

/// Waits for SIGTERM or SIGINT and names it.
pub(crate) async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// Pings the systemd watchdog at half its interval while the write thread and the
/// workers are alive, so systemd restarts a wedged runner.
pub(crate) async fn watchdog(daemon: Arc<Daemon>) {
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return;
    };
    let mut tick = tokio::time::interval(interval / 2);
    loop {
        tick.tick().await;
        let writer = daemon.plan.writer_stats();
        let healthy = writer.alive.load(std::sync::atomic::Ordering::SeqCst)
            && daemon.metrics.alive_workers.get() > 0;
        if healthy {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
        } else {
            tracing::error!("unhealthy (writer or workers gone): not petting the watchdog");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_start_crash_graceful_and_stale_are_told_apart() {
        let dir = std::env::temp_dir().join(format!("res-marker-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(report_last_stop(&dir), "first start");
        // Killed before it wrote any plan file: its boot record still tells.
        assert_eq!(report_last_stop(&dir), "crash: no shutdown marker");
        write(&dir, crate::clock::now(), "SIGTERM").expect("marker");
        assert!(report_last_stop(&dir).starts_with("graceful: pid "));
        assert!(!path(&dir).exists(), "the marker is removed once read");
        // A marker from before the last start is stale.
        write(
            &dir,
            crate::clock::now() - chrono::TimeDelta::hours(1),
            "SIGTERM",
        )
        .expect("marker");
        assert!(report_last_stop(&dir).starts_with("crash: stale shutdown marker"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
