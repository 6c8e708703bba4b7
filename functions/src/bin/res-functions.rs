//! `res-functions`: every function as one local service, plus the admin commands.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::config::{DatabaseArgs, ServeArgs};
use res_functions::openapi::ApiDoc;
use res_functions::{AppState, Function, db, logging, router, serve};
use utoipa::OpenApi;
use uuid::Uuid;

#[derive(Debug, Parser)]
#[command(
    name = "res-functions",
    version,
    about = "RES cloud functions over PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve every function under /functions/v1/ on one port.
    Serve {
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        serve: ServeArgs,
        /// Apply pending migrations before serving.
        #[arg(long)]
        migrate: bool,
    },
    /// Apply pending database migrations.
    Migrate {
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Create an API key and print its token (shown once; only a hash is stored).
    CreateApiKey {
        #[command(flatten)]
        database: DatabaseArgs,
        /// A name to recognise the key by (e.g. the runner's host name) [default: the role
        /// and its branches].
        #[arg(long)]
        name: Option<String>,
        /// `runner` keys see only their branches; `service` keys see everything.
        #[arg(long, value_enum)]
        role: RoleArg,
        /// A branch the runner key may see (repeat for several).
        #[arg(long = "branch")]
        branches: Vec<Uuid>,
    },
    /// Revoke an API key by id; its token stops working at once.
    RevokeApiKey {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The key's id, as printed by create-api-key.
        id: Uuid,
    },
    /// Print the OpenAPI document.
    Openapi,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RoleArg {
    Runner,
    Service,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Serve { serve, .. } => serve.log_format,
        _ => logging::LogFormat::Text,
    };
    logging::init(format);
    let result = tokio::runtime::Runtime::new()
        .context("cannot start the async runtime")
        .and_then(|runtime| runtime.block_on(run(cli.command)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve {
            database,
            serve,
            migrate,
        } => {
            let pool = database.pool(10)?;
            if migrate {
                db::migrate(&pool).await.context("migrating the database")?;
            }
            let pending = db::pending_migrations(&pool)
                .await
                .context("cannot reach the database")?;
            if !pending.is_empty() {
                bail!(
                    "the database schema is behind this build (pending migrations {pending:?}); \
                     run `res-functions migrate` or serve with --migrate"
                );
            }
            serve::serve_local(router(AppState { pool }, &Function::ALL), serve.bind).await
        }
        Command::Migrate { database } => {
            let pool = database.pool(2)?;
            db::migrate(&pool).await.context("migrating the database")?;
            println!("database schema is up to date");
            Ok(())
        }
        Command::CreateApiKey {
            database,
            name,
            role,
            branches,
        } => {
            let role = match role {
                RoleArg::Runner => Role::Runner,
                RoleArg::Service => Role::Service,
            };
            if role == Role::Service && !branches.is_empty() {
                bail!("--branch only applies to runner keys; service keys see every branch");
            }
            if role == Role::Runner && branches.is_empty() {
                bail!("a runner key needs at least one --branch <uuid>");
            }
            let pool = database.pool(2)?;
            let existing = db::api_keys::existing_branches(&pool, &branches).await?;
            let missing: Vec<_> = branches.iter().filter(|b| !existing.contains(b)).collect();
            if !missing.is_empty() {
                bail!("no branch with id {missing:?}");
            }
            let name = name.unwrap_or_else(|| match role {
                Role::Service => "service key".to_owned(),
                Role::Runner => format!("runner key for {} branch(es)", branches.len()),
            });
            let token = generate_token();
            let id =
                db::api_keys::insert(&pool, &name, &hash_token(&token), role, &branches).await?;
            eprintln!(
                "created {} key {id} ('{name}'); the token is shown only once:",
                role.as_str()
            );
            println!("{token}");
            Ok(())
        }
        Command::RevokeApiKey { database, id } => {
            let pool = database.pool(2)?;
            if !db::api_keys::revoke(&pool, id).await? {
                bail!("no live API key with id {id}");
            }
            println!("revoked API key {id}");
            Ok(())
        }
        Command::Openapi => {
            println!("{}", ApiDoc::openapi().to_pretty_json()?);
            Ok(())
        }
    }
}
