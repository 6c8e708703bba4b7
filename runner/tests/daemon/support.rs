//! A site for daemon tests: real functions on a real PostgreSQL, a switchable TCP proxy in
//! front of them (to take the cloud away), and `res-runner run` as a child process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use res_tests::functions::{RuleSpec, Seed, TestApp};
use serde_json::{Value, json};
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
        let seed = Seed::new(&self.app.pool);
        let rule = seed
            .branch_rule(
                self.branch,
                RuleSpec {
                    cron: Some(cron),
                    next_run_time: Some(next_run_time),
                    ..RuleSpec::default()
                },
            )
            .await;
        let detect = seed
            .template(
                "Queue detector",
                "detection",
                &json!({"executor": "command", "program": "sh", "args": ["-c", script]}),
            )
            .await;
        let violation = seed
            .template(
                "Queue violation",
                "business",
                &json!({"kind": "queue_too_long"}),
            )
            .await;
        seed.workflow(
            rule,
            &json!({
                "start_node": "detect",
                "nodes": {
                    "detect": {"type": "detection", "action_template_id": detect},
                    "violation": {"type": "business", "action": "create_violation", "action_template_id": violation}
                },
                "edges": [{"from": "detect", "to": "violation", "condition": "violations > 0"}]
            }),
        )
        .await;
        rule
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
        sqlx::query_as(
            "SELECT next_run_time, last_run_time, run_count, is_currently_running \
             FROM branch_rules WHERE id = $1",
        )
        .bind(rule)
        .fetch_one(&self.app.pool)
        .await
        .expect("rule row")
    }

    /// Replaces the script of every detection template.
    pub async fn set_detector(&self, script: &str) {
        sqlx::query(
            "UPDATE action_templates SET config = jsonb_set(config, '{args,1}', to_jsonb($1::text)) \
             WHERE kind = 'detection'",
        )
        .bind(script)
        .execute(&self.app.pool)
        .await
        .expect("detector script");
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

/// A `res-runner run` child process.
pub struct Runner {
    child: Option<Child>,
    /// Its state directory.
    pub state_dir: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// Its status endpoint, `http://127.0.0.1:<port>`.
    pub status: String,
    settings: Vec<(String, String)>,
    env: Vec<(String, String)>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Runner {
    /// Starts a runner named `name` with short intervals; `extra` overrides settings.
    pub fn start(site: &Site, name: &str, extra: &[(&str, &str)]) -> Runner {
        Runner::start_with_env(site, name, extra, &[])
    }

    /// [`Runner::start`] with more environment variables (e.g. systemd's).
    pub fn start_with_env(
        site: &Site,
        name: &str,
        extra: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> Runner {
        let state_dir = site.dir.join(name);
        let port = free_port();
        let mut settings: Vec<(String, String)> = vec![
            ("FUNCTIONS_URL", site.proxy.url.as_str()),
            ("TOKEN", site.token.as_str()),
            ("RUNNER_ID", name),
            ("PLAN_REFRESH_SECONDS", "1"),
            ("PLAN_MIN_WRITE_INTERVAL_SECONDS", "0"),
            ("RECENT_SECONDS", "1"),
            ("LEASE_SECONDS", "3"),
            ("REQUEST_TIMEOUT_SECONDS", "3"),
            ("SHUTDOWN_GRACE_SECONDS", "5"),
            ("STOP_GRACE_SECONDS", "1"),
            ("WORKERS", "4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        settings.push(("STATE_DIR".into(), state_dir.display().to_string()));
        settings.push(("STATUS_LISTEN".into(), format!("127.0.0.1:{port}")));
        for (k, v) in extra {
            settings.retain(|(key, _)| key != k);
            settings.push(((*k).to_owned(), (*v).to_owned()));
        }
        let mut runner = Runner {
            child: None,
            log: site.dir.join(format!("{name}.log")),
            state_dir,
            status: format!("http://127.0.0.1:{port}"),
            settings,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        runner.spawn();
        runner
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_res-runner"));
        command
            .arg("run")
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log));
        for (k, v) in &self.settings {
            command.env(format!("RES_RUNNER_{k}"), v);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        self.child = Some(command.spawn().expect("res-runner starts"));
    }

    /// Starts it again after a stop.
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// SIGTERM, then waits; returns whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL (a crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET <status>/<path>`, `None` while it is not listening.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", self.status))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// `/status` as JSON.
    pub async fn status(&self) -> Option<Value> {
        let (_, body) = self.get("/status").await?;
        serde_json::from_str(&body).ok()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `check` until it holds or `timeout` passes; panics with `what` then.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
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
