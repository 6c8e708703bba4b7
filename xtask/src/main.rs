//! Developer tasks. `cargo xtask demo` starts the whole system on this machine: PostgreSQL,
//! the functions, a runner with a demo detector, and demo data; Ctrl-C stops it all.

mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "RES developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Run the whole system locally with demo data until Ctrl-C.
    Demo(demo::DemoArgs),
    /// Run the demo for a while and photograph every console page, at desktop width and at
    /// 375 px, into docs/console/ (needs Debian's chromium and chromium-driver).
    Screenshots {
        /// Where the PNGs go, relative to the workspace.
        #[arg(long, default_value = "docs/console")]
        out: std::path::PathBuf,
        #[command(flatten)]
        demo: demo::DemoArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("xtask: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Task::Demo(args) => runtime.block_on(demo::run(args, None)),
        Task::Screenshots { out, demo } => runtime.block_on(demo::run(demo, Some(out))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            ExitCode::FAILURE
        }
    }
}
