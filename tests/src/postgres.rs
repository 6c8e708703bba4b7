//! A throwaway PostgreSQL server for tests, or the server `DATABASE_URL` names.
//!
//! The throwaway server lives in a temporary directory, listens only on a unix socket there
//! and is stopped (and the directory removed) by a detached watchdog once the test binary
//! exits, so nothing is left running even when a test panics.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{AssertSqlSafe, Connection, PgConnection};
use uuid::Uuid;

/// A PostgreSQL server: the one tests create their databases on, or one started with
/// [`start_in`].
#[derive(Debug)]
pub struct PgServer {
    /// Connection URL with `{db}` where the database name goes.
    template: String,
    /// Set for a throwaway server: its socket directory and port, for tools like pgbench.
    socket: Option<(PathBuf, u16)>,
}

/// A database created for one test, dropped when this value is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    /// Connection URL of the database.
    pub url: String,
    name: String,
}

/// The server for this test binary, started on first use.
///
/// Panics with an explanation when neither `DATABASE_URL` nor the server binaries exist:
/// a test without a database cannot run.
pub fn server() -> &'static PgServer {
    static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();
    match SERVER.get_or_init(PgServer::start) {
        Ok(server) => server,
        Err(message) => panic!("cannot provide a PostgreSQL server for tests: {message}"),
    }
}

impl PgServer {
    fn start() -> Result<PgServer, String> {
        match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => Ok(PgServer {
                template: url_template(&url)?,
                socket: None,
            }),
            _ => start_throwaway(),
        }
    }

    /// The connection URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        self.template.replace("{db}", name)
    }

    /// The socket directory and port of a throwaway server (`None` with `DATABASE_URL`).
    pub fn socket(&self) -> Option<(&Path, u16)> {
        self.socket
            .as_ref()
            .map(|(dir, port)| (dir.as_path(), *port))
    }

    /// Creates an empty database with a unique name.
    pub async fn create_database(&self) -> TestDatabase {
        let name = format!("res_test_{}", Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&self.url("postgres"))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to the test server: {e}"));
        // The name is generated here from hex digits, so it is safe to splice in.
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("cannot create database {name}: {e}"));
        let _ = admin.close().await;
        TestDatabase {
            url: self.url(&name),
            name,
        }
    }
}

impl TestDatabase {
    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin_url = server().url("postgres");
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Drop runs outside any async context; a short-lived runtime does the cleanup.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(runtime) = runtime {
                runtime.block_on(async move {
                    if let Ok(mut admin) = PgConnection::connect(&admin_url).await {
                        let _ = sqlx::query(AssertSqlSafe(statement))
                            .execute(&mut admin)
                            .await;
                        let _ = admin.close().await;
                    }
                });
            }
        })
        .join();
    }
}

/// Turns `DATABASE_URL` into a template with `{db}` in place of its database name.
fn url_template(url: &str) -> Result<String, String> {
    let authority_start = url
        .find("://")
        .map(|i| i + 3)
        .ok_or_else(|| format!("DATABASE_URL '{url}' is not a postgres:// URL"))?;
    let (head, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let base = match head[authority_start..].find('/') {
        Some(slash) => &head[..authority_start + slash],
        None => head,
    };
    Ok(format!("{base}/{{db}}{query}"))
}

fn start_throwaway() -> Result<PgServer, String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    start_in(&std::env::temp_dir().join(format!("res-pg-{}-{nanos}", std::process::id())))
}

/// Starts a PostgreSQL server in `dir` (created; its data, socket and log live there). It
/// listens only on a unix socket in `dir`, and a detached watchdog stops it and removes
/// `dir` once this process exits, however it exits. As root, the server runs as the
/// `postgres` user (or `nobody`), which must be able to reach `dir`.
pub fn start_in(dir: &Path) -> Result<PgServer, String> {
    let bin = find_bin_dir().ok_or(
        "DATABASE_URL is not set and the PostgreSQL server binaries (initdb, pg_ctl) are \
         neither on PATH nor under /usr/lib/postgresql/*/bin; install the PostgreSQL server \
         (Debian: apt-get install postgresql) or set DATABASE_URL",
    )?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let dir = dir.to_path_buf();
    let data = dir.join("data");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // initdb and postgres refuse to run as root: hand the directory to an unprivileged
    // user, `postgres` where the server package created it.
    let as_root = std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false);
    let owner = server_user();
    if as_root {
        run(
            Command::new("chown").arg("-R").arg(owner).arg(&dir),
            "chown the test server directory",
        )?;
    }
    // The socket lives in a private directory, so the port only has to look random.
    let port = 20_000 + ((std::process::id() ^ nanos) % 20_000) as u16;
    let server_command = |program: &str| {
        let mut command = if as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", owner, "--"]).arg(bin.join(program));
            c
        } else {
            Command::new(bin.join(program))
        };
        command.current_dir(&dir);
        command
    };
    run(
        server_command("initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]),
        "initdb",
    )?;
    // RES_TEST_POSTGRES_OPTIONS adds server options, e.g. to look inside a benchmark with
    // `-c shared_preload_libraries=pg_stat_statements`.
    let options = format!(
        "-k {} -p {port} -c listen_addresses='' -c fsync=off -c synchronous_commit=off \
         -c full_page_writes=off -c max_connections=300 {}",
        dir.display(),
        std::env::var("RES_TEST_POSTGRES_OPTIONS").unwrap_or_default()
    );
    run(
        server_command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("server.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"]),
        "pg_ctl start",
    )?;
    spawn_watchdog(&bin, &dir, &data, as_root.then_some(owner))?;
    Ok(PgServer {
        template: format!(
            "postgres:///{{db}}?host={}&port={port}&user=postgres",
            dir.display()
        ),
        socket: Some((dir, port)),
    })
}

/// Stops the server and removes its directory once this process has exited; `owner` is
/// the user the server runs as when the tests run as root.
fn spawn_watchdog(bin: &Path, dir: &Path, data: &Path, owner: Option<&str>) -> Result<(), String> {
    let as_postgres = owner.map_or(String::new(), |user| format!("runuser -u {user} -- "));
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
         {as_postgres}{pg_ctl} -D {data} -m immediate -w stop >/dev/null 2>&1; rm -rf {dir}",
        pid = std::process::id(),
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    );
    // setsid keeps the watchdog alive when the test runner's process group is interrupted.
    Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot start the test server watchdog: {e}"))
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
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

/// The unprivileged user to run the server as: `postgres` if it exists, else `nobody`.
fn server_user() -> &'static str {
    let exists = Command::new("id")
        .args(["-u", "postgres"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if exists { "postgres" } else { "nobody" }
}

/// The directory holding `initdb` and `pg_ctl`: on PATH, else the newest Debian install.
fn find_bin_dir() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    });
    on_path.or_else(|| {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
            .filter(|bin| bin.join("initdb").is_file())
            .collect();
        versions.sort_by_key(|bin| {
            bin.parent()
                .and_then(|v| v.file_name())
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
        });
        versions.pop()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_url_becomes_a_template() {
        assert_eq!(
            url_template("postgres://u:p@db.example:5432/res?sslmode=disable"),
            Ok("postgres://u:p@db.example:5432/{db}?sslmode=disable".to_owned())
        );
        assert_eq!(
            url_template("postgres://localhost"),
            Ok("postgres://localhost/{db}".to_owned())
        );
        assert!(url_template("localhost:5432").is_err());
    }

    #[tokio::test]
    async fn each_test_gets_a_fresh_database() {
        let first = server().create_database().await;
        let second = server().create_database().await;
        assert_ne!(first.name(), second.name());
        let mut connection = PgConnection::connect(&first.url).await.expect("connect");
        let (one,): (i32,) = sqlx::query_as("SELECT 1")
            .fetch_one(&mut connection)
            .await
            .expect("query");
        assert_eq!(one, 1);
    }
}
