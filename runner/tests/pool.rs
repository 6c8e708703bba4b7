//! The worker pool replaces a worker that dies, and the job it held is released.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use res_runner::daemon::config::{Config, Secret};
use res_runner::daemon::queue::Job;
use res_runner::daemon::{Daemon, pool};
use uuid::Uuid;

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
    let handler: pool::Handler = {
        let handled = Arc::clone(&handled);
        Arc::new(move |job: Job| {
            let handled = Arc::clone(&handled);
            Box::pin(async move {
                assert_ne!(job.branch_rule_id, doomed, "this job kills its worker");
                handled.fetch_add(1, Ordering::SeqCst);
            })
        })
    };
    let running = tokio::spawn(pool::run(Arc::clone(&daemon), handler));
    let push = |id: Uuid| {
        daemon
            .queue()
            .push(
                Job {
                    branch_rule_id: id,
                    due_at: Utc::now(),
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
