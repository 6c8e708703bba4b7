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
    /// Run the daemon: sync the plan, schedule, run workflows, report.
    Run(res_runner::commands::run::RunArgs),
    /// Read the local plan: `show` every rule, or `why` one rule is (not) ready.
    Plan(res_runner::commands::plan::PlanArgs),
    /// Compute when a rule runs next, exactly as the cloud function would.
    NextRun(res_runner::commands::next_run::NextRunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    res_runner::tls::install();
    match cli.command {
        Command::Run(args) => res_runner::commands::run::run(args),
        Command::Plan(args) => res_runner::commands::plan::run(args),
        Command::NextRun(args) => res_runner::commands::next_run::run(args),
    }
}
