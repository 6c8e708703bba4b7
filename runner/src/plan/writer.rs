//! The plan writer: a thread that takes write requests, debounces them, and writes the
//! latest plan atomically, so callers never wait for the disk.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Plan;
use super::file::{encode, write_atomic};
use super::sealed_file::{self, SealKey};

/// Pending write requests beyond this are merged into the one already queued.
pub(crate) const QUEUE_CAPACITY: usize = 64;

/// What the writer reports for monitoring.
#[derive(Debug, Default)]
pub(crate) struct WriterStats {
    /// The thread was started.
    pub(crate) started: AtomicBool,
    /// The thread is running.
    pub(crate) alive: AtomicBool,
    /// Requests not yet written.
    pub(crate) queued: AtomicUsize,
    pub(crate) writes: AtomicUsize,
    /// Writes that failed.
    pub(crate) failures: AtomicUsize,
}

enum Request {
    Write,
    Flush(mpsc::Sender<()>),
}

/// Handle to the writer thread.
#[derive(Debug)]
pub(crate) struct Writer {
    sender: SyncSender<Request>,
    stats: Arc<WriterStats>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Request::Write => "Write",
            Request::Flush(_) => "Flush",
        })
    }
}

impl Writer {
    /// Starts the thread writing `plan` to `path` at most once per `min_interval`, and its
    /// secrets, sealed with `seal`, to `secrets.sealed` beside it when they changed.
    pub(crate) fn start(
        plan: Arc<RwLock<Plan>>,
        path: PathBuf,
        min_interval: Duration,
        seal: Option<SealKey>,
    ) -> std::io::Result<Writer> {
        let (sender, receiver) = mpsc::sync_channel(QUEUE_CAPACITY);
        let stats = Arc::new(WriterStats::default());
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("plan-writer".into())
            .spawn(move || {
                thread_stats.alive.store(true, Ordering::SeqCst);
                let files = Files {
                    plan: &path,
                    secrets: path.with_file_name(SECRETS_FILE),
                    seal: seal.as_ref(),
                };
                run(&plan, &files, min_interval, &receiver, &thread_stats);
                thread_stats.alive.store(false, Ordering::SeqCst);
            })?;
        stats.started.store(true, Ordering::SeqCst);
        Ok(Writer {
            sender,
            stats,
            thread: Some(thread),
        })
    }

    /// Asks for a write (returns at once).
    pub(crate) fn request(&self) {
        match self.sender.try_send(Request::Write) {
            Ok(()) => {
                self.stats.queued.fetch_add(1, Ordering::SeqCst);
                tracing::debug!("💾 Queued execution plan write");
            }
            // A write is queued already; it will carry this change too.
            Err(TrySendError::Full(_)) => {}
            Err(TrySendError::Disconnected(_)) => {
                tracing::error!("the plan writer thread is gone; the plan is not persisted");
            }
        }
    }

    /// Writes now and waits for it (shutdown).
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let (done, wait) = mpsc::channel();
        if self.sender.send(Request::Flush(done)).is_err() {
            return false;
        }
        wait.recv_timeout(timeout).is_ok()
    }

    /// Monitoring figures.
    pub(crate) fn stats(&self) -> Arc<WriterStats> {
        Arc::clone(&self.stats)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the channel ends the thread after its last write.
        let (sender, _) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.sender, sender));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Where the secrets are kept, beside `plan.json`.
pub(crate) const SECRETS_FILE: &str = "secrets.sealed";

/// What the writer writes.
struct Files<'a> {
    plan: &'a std::path::Path,
    secrets: PathBuf,
    seal: Option<&'a SealKey>,
}

fn run(
    plan: &RwLock<Plan>,
    files: &Files<'_>,
    min_interval: Duration,
    receiver: &Receiver<Request>,
    stats: &WriterStats,
) {
    let path = files.plan;
    let mut last_write: Option<Instant> = None;
    // Read from the file at start: nothing to write until they change.
    let mut secrets_written = 0;
    while let Ok(first) = receiver.recv() {
        let mut flushes = Vec::new();
        let mut pending = usize::from(matches!(first, Request::Write));
        if let Request::Flush(done) = first {
            flushes.push(done);
        }
        // Debounce: requests arriving before the interval is over share one write.
        if flushes.is_empty()
            && let Some(at) = last_write
        {
            let wait_until = at + min_interval;
            loop {
                let now = Instant::now();
                if now >= wait_until {
                    break;
                }
                match receiver.recv_timeout(wait_until - now) {
                    Ok(Request::Write) => pending += 1,
                    Ok(Request::Flush(done)) => {
                        flushes.push(done);
                        break;
                    }
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        }
        while let Ok(request) = receiver.try_recv() {
            match request {
                Request::Write => pending += 1,
                Request::Flush(done) => flushes.push(done),
            }
        }
        let started = Instant::now();
        let (encoded, secrets) = {
            let plan = plan
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let secrets = (plan.secrets.generation() != secrets_written)
                .then(|| (plan.secrets.generation(), plan.secrets.stored()));
            (encode(&plan, crate::clock::now()), secrets)
        };
        if let (Some((generation, secrets)), Some(seal)) = (secrets, files.seal) {
            match sealed_file::write(&files.secrets, seal, &secrets) {
                Ok(()) => secrets_written = generation,
                Err(error) => {
                    stats.failures.fetch_add(1, Ordering::SeqCst);
                    tracing::error!(path = %files.secrets.display(), %error, "cannot write the site's secrets (disk space? permissions?)");
                }
            }
        }
        let result = encoded
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_atomic(path, &bytes).map(|()| bytes.len()));
        match result {
            Ok(bytes) => {
                stats.writes.fetch_add(1, Ordering::SeqCst);
                tracing::debug!(
                    bytes,
                    ms = started.elapsed().as_millis() as u64,
                    "plan written"
                );
            }
            Err(error) => {
                stats.failures.fetch_add(1, Ordering::SeqCst);
                tracing::error!(path = %path.display(), %error, "cannot write the execution plan (disk space? permissions?)");
            }
        }
        last_write = Some(Instant::now());
        let queued = stats.queued.load(Ordering::SeqCst);
        let written = pending.min(queued);
        stats.queued.fetch_sub(written, Ordering::SeqCst);
        for done in flushes {
            let _ = done.send(());
        }
    }
}
