//! `res-functions`: every function as one local service, plus the admin commands.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use res_functions::access::key_shape;
use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::config::{DatabaseArgs, MaintenanceArgs, ServeArgs};
use res_functions::db::api_keys::{KeyScope, KeysSeen};
use res_functions::openapi::ApiDoc;
use res_functions::{AppState, db, logging, serve};
use res_shared::wire::KeySummary;
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
enum SecretsCommand {
    /// Print a new random sealing key as `ID:BASE64`, for RES_SECRETS_KEYS or its file.
    NewKey {
        /// The key's id (stored beside every value it seals).
        #[arg(long)]
        id: String,
    },
    /// Rewrap every secret sealed under another key with the first key given, so the
    /// others can be dropped (docs/deploy.md, "Rotating the sealing key").
    Rewrap {
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        secrets: res_functions::config::SecretsArgs,
    },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve every function under /functions/v1/ on one port.
    Serve {
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        serve: ServeArgs,
        #[command(flatten)]
        maintenance: MaintenanceArgs,
        /// Apply pending migrations before serving.
        #[arg(long)]
        migrate: bool,
    },
    /// Brands' secrets: make a sealing key, or rewrap every secret under the first key given.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
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
        /// `runner`: a site's runner, on its branches. `operator`: reads and acts (run now,
        /// pause, cancel) on its brands/branches. `viewer`: reads only. `service`: everything.
        #[arg(long, value_enum)]
        role: RoleArg,
        /// A branch the key may see (repeat for several).
        #[arg(long = "branch")]
        branches: Vec<Uuid>,
        /// A brand whose branches an operator or viewer key may see, including branches
        /// added later (repeat for several).
        #[arg(long = "brand")]
        brands: Vec<Uuid>,
        /// An operator or viewer key for every brand (a platform operator).
        #[arg(long)]
        all_brands: bool,
    },
    /// List API keys: name, role, scope, created and last used (never the secret).
    ListApiKeys {
        #[command(flatten)]
        database: DatabaseArgs,
        /// Include revoked keys.
        #[arg(long)]
        all: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create a successor of a key (same name, role and scope) and print its token. The old
    /// key keeps working until you revoke it, so the holder can switch without an outage.
    RotateApiKey {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The key's id, as printed by create-api-key or list-api-keys.
        id: Uuid,
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
    Operator,
    Viewer,
    Admin,
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
            maintenance,
            migrate,
        } => {
            let startup = database.command_pool()?;
            // An unreachable database ends `serve` here, after one wait for a connection
            // rather than one in the pooler check and another in the schema check.
            drop(
                startup
                    .acquire()
                    .await
                    .map_err(pooler_advice)
                    .context("cannot reach the database")?,
            );
            serve::refuse_transaction_pooling(&startup).await?;
            if migrate {
                db::migrate(&startup)
                    .await
                    .map_err(pooler_advice)
                    .context("migrating the database")?;
            }
            let pending = db::pending_migrations(&startup)
                .await
                .map_err(pooler_advice)
                .context("cannot reach the database")?;
            startup.close().await;
            let pool = database.pool(10)?;
            if !pending.is_empty() {
                bail!(
                    "the database schema is behind this build (pending migrations {pending:?}); \
                     run `res-functions migrate` or serve with --migrate"
                );
            }
            let state = AppState::with_settings(pool, serve.settings().listening())
                .with_keyring(serve.secrets.keyring()?);
            serve::serve_with_maintenance(state, serve::Listen::from(&serve), &maintenance).await
        }
        Command::Secrets { command } => secrets(command).await,
        Command::Migrate { database } => {
            let pool = database.command_pool()?;
            serve::refuse_transaction_pooling(&pool).await?;
            db::migrate(&pool)
                .await
                .map_err(pooler_advice)
                .context("migrating the database")?;
            println!("database schema is up to date");
            Ok(())
        }
        Command::CreateApiKey {
            database,
            name,
            role,
            branches,
            brands,
            all_brands,
        } => {
            let role = match role {
                RoleArg::Runner => Role::Runner,
                RoleArg::Operator => Role::Operator,
                RoleArg::Admin => Role::Admin,
                RoleArg::Viewer => Role::Viewer,
                RoleArg::Service => Role::Service,
            };
            let scope = KeyScope {
                all_brands,
                brand_ids: brands,
                branch_ids: branches,
            };
            check_scope(role, &scope)?;
            let pool = database.command_pool()?;
            let existing = db::api_keys::existing_branches(&pool, &scope.branch_ids).await?;
            let missing: Vec<_> = scope
                .branch_ids
                .iter()
                .filter(|b| !existing.contains(b))
                .collect();
            if !missing.is_empty() {
                bail!("no branch with id {missing:?}");
            }
            let existing = db::api_keys::existing_brands(&pool, &scope.brand_ids).await?;
            let missing: Vec<_> = scope
                .brand_ids
                .iter()
                .filter(|b| !existing.contains(b))
                .collect();
            if !missing.is_empty() {
                bail!("no brand with id {missing:?}");
            }
            let name = name.unwrap_or_else(|| default_key_name(role, &scope));
            let token = generate_token();
            let id = db::api_keys::insert(&pool, &name, &hash_token(&token), role, &scope).await?;
            eprintln!(
                "created {} key {id} ('{name}'); the token is shown only once:",
                role.as_str()
            );
            println!("{token}");
            Ok(())
        }
        Command::ListApiKeys {
            database,
            all,
            json,
        } => {
            let pool = database.command_pool()?;
            let keys = db::api_keys::list(&pool, KeysSeen::All, all).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
            } else {
                print!("{}", key_table(&keys));
            }
            Ok(())
        }
        Command::RotateApiKey { database, id } => {
            let pool = database.command_pool()?;
            let token = generate_token();
            let Some(new_id) = db::api_keys::rotate(&pool, id, &hash_token(&token)).await? else {
                bail!("no live, unrotated API key with id {id}");
            };
            eprintln!(
                "created key {new_id} to replace {id}; switch to this token, then run \
                 `res-functions revoke-api-key {id}`. The token is shown only once:"
            );
            println!("{token}");
            Ok(())
        }
        Command::RevokeApiKey { database, id } => {
            let pool = database.command_pool()?;
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

/// Which scope options a role takes: refused before anything is written.
fn check_scope(role: Role, scope: &KeyScope) -> anyhow::Result<()> {
    key_shape(
        role,
        scope.all_brands,
        scope.brand_ids.len(),
        scope.branch_ids.len(),
    )
    .map_err(|problem| anyhow::anyhow!("{problem} (--brand, --branch, --all-brands)"))
}

fn default_key_name(role: Role, scope: &KeyScope) -> String {
    match role {
        Role::Service => "service key".to_owned(),
        _ if scope.all_brands => format!("{} key for every brand", role.as_str()),
        _ => {
            let count = |n: usize, one: &str, many: &str| match n {
                1 => format!("1 {one}"),
                n => format!("{n} {many}"),
            };
            format!(
                "{} key for {} and {}",
                role.as_str(),
                count(scope.brand_ids.len(), "brand", "brands"),
                count(scope.branch_ids.len(), "branch", "branches")
            )
        }
    }
}

fn key_table(keys: &[KeySummary]) -> String {
    let never = || "never".to_owned();
    let rows: Vec<[String; 6]> = keys
        .iter()
        .map(|key| {
            let scope = key.scope_in_words();
            let state = match (key.revoked_at, key.rotated_to) {
                (Some(at), _) => format!("revoked {}", at.format("%Y-%m-%d %H:%M")),
                (None, Some(to)) => format!("rotated to {to}"),
                (None, None) => "live".to_owned(),
            };
            [
                key.id.to_string(),
                key.name.clone(),
                key.role.to_string(),
                scope,
                key.last_used_at
                    .map_or_else(never, |at| at.format("%Y-%m-%d %H:%M UTC").to_string()),
                state,
            ]
        })
        .collect();
    let header = ["ID", "NAME", "ROLE", "SCOPE", "LAST USED", "STATE"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(header.map(str::to_owned)).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

async fn secrets(command: SecretsCommand) -> anyhow::Result<()> {
    match command {
        SecretsCommand::NewKey { id } => {
            let key = res_functions::secrets::Keyring::new_key(&id)?;
            // Checked as a keyring reads it, so a bad id is refused here and not at serve.
            res_functions::secrets::Keyring::parse(&key)?;
            println!("{key}");
            Ok(())
        }
        SecretsCommand::Rewrap { database, secrets } => {
            let keyring = secrets
                .keyring()?
                .context("no sealing keys given (RES_SECRETS_KEYS or RES_SECRETS_KEY_FILE)")?;
            let pool = database.command_pool()?;
            let done = res_functions::secrets::rewrap_all(&pool, &keyring).await?;
            let rerun = if done.skipped > 0 {
                " (rerun to rewrap them)"
            } else {
                ""
            };
            println!(
                "{} secrets rewrapped under key '{}'; {} changed meanwhile{rerun}",
                done.rewrapped,
                keyring.active_id(),
                done.skipped
            );
            Ok(())
        }
    }
}

/// `error`, led by what to do when a pooler in front of the database caused it.
fn pooler_advice<E: std::error::Error + Send + Sync + 'static>(error: E) -> anyhow::Error {
    let advice = std::iter::successors(Some(&error as &dyn std::error::Error), |e| e.source())
        .find_map(|cause| {
            cause
                .downcast_ref::<sqlx::Error>()
                .and_then(db::pooler::advice)
        });
    match advice {
        Some(advice) => anyhow::Error::new(error).context(advice),
        None => anyhow::Error::new(error),
    }
}
