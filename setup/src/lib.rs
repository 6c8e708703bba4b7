//! The system tools RES's commands need beyond Rust, found or installed. `cargo test
//! --workspace` and `cargo xtask demo` must work on a fresh machine with only Rust on it:
//! where they run as root on Debian, what is missing is installed as `.ci/run` installs
//! it (`apt-get`), saying what and why; elsewhere the command stops with the one command
//! to run. Standard library only: `xtask` builds it before anything else.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

pub mod releases;

/// A program a command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `initdb` and `pg_ctl`, for throwaway databases.
    PostgresServer,
    /// Debian's Chromium, for the console's browser tests.
    Chromium,
    /// Its WebDriver.
    ChromeDriver,
    /// Prometheus's rule checker, for the shipped alert rules.
    Promtool,
    /// For the documented `curl | jq` examples.
    Jq,
    /// For the documented `curl` examples.
    Curl,
    /// CPython, the reference the expression evaluator is checked against.
    Python3,
    /// nftables, to drop a network namespace's packets in the bad-link tests (`ip` and
    /// `tc` come with iproute2, already on any Debian).
    Nft,
    /// libfaketime's `faketime`, to run a runner with a clock minutes off.
    Faketime,
    /// PgBouncer, the connection pooler the functions are tested behind.
    PgBouncer,
}

impl Tool {
    /// The Debian package that brings it.
    pub fn package(self) -> &'static str {
        match self {
            Tool::PostgresServer => "postgresql",
            Tool::Chromium => "chromium",
            Tool::ChromeDriver => "chromium-driver",
            Tool::Promtool => "prometheus",
            Tool::Jq => "jq",
            Tool::Curl => "curl",
            Tool::Python3 => "python3",
            Tool::Nft => "nftables",
            Tool::Faketime => "faketime",
            Tool::PgBouncer => "pgbouncer",
        }
    }

    /// What it is, as a message names it.
    fn what(self) -> &'static str {
        match self {
            Tool::PostgresServer => "the PostgreSQL server (initdb, pg_ctl)",
            Tool::Chromium => "Chromium",
            Tool::ChromeDriver => "ChromeDriver",
            Tool::Promtool => "promtool",
            Tool::Jq => "jq",
            Tool::Curl => "curl",
            Tool::Python3 => "python3",
            Tool::Nft => "nft",
            Tool::Faketime => "faketime",
            Tool::PgBouncer => "PgBouncer",
        }
    }

    /// Where it is, if it is here.
    pub fn find(self) -> Option<PathBuf> {
        match self {
            Tool::PostgresServer => postgres_bin_dir(),
            Tool::Chromium => named("CHROMIUM").or_else(|| on_path("chromium")),
            Tool::ChromeDriver => named("CHROMEDRIVER").or_else(|| on_path("chromedriver")),
            Tool::Promtool => on_path("promtool"),
            Tool::Jq => on_path("jq"),
            Tool::Curl => on_path("curl"),
            Tool::Python3 => on_path("python3"),
            // Debian puts it in /usr/sbin, off a user's PATH.
            Tool::Nft => on_path("nft")
                .or_else(|| Some(PathBuf::from("/usr/sbin/nft")).filter(|path| path.is_file())),
            Tool::Faketime => on_path("faketime"),
            Tool::PgBouncer => on_path("pgbouncer").or_else(|| {
                Some(PathBuf::from("/usr/sbin/pgbouncer")).filter(|path| path.is_file())
            }),
        }
    }
}

/// The program an environment variable names, if it exists.
fn named(variable: &str) -> Option<PathBuf> {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|path| path.is_file())
}

/// `program` on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// The directory holding `initdb` and `pg_ctl`: on `PATH`, else the newest of Debian's
/// versioned installs (`/usr/lib/postgresql/<version>/bin`, not on `PATH`).
pub fn postgres_bin_dir() -> Option<PathBuf> {
    // Where PATH has links to a few of the programs (initdb and pg_ctl in /usr/local/bin),
    // the directory they link to has the rest (pg_basebackup).
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
            .map(|dir| match std::fs::canonicalize(dir.join("pg_ctl")) {
                Ok(real) => real.parent().map_or(dir.clone(), Path::to_path_buf),
                Err(_) => dir,
            })
    });
    on_path.or_else(|| {
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| {
                let dir = entry.ok()?.path();
                let version = dir.file_name()?.to_str()?.parse().ok()?;
                let bin = dir.join("bin");
                (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
                    .then_some((version, bin))
            })
            .collect();
        versions.sort();
        versions.pop().map(|(_, bin)| bin)
    })
}

/// Whether this process may install packages: root on Debian with `apt-get`.
fn may_install() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
        })
        .unwrap_or(false);
    root && Path::new("/etc/debian_version").exists() && on_path("apt-get").is_some()
}

/// The tools of `tools` not found here.
fn missing(tools: &[Tool]) -> Vec<Tool> {
    tools
        .iter()
        .copied()
        .filter(|t| t.find().is_none())
        .collect()
}

/// Makes sure every tool of `tools` is here, `why` saying what needs them: each missing one
/// is installed where that may be done (root on Debian), else `Err` says what to run.
pub fn require(tools: &[Tool], why: &str) -> Result<(), String> {
    let missing = missing(tools);
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing.iter().map(|t| t.package()).collect();
    let named: Vec<&str> = missing.iter().map(|t| t.what()).collect();
    if !may_install() {
        return Err(format!(
            "{} {} missing ({why}): install with `sudo apt-get install {}` on Debian or \
             Ubuntu, or your system's packages ({} as root on Debian installs them itself)",
            named.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            packages.join(" "),
            "`cargo test --workspace` or `cargo xtask demo` run",
        ));
    }
    install(&missing, why)
}

/// Installs `tools` with `apt-get`, one install at a time on this machine: test binaries
/// and the tests in them ask at once, and the second finds what the first installed.
fn install(tools: &[Tool], why: &str) -> Result<(), String> {
    static IN_PROCESS: Mutex<()> = Mutex::new(());
    let _here = IN_PROCESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lock_path = std::env::temp_dir().join("res-setup.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    // Another test binary may have installed them while this one waited for the lock.
    let still = missing(tools);
    if still.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = still.iter().map(|t| t.package()).collect();
    say(&format!(
        "res-setup: installing {} for {why} (apt-get install {}) …",
        still
            .iter()
            .map(|t| t.what())
            .collect::<Vec<_>>()
            .join(", "),
        packages.join(" ")
    ));
    static UPDATED: OnceLock<Result<(), String>> = OnceLock::new();
    UPDATED.get_or_init(|| apt(&["update", "-qq"])).clone()?;
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend(&packages);
    apt(&args)?;
    match still.iter().find(|t| t.find().is_none()) {
        Some(tool) => Err(format!(
            "{} is still missing after `apt-get install {}`",
            tool.what(),
            tool.package()
        )),
        None => {
            say(&format!("res-setup: installed {}", packages.join(" ")));
            Ok(())
        }
    }
}

/// Says what is done to the machine on standard error, written directly: a test harness
/// that captures the tests' output would otherwise hide it until a test failed.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Runs `apt-get` quietly; its output is shown only when it fails.
fn apt(args: &[&str]) -> Result<(), String> {
    let log = std::env::temp_dir().join(format!("res-setup-apt-{}.log", std::process::id()));
    let out = File::create(&log).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot run apt-get: {e}"))?;
    let mut text = String::new();
    if let Ok(mut file) = File::open(&log) {
        let _ = file.read_to_string(&mut text);
    }
    let _ = std::fs::remove_file(&log);
    if status.success() {
        return Ok(());
    }
    let tail: Vec<&str> = text.lines().rev().take(15).collect();
    Err(format!(
        "`apt-get {}` failed ({status}):\n{}",
        args.join(" "),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_found_on_the_path_or_where_debian_puts_them() {
        assert!(on_path("sh").is_some(), "sh is on every PATH");
        assert!(on_path("no-such-program-res").is_none());
        for tool in [Tool::PostgresServer, Tool::Chromium, Tool::Promtool] {
            // Whatever this machine has, finding never fails, and a package is named.
            let _ = tool.find();
            assert!(!tool.package().is_empty());
        }
    }

    #[test]
    fn what_is_here_is_required_without_installing_anything() {
        assert_eq!(require(&[], "nothing"), Ok(()));
        if Tool::Curl.find().is_some() {
            assert_eq!(require(&[Tool::Curl], "a test"), Ok(()));
        }
    }
}
