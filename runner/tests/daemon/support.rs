//! A site for daemon tests: real functions on a real PostgreSQL, a switchable TCP proxy in
//! front of them (to take the cloud away), and `res-runner run` as a child process.

use std::path::{Path, PathBuf};
use std::process::Command;

use chrono::{DateTime, Utc};
use res_tests::functions::{RuleSpec, Seed, TestApp};
pub use res_tests::processes::{Runner, RunnerSpec, eventually};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use uuid::Uuid;

/// A TCP proxy that forwards to the functions while up and cuts every connection while
/// down (the runner sees connection errors, as when a site loses its uplink).
pub struct Proxy {
    /// `http://127.0.0.1:<port>/functions/v1`.
    pub url: String,
    up: watch::Sender<bool>,
}

impl Proxy {
    /// Starts forwarding to `target` (`host:port`).
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!(
            "http://{}/functions/v1",
            listener.local_addr().expect("addr")
        );
        let (up, watch) = watch::channel(true);
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let mut watch = watch.clone();
                let target = target.clone();
                tokio::spawn(async move {
                    if !*watch.borrow() {
                        return;
                    }
                    let Ok(mut outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = watch.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Proxy { url, up }
    }

    /// Takes the functions away (or brings them back).
    pub fn set_up(&self, up: bool) {
        let _ = self.up.send(up);
    }
}

/// The cloud side of a test.
pub struct Site {
    /// The functions and their database.
    pub app: TestApp,
    /// The proxy runners talk through.
    pub proxy: Proxy,
    /// The branch all rules belong to.
    pub branch: Uuid,
    /// A runner token for it.
    pub token: String,
    /// Temporary directory for runners' state and logs.
    pub dir: PathBuf,
}

impl Site {
    /// Functions, a proxy, a brand and a branch.
    pub async fn start() -> Site {
        res_tests::functions::install_tls();
        let app = TestApp::start().await;
        let seed = Seed::new(&app.pool);
        let branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
        let token = app.runner_token(&[branch]).await;
        let proxy = Proxy::start(app.base.trim_start_matches("http://").to_owned()).await;
        let dir = std::env::temp_dir().join(format!("res-daemon-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("test dir");
        Site {
            app,
            proxy,
            branch,
            token,
            dir,
        }
    }

    /// A rule due at `next_run_time` whose workflow runs `script` as a command detector and
    /// records a violation when it reports `violations > 0`.
    pub async fn rule(&self, cron: &str, next_run_time: DateTime<Utc>, script: &str) -> Uuid {
        Seed::new(&self.app.pool)
            .command_rule(
                self.branch,
                RuleSpec {
                    cron: Some(cron),
                    next_run_time: Some(next_run_time),
                    ..RuleSpec::default()
                },
                script,
            )
            .await
    }

    /// Executions of a rule: (id, status, retry_of, offline).
    pub async fn executions(&self, rule: Uuid) -> Vec<(Uuid, String, Option<Uuid>, bool)> {
        sqlx::query_as(
            "SELECT id, status, retry_of, offline FROM executions WHERE branch_rule_id = $1 \
             ORDER BY scheduled_at",
        )
        .bind(rule)
        .fetch_all(&self.app.pool)
        .await
        .expect("executions")
    }

    /// The rule's `(next_run_time, last_run_time, run_count, is_currently_running)`.
    pub async fn rule_row(
        &self,
        rule: Uuid,
    ) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>, i64, bool) {
        res_tests::functions::rule_row(&self.app.pool, rule).await
    }

    /// Replaces the script of every detection template.
    pub async fn set_detector(&self, script: &str) {
        res_tests::functions::set_detector(&self.app.pool, script).await;
    }

    /// Violations recorded for a rule.
    pub async fn violations(&self, rule: Uuid) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM violations WHERE branch_rule_id = $1")
            .bind(rule)
            .fetch_one(&self.app.pool)
            .await
            .expect("violations")
    }
}

/// Prints a detection result; `sleep` seconds first.
pub fn detector(sleep: f64, violations: u32) -> String {
    format!(
        "cat >/dev/null; sleep {sleep}; echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": {violations}}}'"
    )
}

/// A runner named `name` for this site with short intervals; `extra` overrides settings.
pub fn runner(site: &Site, name: &str, extra: &[(&str, &str)]) -> Runner {
    runner_with_env(site, name, extra, &[])
}

/// [`runner`] with more environment variables (e.g. systemd's).
pub fn runner_with_env(
    site: &Site,
    name: &str,
    extra: &[(&str, &str)],
    env: &[(&str, &str)],
) -> Runner {
    Runner::start(
        RunnerSpec {
            binary: Path::new(env!("CARGO_BIN_EXE_res-runner")),
            dir: &site.dir,
            name,
            functions_url: &site.proxy.url,
            token: &site.token,
        },
        extra,
        env,
    )
}

/// Runs `res-runner plan ...` against a state directory.
pub fn plan_command(state_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_res-runner"))
        .arg("plan")
        .args(args)
        .arg("--state-dir")
        .arg(state_dir)
        .output()
        .expect("res-runner plan runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
