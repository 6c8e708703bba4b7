//! `res-demo`: the whole system on this machine — PostgreSQL, the functions, a runner with
//! a demo detector, and demo data — until Ctrl-C. `cargo xtask demo` builds it with the
//! binaries it runs, in one `cargo build`, and runs it.

mod children;
mod configure;
mod live;
mod screenshots;
mod system;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "res-demo", about = "RES on this machine, with demo data")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Run the whole system locally with demo data until Ctrl-C.
    Demo(system::DemoArgs),
    /// Run the demo for a while and photograph every console page, at desktop width and at
    /// 375 px, into docs/console/ (needs Debian's chromium and chromium-driver).
    Screenshots {
        /// Where the PNGs go, relative to the workspace.
        #[arg(long, default_value = "docs/console")]
        out: std::path::PathBuf,
        #[command(flatten)]
        demo: system::DemoArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("res-demo: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Task::Demo(args) => runtime.block_on(system::run(args, None)),
        Task::Screenshots { out, demo } => runtime.block_on(system::run(demo, Some(out))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("res-demo: {error:#}");
            ExitCode::FAILURE
        }
    }
}
