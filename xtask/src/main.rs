//! `cargo xtask demo|screenshots`: finds or installs what the demo needs of the system,
//! builds what it runs in one `cargo build` (cargo's progress shown), then becomes
//! `res-demo` with the same arguments. Standard library only (and `res-setup`): the alias
//! starts it at once, and nothing it runs is compiled twice.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use res_setup::Tool;

const USAGE: &str =
    "usage: cargo xtask demo [--release] [OPTIONS]   the whole system here, until Ctrl-C
       cargo xtask screenshots [--release] [OPTIONS]   photograph the console into docs/console
       cargo xtask releases   build releases.txt's releases for the compatibility tests
Options are res-demo's: cargo xtask demo --help lists them.";

/// What the packages built for the demo are.
const PACKAGES: [&str; 4] = ["res-functions", "res-runner", "resctl", "res-demo"];

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let task = args.first().and_then(|a| a.to_str()).unwrap_or_default();
    if task == "releases" && args.len() == 1 {
        return build_releases();
    }
    if !matches!(task, "demo" | "screenshots") {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let plan = Plan::of(&args);
    if let Err(message) = res_setup::require(&plan.tools(task), "the demo") {
        eprintln!("xtask: {message}");
        return ExitCode::FAILURE;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    if !plan.help {
        println!(
            "building {}{} with cargo (a first build takes about 7 minutes on 2 cores{}; \
             later ones seconds) …",
            PACKAGES.join(", "),
            if plan.release { " in release" } else { "" },
            if plan.release {
                ", longer in release"
            } else {
                ""
            },
        );
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(workspace_root())
        .args(plan.build_args())
        .status();
    match built {
        Ok(status) if status.success() => {}
        Ok(status) => {
            eprintln!("xtask: cargo build failed ({status})");
            return ExitCode::FAILURE;
        }
        Err(error) => {
            eprintln!("xtask: cannot run cargo: {error}");
            return ExitCode::FAILURE;
        }
    }
    let demo = target.join(plan.profile_dir()).join("res-demo");
    // Replaced by the demo, so Ctrl-C and its exit code are the demo's own.
    let error = Command::new(&demo).args(&plan.demo_args).exec();
    eprintln!("xtask: cannot run {}: {error}", demo.display());
    ExitCode::FAILURE
}

/// Builds every release `releases.txt` lists that is not in the release cache yet
/// (`res_setup::releases::cache_root`), in the workspace's target directory (what they
/// share with today's build compiles once), then puts today's binaries back where the
/// releases' builds left theirs.
fn build_releases() -> ExitCode {
    let workspace = workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), PathBuf::from);
    let built = res_setup::releases::listed(&workspace).and_then(|releases| {
        releases
            .iter()
            .try_for_each(|r| res_setup::releases::build(&workspace, r, &target).map(drop))
    });
    if let Err(message) = built {
        eprintln!("xtask: {message}");
        return ExitCode::FAILURE;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut today = Command::new(cargo);
    today.current_dir(&workspace).arg("build");
    for binary in res_setup::releases::BINARIES {
        today.args(["--bin", binary]);
    }
    match today.status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("xtask: cargo build of today's binaries failed ({status})");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("xtask: cannot run cargo: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace: this crate's parent directory.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// What one `cargo xtask` call builds and runs.
#[derive(Debug, PartialEq)]
struct Plan {
    release: bool,
    /// `--help`: nothing is needed of the system, but the demo must exist to answer.
    help: bool,
    /// The demo's own: the task and its options, `--release` taken out.
    demo_args: Vec<OsString>,
    /// The demo's database is `DATABASE_URL`'s, not a throwaway server.
    database_url: bool,
}

impl Plan {
    fn of(args: &[OsString]) -> Plan {
        let release = args.iter().any(|a| a == "--release");
        Plan {
            release,
            help: args.iter().any(|a| a == "--help" || a == "-h"),
            demo_args: args.iter().filter(|a| *a != "--release").cloned().collect(),
            database_url: std::env::var("DATABASE_URL").is_ok_and(|u| !u.trim().is_empty()),
        }
    }

    /// What the task needs of this machine.
    fn tools(&self, task: &str) -> Vec<Tool> {
        let mut tools = Vec::new();
        if self.help {
            return tools;
        }
        if !self.database_url {
            tools.push(Tool::PostgresServer);
        }
        if task == "screenshots" {
            tools.extend([Tool::Chromium, Tool::ChromeDriver]);
        }
        tools
    }

    /// `cargo build` of everything the demo runs, at once: one build, one set of features.
    fn build_args(&self) -> Vec<String> {
        let mut args = vec!["build".to_owned(), "--bins".to_owned()];
        for package in PACKAGES {
            args.extend(["-p".to_owned(), package.to_owned()]);
        }
        if self.release {
            args.push("--release".to_owned());
        }
        args
    }

    fn profile_dir(&self) -> &'static str {
        if self.release { "release" } else { "debug" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Plan {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        Plan {
            database_url: false,
            ..Plan::of(&args)
        }
    }

    #[test]
    fn one_build_of_what_the_demo_runs_then_the_demo_with_its_own_arguments() {
        let debug = plan(&["demo", "--for", "50"]);
        assert_eq!(
            debug.build_args().join(" "),
            "build --bins -p res-functions -p res-runner -p resctl -p res-demo"
        );
        assert_eq!(debug.profile_dir(), "debug");
        assert_eq!(debug.demo_args, ["demo", "--for", "50"]);
        assert_eq!(debug.tools("demo"), [Tool::PostgresServer]);
        let release = plan(&["demo", "--release", "--for", "5"]);
        assert!(release.build_args().ends_with(&["--release".to_owned()]));
        assert_eq!(release.profile_dir(), "release");
        assert_eq!(release.demo_args, ["demo", "--for", "5"]);
        assert_eq!(
            plan(&["screenshots"]).tools("screenshots"),
            [Tool::PostgresServer, Tool::Chromium, Tool::ChromeDriver]
        );
        assert!(plan(&["demo", "--help"]).tools("demo").is_empty());
    }
}
