//! PgBouncer in front of a throwaway PostgreSQL server, as fleets put it in front of theirs.
//!
//! It runs in the foreground as the server's unprivileged owner (it refuses root), listens
//! on a loopback port, and is stopped when dropped, or by a detached watchdog once the test
//! binary exits however it exits.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::postgres::{PgServer, as_root, server_user};
use crate::processes::{after_exit, eventually, free_port};

/// How PgBouncer lends server connections to its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// A client keeps one server connection until it disconnects.
    Session,
    /// A client gets a server connection for one transaction at a time.
    Transaction,
    /// A client gets a server connection for one statement at a time.
    Statement,
}

impl PoolMode {
    fn as_str(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
            PoolMode::Statement => "statement",
        }
    }
}

/// A running PgBouncer.
#[derive(Debug)]
pub struct PgBouncer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    /// Starts one in `mode` in front of `server` (a throwaway one), with at most
    /// `server_connections` connections to it per database, and waits until it answers.
    pub async fn start(server: &PgServer, mode: PoolMode, server_connections: u32) -> PgBouncer {
        res_setup::require(&[res_setup::Tool::PgBouncer], "the connection pooler tests")
            .unwrap_or_else(|e| panic!("{e}"));
        let program = res_setup::Tool::PgBouncer
            .find()
            .expect("pgbouncer is here");
        let (socket_dir, server_port) = server.socket().expect("a throwaway server");
        let dir = std::env::temp_dir().join(format!("res-pgbouncer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("pgbouncer's directory");
        let port = free_port();
        // Drivers send these; PgBouncer refuses unknown startup parameters unless told to
        // ignore them (docs/deploy.md, "Connection poolers").
        let config = format!(
            "[databases]\n* = host={socket} port={server_port} user=postgres\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {users}\npool_mode = {mode}\n\
             default_pool_size = {server_connections}\nmax_client_conn = 500\n\
             ignore_startup_parameters = extra_float_digits, options\n\
             logfile = {log}\n",
            socket = socket_dir.display(),
            users = dir.join("users.txt").display(),
            mode = mode.as_str(),
            log = dir.join("pgbouncer.log").display(),
        );
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").expect("users");
        std::fs::write(dir.join("pgbouncer.ini"), config).expect("config");
        let mut command = Command::new(program);
        command.arg(dir.join("pgbouncer.ini"));
        if as_root() {
            let user = server_user();
            let owned = Command::new("chown")
                .arg("-R")
                .arg(user)
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(owned, "cannot hand {} to {user}", dir.display());
            use std::os::unix::process::CommandExt;
            command.uid(id(user, "-u")).gid(id(user, "-g"));
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbouncer starts");
        // Stopped even when this test binary dies without dropping it.
        let _ = after_exit(&format!(
            "kill {} 2>/dev/null; rm -rf {}",
            child.id(),
            dir.display()
        ));
        let mut bouncer = PgBouncer { child, port, dir };
        let address = format!("127.0.0.1:{port}");
        eventually("pgbouncer listens", Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(&address).await.is_ok()
        })
        .await;
        // Something listens there: it is this PgBouncer only if it is still running (one
        // that could not bind exits, and the port is another process's).
        let exited = bouncer.child.try_wait().ok().flatten();
        assert!(
            exited.is_none(),
            "pgbouncer exited ({exited:?}) and port {port} is another process's: {}",
            bouncer.log()
        );
        bouncer
    }

    /// The URL of database `name` through this pooler.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `id <flag> user`: a user's numeric id or group.
fn id(user: &str, flag: &str) -> u32 {
    let output = Command::new("id")
        .args([flag, user])
        .output()
        .expect("id runs");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("id {flag} {user}: {e}"))
}
