//! The system's binaries as child processes for tests: `res-runner run` and
//! `res-functions serve`, started with short intervals, stopped with SIGTERM or killed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A free local TCP port (bound and released), never the same one twice in this process.
/// The kernel hands a port just released out again (147 repeats in 2,000 binds on this
/// machine), so tests running side by side were given one port for two servers, and one
/// test talked to the other's. Another process may still take the port first; the servers
/// tests start fail then, and say so.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    for _ in 0..10_000 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if given.insert(port) {
            return port;
        }
    }
    panic!("no port this process was not given already, in 10,000 tries")
}

/// Runs the shell `script` once this test binary has exited, however it exits (a panic, a
/// kill): a detached watchdog that stops what a test started outside its own process tree.
pub(crate) fn after_exit(script: &str) -> std::io::Result<()> {
    let watchdog = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 1; done; {script}",
        me = std::process::id()
    );
    // setsid keeps the watchdog alive when the test runner's process group is interrupted.
    Command::new("setsid")
        .args(["sh", "-c", &watchdog])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
}

/// A workspace binary next to the running test (`target/<profile>/<name>`), as
/// `cargo test --workspace` builds every package's binaries.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join(name))
        .expect("the target directory");
    assert!(
        path.is_file(),
        "{} is not built; run the tests with `cargo test --workspace` (which builds it) or \
         `cargo build --bins` first",
        path.display()
    );
    path
}

/// Runs `command` to its end (standard input closed); `Err` names `what` failed and how,
/// with what it printed.
pub(crate) fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what} could not start: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn log_file(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("log file")
}

/// SIGTERM, then waits up to 30 s (SIGKILL after); whether it exited successfully. A signal
/// sent from here, not by a `kill` program a minimal machine may not have.
pub fn terminate(child: &mut Child) -> bool {
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

/// Where and as whom a runner runs.
#[derive(Debug, Clone, Copy)]
pub struct RunnerSpec<'a> {
    /// The `res-runner` binary.
    pub binary: &'a Path,
    /// Directory for its state (`<dir>/<name>`) and log (`<dir>/<name>.log`).
    pub dir: &'a Path,
    /// Its runner id.
    pub name: &'a str,
    /// The functions' base URL.
    pub functions_url: &'a str,
    pub token: &'a str,
}

/// A `res-runner run` child process.
#[derive(Debug)]
pub struct Runner {
    binary: PathBuf,
    child: Option<Child>,
    /// Its state directory.
    pub state_dir: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// Its status endpoint, `http://127.0.0.1:<port>`.
    pub status: String,
    settings: Vec<(String, String)>,
    env: Vec<(String, String)>,
    /// The runner's network namespace (`ip netns exec <name>`), if not this host's.
    netns: Option<String>,
}

impl Runner {
    /// [`Runner::start`] inside `netns`: its status page listens on the namespace's end.
    pub fn start_in(
        netns: &crate::netns::Netns,
        spec: RunnerSpec<'_>,
        extra: &[(&str, &str)],
    ) -> Runner {
        let port = free_port();
        let listen = format!("{}:{port}", netns.inside);
        let mut extra = extra.to_vec();
        extra.push(("STATUS_LISTEN", &listen));
        let mut runner = Runner::prepare(spec, &extra, &[]);
        runner.status = format!("http://{listen}");
        runner.netns = Some(netns.name.clone());
        runner.restart();
        runner
    }

    /// Starts a runner with test intervals (1 s refresh and plan wait, 3 s lease); `extra` overrides
    /// settings by key (`("WORKERS", "2")` → `RES_RUNNER_WORKERS=2`), `env` adds variables.
    pub fn start(spec: RunnerSpec<'_>, extra: &[(&str, &str)], env: &[(&str, &str)]) -> Runner {
        let mut runner = Runner::prepare(spec, extra, env);
        runner.restart();
        runner
    }

    fn prepare(spec: RunnerSpec<'_>, extra: &[(&str, &str)], env: &[(&str, &str)]) -> Runner {
        let state_dir = spec.dir.join(spec.name);
        let port = free_port();
        let mut settings: Vec<(String, String)> = [
            ("FUNCTIONS_URL", spec.functions_url),
            ("TOKEN", spec.token),
            ("RUNNER_ID", spec.name),
            ("PLAN_REFRESH_SECONDS", "1"),
            // Plan requests wait for changes, a second at most: what time alone changes
            // (an expired lease) still arrives within a second.
            ("PLAN_WAIT_SECONDS", "1"),
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
        Runner {
            binary: spec.binary.to_owned(),
            child: None,
            log: spec.dir.join(format!("{}.log", spec.name)),
            state_dir,
            status: format!("http://127.0.0.1:{port}"),
            settings,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            netns: None,
        }
    }

    /// Whether its status says the functions answer it.
    pub async fn reaches_functions(&self) -> bool {
        self.status()
            .await
            .is_some_and(|s| s["cloud_reachable"] == true)
    }

    /// Whether its status says the functions answer it and its outbox is empty: all it ran
    /// is delivered.
    pub async fn delivered_everything(&self) -> bool {
        self.status()
            .await
            .is_some_and(|s| s["outbox_depth"] == 0 && s["cloud_reachable"] == true)
    }

    /// The environment variables it gets at its next start, in place of those it had.
    pub fn set_env(&mut self, env: Vec<(String, String)>) {
        self.env = env;
    }

    /// Starts it (again, after a stop or kill).
    pub fn restart(&mut self) {
        let log = log_file(&self.log);
        let mut command = match &self.netns {
            // `ip netns exec` becomes the runner (it execs it): signals reach the runner.
            Some(name) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", name]).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
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

    /// SIGTERM, then waits; whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        self.child
            .take()
            .is_some_and(|mut child| terminate(&mut child))
    }

    /// SIGKILL (a crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` to the process (SIGSTOP freezes it as a stalled host would, SIGCONT
    /// thaws it).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = self
            .child
            .as_ref()
            .and_then(|c| i32::try_from(c.id()).ok())
            .expect("a running runner");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("signal sent");
    }

    /// `res-runner plan why <rule>` on its state directory: its output.
    pub fn plan_why(&self, rule: uuid::Uuid) -> String {
        let output = std::process::Command::new(&self.binary)
            .args(["plan", "why", &rule.to_string(), "--state-dir"])
            .arg(&self.state_dir)
            .output()
            .expect("res-runner plan why");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET <status>/<path>`; `None` while it is not listening.
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

/// `res-functions serve` as a child process on a fixed port, so it can be stopped and
/// started again at the same address.
#[derive(Debug)]
pub struct FunctionsServer {
    binary: PathBuf,
    child: Option<Child>,
    database_url: String,
    /// Where it listens: loopback, or a test namespace's host end.
    host: std::net::IpAddr,
    port: u16,
    log: PathBuf,
    args: Vec<String>,
    /// The sealing keyring it is started with; the tests' own when `None`.
    keyring: Option<String>,
}

impl FunctionsServer {
    /// Starts `binary serve` over `database_url` (already migrated), logging to `log`.
    pub async fn start(binary: &Path, database_url: &str, log: &Path) -> FunctionsServer {
        FunctionsServer::start_with(binary, database_url, log, &[]).await
    }

    /// [`FunctionsServer::start`] with more `serve` arguments (`--sweep-interval 1`).
    pub async fn start_with(
        binary: &Path,
        database_url: &str,
        log: &Path,
        args: &[&str],
    ) -> FunctionsServer {
        let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
        FunctionsServer::start_at(binary, database_url, log, args, loopback).await
    }

    /// [`FunctionsServer::start_with`] listening on `host` (a test namespace's host end).
    pub async fn start_at(
        binary: &Path,
        database_url: &str,
        log: &Path,
        args: &[&str],
        host: std::net::IpAddr,
    ) -> FunctionsServer {
        let mut server = FunctionsServer {
            binary: binary.to_owned(),
            child: None,
            database_url: database_url.to_owned(),
            host,
            port: free_port(),
            log: log.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            keyring: None,
        };
        server.restart().await;
        server
    }

    /// `http://<host>:<port>/functions/v1`.
    pub fn url(&self) -> String {
        format!("http://{}:{}/functions/v1", self.host, self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts it again (same port) and waits until it answers.
    pub async fn restart(&mut self) {
        let log = log_file(&self.log);
        let child = Command::new(&self.binary)
            .args(["serve", "--bind", &format!("{}:{}", self.host, self.port)])
            .args(&self.args)
            .env("DATABASE_URL", &self.database_url)
            .env(
                "RES_SECRETS_KEYS",
                self.keyring.as_deref().unwrap_or(crate::secrets_keys()),
            )
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("res-functions starts");
        self.child = Some(child);
        let health = format!("{}/health", self.url());
        eventually("res-functions answers", Duration::from_secs(30), || async {
            reqwest::get(&health)
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
    }

    /// SIGTERM, then waits; whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        self.child
            .take()
            .is_some_and(|mut child| terminate(&mut child))
    }

    /// The keyring its next [`FunctionsServer::restart`] is given (a rotation step).
    pub fn use_keyring(&mut self, keyring: &str) {
        self.keyring = Some(keyring.to_owned());
    }

    /// SIGKILL (a crash: no answer is finished, no connection closed politely).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A second process on the same port (its `serve` arguments must share it:
    /// `--reuse-port`), logging to `log`; answering once this returns.
    pub async fn beside(&self, log: &Path) -> FunctionsServer {
        let mut server = FunctionsServer {
            binary: self.binary.clone(),
            child: None,
            database_url: self.database_url.clone(),
            host: self.host,
            port: self.port,
            log: log.to_owned(),
            args: self.args.clone(),
            keyring: self.keyring.clone(),
        };
        server.restart().await;
        server
    }
}

impl Drop for FunctionsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `check` until it holds or `timeout` passes; panics naming `what` then.
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
