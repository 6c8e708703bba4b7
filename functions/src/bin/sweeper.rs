//! The sweeper as a scheduled Lambda (EventBridge invokes it every minute), or one sweep
//! from the command line, each followed by delivering the notifications waiting (for up to
//! 40 s). `res-functions serve` sweeps and delivers by itself; this is for deployments
//! whose functions all run on Lambda.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use res_functions::alerts;
use res_functions::config::{DatabaseArgs, SweepArgs};
use res_functions::metrics::Metrics;
use res_functions::sweeper::Sweeper;
use res_functions::{logging, serve};
use tokio_util::sync::CancellationToken;

/// How long one invocation delivers notifications after its sweep (the Lambda's timeout is
/// a minute; the next invocation goes on).
const DELIVERY_BUDGET: Duration = Duration::from_secs(40);

/// Delivers until nothing is due or the budget is spent.
async fn deliver_for(
    pool: &sqlx::PgPool,
    client: &reqwest::Client,
    max_backoff: Duration,
    metrics: &Metrics,
) -> Result<(), sqlx::Error> {
    let started = Instant::now();
    // One invocation ends by its budget, not by a signal.
    let never = CancellationToken::new();
    while started.elapsed() < DELIVERY_BUDGET {
        let round = alerts::deliver_round(pool, client, max_backoff, metrics, &never).await?;
        if round.delivered + round.failed == 0 {
            break;
        }
    }
    Ok(())
}

#[derive(Debug, Parser)]
#[command(
    version,
    about = "One RES sweep: on AWS Lambda per scheduled event when AWS_LAMBDA_RUNTIME_API is set, else once"
)]
struct Args {
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    sweep: SweepArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    logging::init(if serve::in_lambda() {
        logging::LogFormat::Json
    } else {
        logging::LogFormat::Text
    });
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(args));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let pool = args.database.pool(2)?;
    serve::refuse_outdated_schema(&pool).await?;
    serve::refuse_transaction_pooling(&pool).await?;
    let sweeper = Sweeper::new(args.sweep.settings());
    let metrics = Metrics::default();
    let client = alerts::client()?;
    let max_backoff = args.sweep.notify_max_backoff();
    if !serve::in_lambda() {
        let report = sweeper.sweep_once(&pool, &metrics).await?;
        deliver_for(&pool, &client, max_backoff, &metrics).await?;
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let handler = lambda_http::service_fn(|_event: lambda_http::LambdaEvent<serde_json::Value>| {
        let pool = pool.clone();
        let (client, metrics, sweeper) = (&client, &metrics, &sweeper);
        async move {
            let report = sweeper.sweep_once(&pool, metrics).await?;
            tracing::info!(?report, "swept (null: another sweep held the lock)");
            deliver_for(&pool, client, max_backoff, metrics).await?;
            Ok::<_, lambda_http::Error>(serde_json::to_value(report)?)
        }
    });
    lambda_http::lambda_runtime::run(handler)
        .await
        .map_err(|e| anyhow::anyhow!("lambda runtime: {e}"))
}
