//! The whole system on this machine: PostgreSQL (throwaway, project-local, or
//! `DATABASE_URL`), migrations, `res-functions serve`, the demo's configuration applied with
//! `resctl apply`, one `res-runner` with the demo detector, and a live line per execution.
//! Ctrl-C stops everything and leaves nothing running.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::Utc;
use clap::Args;
use sqlx::postgres::PgPoolOptions;

use crate::children::Process;
use crate::{configure, live, screenshots};

/// Options of `cargo xtask demo` (which builds the binaries, then runs this with them).
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Port of the functions (`http://127.0.0.1:<port>/functions/v1`).
    #[arg(long, default_value_t = 54321)]
    functions_port: u16,
    /// Port of the runner's status page.
    #[arg(long, default_value_t = 9464)]
    status_port: u16,
    /// Stop by itself after this many seconds (default: run until Ctrl-C).
    #[arg(long = "for")]
    run_for: Option<u64>,
    /// Where `res-functions`, `res-runner` and `resctl` are [default: beside this program,
    /// where the same `cargo build` put them].
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Where the demo keeps its state and logs [default: .res/demo in the workspace].
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The directory of `res-functions`, `res-runner` and `resctl`.
fn binaries(args: &DemoArgs) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &args.bin_dir {
        return Ok(dir.clone());
    }
    let me = std::env::current_exe().context("cannot find this program")?;
    Ok(me
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf))
}

fn port_free(port: u16, flag: &str) -> anyhow::Result<()> {
    TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .map(drop)
        .with_context(|| format!("port {port} is in use; pick another with {flag}"))
}

/// Runs the demo until Ctrl-C (or `--for`); with `screenshots`, photographs the console into
/// that directory once the demo has run a while, and stops.
pub async fn run(args: DemoArgs, screenshots: Option<PathBuf>) -> anyhow::Result<()> {
    res_tests::functions::install_tls();
    let root = workspace_root();
    let state = args
        .state_dir
        .clone()
        .unwrap_or_else(|| root.join(".res").join("demo"));
    port_free(args.functions_port, "--functions-port")?;
    port_free(args.status_port, "--status-port")?;
    let bin = binaries(&args)?;
    for name in ["res-functions", "res-runner", "resctl"] {
        if !bin.join(name).is_file() {
            bail!(
                "{} is missing: `cargo xtask demo` builds it (or point --bin-dir at it)",
                bin.join(name).display()
            );
        }
    }
    // A fresh state each run: the demo's data is throwaway.
    if state.exists() {
        std::fs::remove_dir_all(&state)
            .with_context(|| format!("cannot clear {}", state.display()))?;
    }
    std::fs::create_dir_all(&state)?;
    let state = state.canonicalize()?;
    let database_url = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => {
            println!("using DATABASE_URL (demo data is added to it)");
            url
        }
        _ => {
            println!("starting PostgreSQL in {} …", state.join("pg").display());
            let server =
                res_tests::postgres::start_in(&state.join("pg")).map_err(|e| anyhow::anyhow!(e))?;
            server.url("postgres")
        }
    };
    let functions_log = state.join("functions.log");
    let migrate = Command::new(bin.join("res-functions"))
        .arg("migrate")
        .env("DATABASE_URL", &database_url)
        .output()
        .context("res-functions migrate")?;
    if !migrate.status.success() {
        bail!(
            "migrations failed: {}",
            String::from_utf8_lossy(&migrate.stderr)
        );
    }
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&database_url)
        .await
        .context("connect")?;
    let key = |role: &str, branches: &[uuid::Uuid]| -> anyhow::Result<String> {
        let mut command = Command::new(bin.join("res-functions"));
        command
            .args([
                "create-api-key",
                "--name",
                &format!("demo-{role}"),
                "--role",
                role,
            ])
            .env("DATABASE_URL", &database_url);
        for branch in branches {
            command.args(["--branch", &branch.to_string()]);
        }
        if role == "admin" {
            command.arg("--all-brands");
        }
        let output = command.output().context("res-functions create-api-key")?;
        if !output.status.success() {
            bail!(
                "create-api-key failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let service_token = key("service", &[])?;
    let platform_admin = key("admin", &[])?;

    // A sealing key for brands' secrets, made for this demo and kept in its state only.
    let new_key = Command::new(bin.join("res-functions"))
        .args(["secrets", "new-key", "--id", "demo"])
        .output()
        .context("res-functions secrets new-key")?;
    if !new_key.status.success() {
        bail!(
            "cannot make a sealing key: {}",
            String::from_utf8_lossy(&new_key.stderr)
        );
    }
    let keys_file = state.join("sealing-keys");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&keys_file)
            .and_then(|mut file| file.write_all(&new_key.stdout))
            .with_context(|| format!("cannot write {}", keys_file.display()))?;
    }
    let functions_url = format!("http://127.0.0.1:{}/functions/v1", args.functions_port);
    let mut functions = {
        let mut command = Command::new(bin.join("res-functions"));
        command
            .args([
                "serve",
                "--bind",
                &format!("127.0.0.1:{}", args.functions_port),
            ])
            .env("DATABASE_URL", &database_url)
            .env("RES_SECRETS_KEY_FILE", &keys_file);
        Process::start("res-functions", command, &functions_log)?
    };
    wait_healthy(&format!("{functions_url}/health"), &mut functions).await?;
    println!("configuring the demo brand …");
    configure::apply(&bin.join("resctl"), &root, &functions_url, &platform_admin)?;
    let configured = configure::read(&pool).await?;
    let runner_token = key("runner", &configured.branches)?;
    let operator_token = key("operator", &configured.branches)?;
    let runner_state = state.join("runner");
    let mut runner = {
        let mut command = Command::new(bin.join("res-runner"));
        // The demo's detector is named from the workspace (infra/local/demo/catalogue.yaml).
        command
            .current_dir(&root)
            .arg("run")
            .env("RES_RUNNER_FUNCTIONS_URL", &functions_url)
            .env("RES_RUNNER_TOKEN", &runner_token)
            .env("RES_RUNNER_RUNNER_ID", "demo-runner")
            .env("RES_RUNNER_STATE_DIR", &runner_state)
            .env(
                "RES_RUNNER_STATUS_LISTEN",
                format!("127.0.0.1:{}", args.status_port),
            )
            .env("RES_RUNNER_PLAN_REFRESH_SECONDS", "5")
            .env("RES_RUNNER_RECENT_SECONDS", "5");
        Process::start("res-runner", command, &state.join("runner.log"))?
    };

    let example = configured
        .rules
        .first()
        .map(|(id, _)| id.to_string())
        .unwrap_or_default();
    println!();
    println!("RES is running locally. Ctrl-C stops everything.");
    let console_url = format!("http://127.0.0.1:{}/console/", args.functions_port);
    println!("  console             {console_url}");
    println!("    sign in with      {operator_token}   (the demo's operator key)");
    println!(
        "  runner status page  http://127.0.0.1:{}/",
        args.status_port
    );
    println!(
        "  the plan            curl -s {functions_url}/get-execution-plan-v2 -H 'Authorization: Bearer {service_token}' -d '{{\"runner_id\": \"me\"}}'"
    );
    println!(
        "  why a rule waits    {} plan why {example} --state-dir {}",
        bin.join("res-runner").display(),
        runner_state.display()
    );
    println!(
        "  logs                {}  {}",
        functions_log.display(),
        state.join("runner.log").display()
    );
    println!("  database            {database_url}");
    println!("  rules               {}", configured.rules.len());
    for (id, name) in &configured.rules {
        println!("    {id}  {name}");
    }
    println!();
    println!(
        "finished    rule                                 status                      took  next run (UTC)"
    );

    let mut since = Utc::now() - chrono::TimeDelta::minutes(1);
    let stop_at = args
        .run_for
        .map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
    if let Some(dir) = &screenshots {
        let dir = root.join(dir);
        let taken = screenshots::take(&pool, &console_url, &operator_token, &dir).await;
        runner.stop(Duration::from_secs(40)).await;
        functions.stop(Duration::from_secs(10)).await;
        pool.close().await;
        return taken;
    }
    let result = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(()),
            () = async {
                match stop_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => break Ok(()),
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                match live::print_new(&pool, since).await {
                    Ok(latest) => since = latest,
                    Err(error) => eprintln!("cannot read executions: {error}"),
                }
                if let Some(status) = runner.exited() {
                    break Err(anyhow::anyhow!("res-runner exited ({status}); see {}", runner.log.display()));
                }
                if let Some(status) = functions.exited() {
                    break Err(anyhow::anyhow!("res-functions exited ({status}); see {}", functions.log.display()));
                }
            }
        }
    };
    println!();
    println!("stopping …");
    runner.stop(Duration::from_secs(40)).await;
    let _ = live::print_new(&pool, since).await;
    functions.stop(Duration::from_secs(10)).await;
    pool.close().await;
    println!(
        "  PostgreSQL stops as this process exits; state was in {}",
        state.display()
    );
    result
}

async fn wait_healthy(url: &str, functions: &mut Process) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client
            .get(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok(());
        }
        if let Some(status) = functions.exited() {
            bail!(
                "res-functions exited ({status}); see {}",
                functions.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!(
        "res-functions did not become healthy; see {}",
        functions.log.display()
    )
}
