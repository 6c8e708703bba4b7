//! All SQL lives in this module, one file per table group; the integration tests run every
//! query against a real PostgreSQL.

pub(crate) mod alerts;
pub mod api_keys;
pub(crate) mod branch_rules;
pub(crate) mod changes;
pub(crate) mod channels;
pub(crate) mod claims;
pub(crate) mod config;
pub(crate) mod config_apply;
pub(crate) mod config_archive;
pub(crate) mod config_catalogue;
pub(crate) mod config_history;
pub(crate) mod executions;
pub(crate) mod fleet;
pub(crate) mod fleet_tally;
pub(crate) mod history;
pub(crate) mod nullable_word;
pub(crate) mod operator;
pub(crate) mod output;
pub(crate) mod plan;
pub(crate) mod plan_contact;
pub(crate) mod plan_delta;
pub mod pooler;
pub(crate) mod run_stats;
pub(crate) mod runners;
pub(crate) mod secrets;
pub(crate) mod sweeper;
pub(crate) mod violations;

use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

/// The schema migrations in `migrations/`, embedded in the binaries.
pub(crate) static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// A transaction on the RES database.
pub(crate) type Tx = Transaction<'static, Postgres>;

/// A transaction whose statements run with their generic (cached) plans. The statements of
/// a plan request — one per site every few seconds — have generic plans as good as any, but
/// PostgreSQL judged them costlier than plans made for the values and planned every call
/// anew: 1–3 ms of planning for 0.1–0.4 ms of work, measured at 20,000 sites. (Statements
/// whose plans depend on their values, such as a full plan's, run outside such a
/// transaction.)
pub(crate) async fn begin_generic(pool: &PgPool) -> Result<Tx, sqlx::Error> {
    pool.begin_with("BEGIN; SET LOCAL plan_cache_mode = force_generic_plan")
        .await
}

/// A claim's or a report's transaction, in the round trip of its `BEGIN`: its plan changes
/// are recorded for deltas but wake no waiting plan request (the site made them; see
/// migration `quiet_run_bookkeeping`). Each of its updates of a branch rule counts the
/// revision and records the plan change itself (`branch_rules::counted!` and
/// `branch_rules::plan_changed!`), where triggers did it for any other update: the database
/// refuses one that does not (migration `run_bookkeeping_records_itself`). With `one_rule`,
/// its statements — each reading or
/// writing that rule's rows by id — also run with their generic plans (see
/// [`begin_generic`]): PostgreSQL planned a single claim's insert anew on every call. A
/// claim of many rules keeps plans made for its arrays' lengths.
pub(crate) async fn begin_run_bookkeeping(
    pool: &PgPool,
    one_rule: bool,
) -> Result<Tx, sqlx::Error> {
    if one_rule {
        pool.begin_with(
            "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; \
             SET LOCAL res.run_bookkeeping = 'recorded'",
        )
        .await
    } else {
        pool.begin_with("BEGIN; SET LOCAL res.run_bookkeeping = 'recorded'")
            .await
    }
}

/// How long a request waits for a database connection before it is answered 503. Short,
/// so that while the database is down runners hear it at once and back off instead of
/// piling up requests that wait.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(500);

/// A pool that connects on first use, so a cold function starts even while the database
/// is briefly unreachable; requests then get 503 instead of the process dying.
pub fn lazy_pool(options: PgConnectOptions, max_connections: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .after_connect(|connection, _| Box::pin(refuse_standby(connection)))
        .connect_lazy_with(without_jit(options))
}

/// Keeps a connection only when it can write: `target_session_attrs=read-write` for the
/// one host `DATABASE_URL` names. During a failover that name may still lead to a server
/// in recovery (a DNS answer cached, a proxy not yet switched); its connections would fail
/// every write until recycled, while refused here each request answers 503 and the next
/// connection tries again (docs/deploy.md, database failover).
pub(crate) async fn refuse_standby(connection: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    let read_only: String = sqlx::query_scalar("SHOW transaction_read_only")
        .fetch_one(&mut *connection)
        .await?;
    if read_only == "on" {
        return Err(sqlx::Error::Io(std::io::Error::other(
            "the database server is read-only (a standby, or a primary being switched over)",
        )));
    }
    Ok(())
}

/// Sessions without PostgreSQL's JIT compiler. It starts on the planner's cost estimate,
/// and lateral subqueries make estimates huge for statements that run in milliseconds:
/// the sweep's alert evaluation at 100,000 rules spent 524 of its 579 ms compiling (48 ms
/// without). No RES statement runs long enough to repay a compile.
fn without_jit(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("jit", "off")])
}

/// How long a one-shot command waits for its connection (see [`command_pool`]).
pub const COMMAND_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// A two-connection pool for one-shot commands, patient where a request's pool is quick.
pub fn command_pool(options: PgConnectOptions) -> PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(COMMAND_ACQUIRE_TIMEOUT)
        .connect_lazy_with(without_jit(options))
}

/// Applies pending migrations.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Migrations embedded in this build that the database has not applied.
pub async fn pending_migrations(pool: &PgPool) -> Result<Vec<i64>, sqlx::Error> {
    let table_exists: bool =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(pool)
            .await?;
    let applied: Vec<i64> = if table_exists {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    Ok(MIGRATOR
        .iter()
        .map(|m| m.version)
        .filter(|v| !applied.contains(v))
        .collect())
}

/// The database's clock: every decision and every time a runner compares against.
pub(crate) async fn now(tx: &mut Tx) -> Result<chrono::DateTime<chrono::Utc>, sqlx::Error> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut **tx)
        .await
}
