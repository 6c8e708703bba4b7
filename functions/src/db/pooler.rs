//! What a connection pooler between the functions and PostgreSQL does to them
//! (docs/deploy.md, "Connection poolers").
//!
//! The functions keep state in their sessions: sqlx prepares every statement under a name
//! kept for the connection's life, and one connection per process LISTENs for key and plan
//! changes. A pooler that hands a client's next transaction to another server connection
//! (PgBouncer's `pool_mode = transaction`) breaks both: statements fail with "prepared
//! statement sqlx_s_1 already exists" or "does not exist", mostly under load, and
//! notifications never arrive, so revoked keys keep working and waiting plan requests are
//! never woken. Such a setup is refused at start with what to do instead, rather than
//! failing one request in many. Session pooling keeps a client on one server connection
//! and works.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

/// What to do when the functions' connections go through a transaction pooler.
pub const TRANSACTION_POOLING: &str = "the database connection goes through a pooler that \
    moves a session between server connections at each transaction (PgBouncer's \
    pool_mode = transaction or statement, or a proxy doing the same); RES keeps prepared statements and a \
    LISTEN connection in its sessions, which such a pooler loses: use session pooling \
    (pool_mode = session) or connect directly (docs/deploy.md, \"Connection poolers\")";

/// What to do when a pooler refuses the driver's startup parameters.
pub const STARTUP_PARAMETERS: &str = "the database connection goes through a pooler that \
    refuses the startup parameters the functions send: in PgBouncer set \
    ignore_startup_parameters = extra_float_digits, options, and set jit = off for the \
    functions' role (docs/deploy.md, \"Connection poolers\")";

/// What to do when the functions' sessions compile with PostgreSQL's JIT.
pub const JIT_ON: &str = "PostgreSQL's JIT is on in the functions' sessions (a pooler dropped \
    the `options` startup parameter that turns it off): statements that run in milliseconds \
    then spend most of their time compiling. Run ALTER ROLE <the functions' role> SET jit = off \
    (docs/deploy.md, \"Connection poolers\")";

/// How long the probe may take before it is given up as inconclusive.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Advice for an operator when `error` is what a pooler in front of PostgreSQL does.
pub fn advice(error: &sqlx::Error) -> Option<&'static str> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    // PgBouncer's statement pooling refuses the transactions outright.
    if lost_statement(db.code().as_deref(), db.message())
        || db.message().contains("statement pooling mode")
    {
        Some(TRANSACTION_POOLING)
    } else if db.message().contains("unsupported startup parameter") {
        Some(STARTUP_PARAMETERS)
    } else {
        None
    }
}

/// A named statement the session prepared is missing, or one it had not prepared is there:
/// the session was moved to another server connection.
fn lost_statement(code: Option<&str>, message: &str) -> bool {
    // duplicate_prepared_statement, invalid_sql_statement_name
    matches!(code, Some("42P05" | "26000")) && message.contains("sqlx_s_")
}

/// Whether the connections `options` make are moved between server connections between
/// transactions; `None` when the probe could not tell (the database unreachable or slow).
///
/// Two connections: the first learns its server process, the second holds a transaction
/// open (on that same server process, when a pooler hands out its most recently freed
/// one, as PgBouncer does), and the first asks again. Directly or through a session pooler
/// it is still where it was; through a transaction pooler it has moved, or its statements
/// collide with the other connection's.
pub async fn transaction_pooled(options: &PgConnectOptions) -> Option<bool> {
    match tokio::time::timeout(PROBE_TIMEOUT, probe(options)).await {
        Ok(Ok(moved)) => Some(moved),
        Ok(Err(error)) if advice(&error) == Some(TRANSACTION_POOLING) => Some(true),
        Ok(Err(error)) => {
            tracing::warn!(%error, "cannot tell whether a pooler sits in front of the database");
            None
        }
        Err(_) => {
            tracing::warn!(
                "cannot tell whether a pooler sits in front of the database: no answer in time"
            );
            None
        }
    }
}

async fn probe(options: &PgConnectOptions) -> Result<bool, sqlx::Error> {
    let mut first = PgConnection::connect_with(options).await?;
    let mut second = PgConnection::connect_with(options).await?;
    let moved = moved(&mut first, &mut second).await;
    // Best effort: the probe's answer does not depend on a clean goodbye.
    let _ = first.close().await;
    let _ = second.close().await;
    moved
}

async fn moved(first: &mut PgConnection, second: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let before = server_process(first).await?;
    let mut holding = second.begin().await?;
    server_process(&mut holding).await?;
    let after = server_process(first).await?;
    holding.rollback().await?;
    Ok(before != after)
}

async fn server_process(connection: &mut PgConnection) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(connection)
        .await
}

/// Whether the pool's sessions run with PostgreSQL's JIT compiler on.
pub async fn jit_on(pool: &PgPool) -> Result<bool, sqlx::Error> {
    let jit: String = sqlx::query_scalar("SHOW jit").fetch_one(pool).await?;
    Ok(jit == "on")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_drivers_own_statements_count_as_lost() {
        assert!(lost_statement(
            Some("42P05"),
            "prepared statement \"sqlx_s_1\" already exists"
        ));
        assert!(lost_statement(
            Some("26000"),
            "prepared statement \"sqlx_s_7\" does not exist"
        ));
        assert!(!lost_statement(
            Some("42P05"),
            "prepared statement \"mine\" already exists"
        ));
        assert!(!lost_statement(Some("23505"), "sqlx_s_1"));
        assert!(!lost_statement(None, "sqlx_s_1"));
    }
}
