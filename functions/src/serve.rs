//! Running the router: as local HTTP routes, or on AWS Lambda when the Lambda runtime
//! API is present (`lambda_http::run` panics anywhere else).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::serve::ListenerExt as _;
use clap::Parser;
use tokio::net::TcpListener;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::alerts;
use crate::config::{DatabaseArgs, MaintenanceArgs, ServeArgs};
use crate::plan_waits::PlanWaits;
use crate::router::{Function, metrics_router, router, router_with_console};
use crate::state::AppState;
use crate::sweeper::{self, SweepSettings};
use crate::{db, listener, logging};

/// Whether this process runs inside AWS Lambda.
pub fn in_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some_and(|v| !v.is_empty())
}

/// Idle a minute, then a probe every 15 s; four unanswered end the connection.
const TCP_KEEPALIVE: socket2::TcpKeepalive = socket2::TcpKeepalive::new()
    .with_time(Duration::from_secs(60))
    .with_interval(Duration::from_secs(15))
    .with_retries(4);

/// Where and how `serve` listens.
#[derive(Debug, Clone, Copy)]
pub struct Listen {
    pub bind: std::net::SocketAddr,
    /// Share the address with other processes (SO_REUSEPORT), for rolling restarts.
    pub reuse_port: bool,
}

impl From<&ServeArgs> for Listen {
    fn from(args: &ServeArgs) -> Listen {
        Listen {
            bind: args.bind,
            reuse_port: args.reuse_port,
        }
    }
}

impl Listen {
    fn open(self) -> std::io::Result<TcpListener> {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket = Socket::new(
            Domain::for_address(self.bind),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        // As std's and tokio's bind do: a restart may bind while old connections linger.
        socket.set_reuse_address(true)?;
        if self.reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.set_nonblocking(true)?;
        socket.bind(&self.bind.into())?;
        // Room for a fleet reconnecting at once (every waiting site opens a connection per
        // wait): with 1,024, 10,000 sites starting within a minute overflowed the queue and
        // some of their connections, accepted by the kernel but never by serve, timed out.
        // Linux caps it at net.core.somaxconn.
        socket.listen(8192)?;
        TcpListener::from_std(socket.into())
    }
}

/// Serves `router` until Ctrl-C or SIGTERM; then the plan requests waiting in `waits`
/// answer at once, so shutting down does not wait out their waits, and the requests in
/// flight finish.
pub async fn serve_local(
    router: Router,
    listen: Listen,
    waits: Arc<PlanWaits>,
) -> anyhow::Result<()> {
    let bind = listen.bind;
    let listener = listen
        .open()
        .map_err(|e| anyhow::anyhow!("cannot listen on {bind}: {e}"))?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    // Without TCP_NODELAY a response written in two pieces waits for the client's delayed
    // acknowledgement of the first (up to 40 ms on Linux): measured at 20,000 sites, it
    // was most of every claim's, heartbeat's and report's time.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY on a connection");
        }
        // A plan request may wait for minutes without a byte either way: keep-alive probes
        // keep NAT and firewall state for it, and end the wait of a site that vanished.
        if let Err(error) = socket2::SockRef::from(&*tcp).set_tcp_keepalive(&TCP_KEEPALIVE) {
            tracing::warn!(%error, "cannot set TCP keep-alive on a connection");
        }
    });
    let draining = Arc::new(AtomicBool::new(false));
    let router = router.layer(axum::middleware::map_response({
        let draining = Arc::clone(&draining);
        move |response| close_while_draining(response, Arc::clone(&draining))
    }));
    // The peer's address reaches handlers that bound what one client may do (sign-ins).
    let app = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            waits.stop();
            if listen.reuse_port {
                // Another serve shares the port: go on answering a moment, each answer
                // telling its client to close the connection, so clients move to the other
                // process on a fresh connection rather than meet a connection closed under
                // a request they were sending.
                draining.store(true, Ordering::SeqCst);
                tracing::info!(
                    "shutting down: draining connections for {} ms",
                    DRAIN.as_millis()
                );
                tokio::time::sleep(DRAIN).await;
            }
        })
        .await?;
    Ok(())
}

/// How long a `serve` sharing its port keeps answering after SIGTERM (with
/// `Connection: close`): runners ask at least once a second while busy and at once after a
/// waiting plan request is answered, so two seconds move every connection.
const DRAIN: Duration = Duration::from_secs(2);

async fn close_while_draining(
    mut response: axum::response::Response,
    draining: Arc<AtomicBool>,
) -> axum::response::Response {
    if draining.load(Ordering::SeqCst) {
        response.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// Serves every function on `bind`, the metrics on their own bind, and sweeps, until
/// Ctrl-C or SIGTERM.
pub async fn serve_with_maintenance(
    state: AppState,
    listen: Listen,
    maintenance: &MaintenanceArgs,
) -> anyhow::Result<()> {
    let stop = CancellationToken::new();
    if let Some(metrics_bind) = maintenance.metrics_bind {
        let listener = TcpListener::bind(metrics_bind)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {metrics_bind} for metrics: {e}"))?;
        tracing::info!("metrics on http://{}/metrics", listener.local_addr()?);
        let app = metrics_router(state.clone());
        let stopped = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "the metrics endpoint stopped");
            }
        });
    }
    tokio::spawn(listener::run(state.clone(), stop.clone()));
    let delivering = tokio::spawn(alerts::run(
        state.pool.clone(),
        maintenance.sweep.notify_max_backoff(),
        state.metrics.clone(),
        stop.clone(),
    ));
    if maintenance.sweep_interval > 0 {
        let settings = SweepSettings {
            runner_thresholds: state.settings.runner_thresholds,
            ..maintenance.sweep.settings()
        };
        tokio::spawn(sweeper::run(
            state.pool.clone(),
            settings,
            Duration::from_secs(maintenance.sweep_interval),
            state.metrics.clone(),
            stop.clone(),
        ));
    }
    let served = serve_local(
        router_with_console(state.clone(), &Function::ALL),
        listen,
        state.plan_waits.clone(),
    )
    .await;
    stop.cancel();
    // The delivery loop hands back what it claimed; without the wait the process could end
    // between its claim and its hand-back, and the channel would wait out the claim.
    if tokio::time::timeout(Duration::from_secs(5), delivering)
        .await
        .is_err()
    {
        tracing::warn!("the notification delivery did not stop within 5 s");
    }
    served
}

/// Serves `router` through the Lambda runtime API.
pub async fn serve_lambda(router: Router) -> anyhow::Result<()> {
    lambda_http::run(router)
        .await
        .map_err(|e| anyhow::anyhow!("lambda runtime: {e}"))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}

/// Refuses to serve a database whose schema is behind this build. An unreachable database
/// is not a refusal: the pool connects lazily and requests get 503 until it answers (a cold
/// Lambda must start while the database restarts).
pub async fn refuse_outdated_schema(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    match crate::db::pending_migrations(pool).await {
        Ok(pending) if pending.is_empty() => Ok(()),
        Ok(pending) => Err(anyhow::anyhow!(
            "the database schema is behind this build (pending migrations {pending:?}); \
             run `res-functions migrate`"
        )),
        // A pooler refusing the driver is a setup to mend, not an outage to wait out.
        Err(error) => match db::pooler::advice(&error) {
            Some(advice) => Err(anyhow::anyhow!("{advice}: {error}")),
            None => {
                tracing::warn!(%error, "cannot check the database schema at start; serving, requests get 503 until the database answers");
                Ok(())
            }
        },
    }
}

/// Refuses to serve through a pooler that moves sessions between server connections (see
/// [`db::pooler`]), and warns when the sessions compile with PostgreSQL's JIT. Like the
/// schema check, an unreachable database is no refusal, and the pool's own patience says
/// how long to find out.
pub async fn refuse_transaction_pooling(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    if pool.acquire().await.is_err() {
        return Ok(());
    }
    if db::pooler::transaction_pooled(&pool.connect_options()).await == Some(true) {
        anyhow::bail!(db::pooler::TRANSACTION_POOLING);
    }
    if let Ok(true) = db::pooler::jit_on(pool).await {
        tracing::warn!("{}", db::pooler::JIT_ON);
    }
    Ok(())
}

/// Command line of a single-function binary.
#[derive(Debug, Parser)]
#[command(
    version,
    about = "One RES function: on AWS Lambda when AWS_LAMBDA_RUNTIME_API is set, else as a local route"
)]
struct FunctionArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    serve: ServeArgs,
}

/// `main` of a Lambda binary serving `functions`.
pub fn function_main(functions: &[Function]) -> ExitCode {
    lambda_main(|state| router(state, functions))
}

/// `main` of the console's Lambda binary: the console pages (and health).
pub fn console_main() -> ExitCode {
    lambda_main(|state| router_with_console(state, &[]))
}

fn lambda_main(app: impl FnOnce(AppState) -> Router) -> ExitCode {
    let args = FunctionArgs::parse();
    // Lambda's log pipeline handles JSON best.
    let format = if in_lambda() {
        logging::LogFormat::Json
    } else {
        args.serve.log_format
    };
    logging::init(format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let pool = args.database.pool(if in_lambda() { 2 } else { 10 })?;
        refuse_outdated_schema(&pool).await?;
        refuse_transaction_pooling(&pool).await?;
        let settings = args.serve.settings();
        let keyring = args.serve.secrets.keyring()?;
        if in_lambda() {
            let state = AppState::with_settings(pool, settings).with_keyring(keyring);
            // No listening connection in a frozen container: the key cache's time bounds
            // a revocation there.
            serve_lambda(app(state)).await
        } else {
            let state = AppState::with_settings(pool, settings.listening()).with_keyring(keyring);
            let stop = CancellationToken::new();
            tokio::spawn(listener::run(state.clone(), stop.clone()));
            let waits = state.plan_waits.clone();
            let served = serve_local(app(state), Listen::from(&args.serve), waits).await;
            stop.cancel();
            served
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}
