//! The worker pool: `workers` tasks take jobs from the queue; one that dies (a panic) is
//! noticed, logged and replaced, and `alive_workers` says how many there are.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::task::JoinSet;

use super::Daemon;
use super::queue::Job;

/// What a worker does with a job.
pub type Handler = Arc<dyn Fn(Job) -> BoxFuture<'static, ()> + Send + Sync>;

/// Runs the pool until shutdown and an empty queue.
pub async fn run(daemon: Arc<Daemon>, handler: Handler) {
    let mut workers = JoinSet::new();
    for n in 0..daemon.config.workers {
        workers.spawn(worker(Arc::clone(&daemon), Arc::clone(&handler), n));
    }
    let mut next = daemon.config.workers;
    daemon.metrics.alive_workers.set(workers.len() as i64);
    while let Some(ended) = workers.join_next().await {
        daemon.metrics.alive_workers.set(workers.len() as i64);
        match ended {
            Err(error) if error.is_panic() => {
                tracing::error!("a worker died (panic); starting a replacement");
                daemon.metrics.worker_restarts.inc();
                if !daemon.shutdown.is_cancelled() {
                    workers.spawn(worker(Arc::clone(&daemon), Arc::clone(&handler), next));
                    next += 1;
                    daemon.metrics.alive_workers.set(workers.len() as i64);
                }
            }
            Err(error) => tracing::error!(%error, "a worker ended abnormally"),
            Ok(()) => {}
        }
    }
    daemon.metrics.alive_workers.set(0);
}

async fn worker(daemon: Arc<Daemon>, handler: Handler, n: usize) {
    tracing::debug!(worker = n, "worker started");
    loop {
        let added = daemon.job_added.notified();
        tokio::pin!(added);
        added.as_mut().enable();
        let next = daemon.queue().pop();
        if let Some(job) = next {
            // Another worker may be idle while this one runs.
            daemon.job_added.notify_one();
            let mut guard = JobGuard {
                daemon: &daemon,
                job,
                completed: false,
            };
            handler(job).await;
            guard.completed = true;
            drop(guard);
            continue;
        }
        if daemon.shutdown.is_cancelled() {
            return;
        }
        tokio::select! {
            () = added => {}
            () = daemon.shutdown.cancelled() => {}
        }
    }
}

/// Frees the job in the queue and the plan however the handler ends, a panic included.
/// (A panicking task's future is dropped by the runtime after the panic was caught, so
/// `thread::panicking()` cannot tell; `completed` does.)
struct JobGuard<'a> {
    daemon: &'a Daemon,
    job: Job,
    completed: bool,
}

impl Drop for JobGuard<'_> {
    fn drop(&mut self) {
        let id = self.job.branch_rule_id;
        self.daemon.queue().finish(id, std::time::Instant::now());
        if !self.completed {
            self.daemon.plan.set_running(id, false, chrono::Utc::now());
        }
        self.daemon.job_added.notify_one();
        self.daemon.plan.notify().notify_waiters();
    }
}

/// Resolves when no job is queued or running.
pub async fn drained(daemon: &Daemon) {
    loop {
        let changed = daemon.plan.notify().notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        {
            let queue = daemon.queue();
            if queue.is_empty() && queue.active() == 0 {
                return;
            }
        }
        tokio::select! {
            () = changed => {}
            () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
        }
    }
}
