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
pub struct Marker {
    /// When shutdown began.
    pub shutdown_started_at: DateTime<Utc>,
    /// The process that stopped.
    pub pid: u32,
    /// The signal that stopped it.
    pub signal: String,
}

/// The marker's path in the state directory.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("shutdown-marker.json")
}

/// Writes the marker.
pub fn write(
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

/// Reads and removes the marker, logs how the last run ended, and returns that as text.
/// A marker older than the plan file is stale: the process that wrote it stopped
/// gracefully, but a later one wrote the plan and then ended without a marker.
pub fn report_last_stop(state_dir: &Path) -> String {
    let marker_path = path(state_dir);
    let plan_written = std::fs::metadata(state_dir.join("plan.json"))
        .and_then(|m| m.modified())
        .ok()
        .map(DateTime::<Utc>::from);
    let text = match std::fs::read(&marker_path) {
        Ok(bytes) => match serde_json::from_slice::<Marker>(&bytes) {
            Ok(marker)
                if plan_written.is_some_and(|at| {
                    at > marker.shutdown_started_at + chrono::TimeDelta::seconds(60)
                }) =>
            {
                tracing::warn!(marker_at = %marker.shutdown_started_at, plan_written = ?plan_written, "stale shutdown marker (older than the plan file): the last run ended without a graceful shutdown");
                format!(
                    "crash: stale shutdown marker from {} (pid {}); the plan was written later",
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
        Err(_) if plan_written.is_some() => {
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
pub async fn wait_for_signal() -> &'static str {
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
pub async fn watchdog(daemon: Arc<Daemon>) {
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
