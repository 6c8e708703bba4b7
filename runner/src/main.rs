//! `res-runner`: the RES service on a site's camera host.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// RES site runner.
#[derive(Debug, Parser)]
#[command(
    name = "res-runner",
    version,
    about = "RES site runner: executes branch rules on a camera host"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compute when a rule runs next, exactly as the cloud function would.
    NextRun(res_runner::commands::next_run::NextRunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::NextRun(args) => res_runner::commands::next_run::run(args),
    }
}
