//! `res-runner run`: start the daemon.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::daemon::config::Config;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Lines for people.
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Arguments of `res-runner run`.
#[derive(Debug, Args)]
#[command(
    after_help = "Every config key can be set by an environment variable RES_RUNNER_<KEY>, \
e.g. RES_RUNNER_WORKERS=8; the reference names EXECUTION_PLAN_REFRESH_SECONDS, \
PLAN_MIN_WRITE_INTERVAL_SECONDS, PLAN_WORKFLOW_MAX_AGE_HOURS and PLAN_ACTION_DETAILS_CAP work too."
)]
pub struct RunArgs {
    /// TOML configuration file.
    #[arg(long, env = "RES_RUNNER_CONFIG")]
    config: Option<PathBuf>,
    /// Log format.
    #[arg(
        long,
        value_enum,
        default_value = "human",
        env = "RES_RUNNER_LOG_FORMAT"
    )]
    log_format: LogFormat,
}

/// Installs the log subscriber (`RUST_LOG` filters; default `info`).
pub(crate) fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a person at a terminal; files and journald get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Runs the daemon until it is stopped.
pub fn run(args: RunArgs) -> ExitCode {
    init_logs(args.log_format);
    let config = match Config::load(args.config.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("res-runner: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("res-runner: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(crate::daemon::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("res-runner: {error:#}");
            ExitCode::FAILURE
        }
    }
}
