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
            self.daemon.plan.set_running(id, false, crate::clock::now());
        }
        self.daemon.job_added.notify_one();
        self.daemon.plan.notify().notify_waiters();
    }
}

/// Resolves when no job is queued or running.
pub(crate) async fn drained(daemon: &Daemon) {
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

/// The worker pool replaces a worker that dies, and the job it held is released.
#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use uuid::Uuid;

    use super::{Handler, run};
    use crate::daemon::Daemon;
    use crate::daemon::config::{Config, Secret};
    use crate::daemon::queue::Job;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_worker_that_panics_is_replaced_and_its_job_released() {
        let state_dir = std::env::temp_dir().join(format!("res-pool-{}", Uuid::new_v4()));
        let daemon = Daemon::open(Config {
            functions_url: "http://127.0.0.1:9/functions/v1".into(),
            token: Secret("t".into()),
            runner_id: "pool-test".into(),
            state_dir: state_dir.clone(),
            workers: 2,
            ..Config::default()
        })
        .expect("a daemon");
        let handled = Arc::new(AtomicUsize::new(0));
        let doomed = Uuid::new_v4();
        let handler: Handler = {
            let handled = Arc::clone(&handled);
            Arc::new(move |job: Job| {
                let handled = Arc::clone(&handled);
                Box::pin(async move {
                    assert_ne!(job.branch_rule_id, doomed, "this job kills its worker");
                    handled.fetch_add(1, Ordering::SeqCst);
                })
            })
        };
        let running = tokio::spawn(run(Arc::clone(&daemon), handler));
        let push = |id: Uuid| {
            daemon
                .queue()
                .push(
                    Job {
                        branch_rule_id: id,
                        due_at: crate::clock::now(),
                        scheduled_for: None,
                    },
                    Instant::now(),
                )
                .expect("queued");
            daemon.job_added.notify_one();
        };
        push(doomed);
        let settled = || {
            daemon.metrics.worker_restarts.get() == 1
                && daemon.metrics.alive_workers.get() == 2
                && !daemon.queue().holds(doomed)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !settled() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            daemon.metrics.worker_restarts.get(),
            1,
            "the death was noticed"
        );
        assert_eq!(
            daemon.metrics.alive_workers.get(),
            2,
            "the dead worker was replaced"
        );
        assert!(!daemon.queue().holds(doomed), "its job was released");
        for _ in 0..5 {
            push(Uuid::new_v4());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while handled.load(Ordering::SeqCst) < 5 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(handled.load(Ordering::SeqCst), 5, "the pool keeps working");
        daemon.shutdown.cancel();
        daemon.job_added.notify_waiters();
        tokio::time::timeout(Duration::from_secs(5), running)
            .await
            .expect("the pool stops on shutdown")
            .expect("no panic escapes the pool");
        assert_eq!(daemon.metrics.alive_workers.get(), 0);
        std::fs::remove_dir_all(&state_dir).ok();
    }
}
