//! `resctl`: operate RES from a terminal through the functions.

mod action;
mod channels;
mod cli;
mod commands;
mod config;
mod documents;
mod logs;
mod render;
mod resolve;
mod secrets;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use res_client::{CloudError, FunctionsClient};
use res_shared::wire::FUNCTIONS_PREFIX;

use cli::Cli;
use resolve::Unresolved;

/// How a command failed, as its exit code: scripts tell these apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Bad usage: arguments the functions refuse as malformed or out of range (400/422),
    /// the same code clap gives to arguments it cannot parse.
    BadUsage = 2,
    /// The functions refused: not allowed (403), or the state forbids it (409).
    Refused = 3,
    /// No such rule or execution in the key's scope (404).
    NotFound = 4,
    /// No answer, or the functions failed (5xx, or an answer outside the contract).
    Unreachable = 5,
    /// No token, or an unknown or revoked one (401).
    Unauthorized = 6,
}

/// clap quotes an argument it cannot place. Under `resctl secrets` that argument may be a
/// value typed on the command line, so it is refused without being repeated.
fn usage_error(error: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let shown = matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            | ErrorKind::DisplayVersion
    );
    if !shown && std::env::args().any(|arg| arg == "secrets") {
        eprintln!(
            "error: resctl secrets: an argument it does not take (not repeated here: it may be a secret value). \
             A value is read from standard input or --from-file, never from the command line: \
             printf '%s' \"$VALUE\" | resctl secrets set NAME --brand ID\n\n\
             For more information, try 'resctl secrets --help'."
        );
        std::process::exit(Failure::BadUsage as i32);
    }
    error.exit()
}

impl Failure {
    fn of(error: &Unresolved) -> Failure {
        match error {
            Unresolved::NotFound(_) => Failure::NotFound,
            Unresolved::Ambiguous(_) => Failure::Refused,
            Unresolved::BadInput(_) => Failure::BadUsage,
            Unresolved::Partly { unreachable, .. } => {
                if *unreachable {
                    Failure::Unreachable
                } else {
                    Failure::Refused
                }
            }
            Unresolved::Cloud(CloudError::Rejected { status: 401, .. }) => Failure::Unauthorized,
            Unresolved::Cloud(CloudError::Rejected { status: 404, .. }) => Failure::NotFound,
            Unresolved::Cloud(CloudError::Rejected {
                status: 400 | 422, ..
            }) => Failure::BadUsage,
            Unresolved::Cloud(CloudError::Rejected { status, .. }) if *status < 500 => {
                Failure::Refused
            }
            Unresolved::Cloud(_) => Failure::Unreachable,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|error| usage_error(error));
    // Documents are checked here, with no token and no functions.
    if let cli::Command::Config(command) = &cli.command
        && command.is_offline()
    {
        return match documents::run(command, cli.json) {
            Ok(outcome) if outcome.ok => {
                print!("{}", outcome.output);
                ExitCode::SUCCESS
            }
            Ok(outcome) => {
                print!("{}", outcome.output);
                ExitCode::from(Failure::BadUsage as u8)
            }
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::from(Failure::BadUsage as u8)
            }
        };
    }
    res_client::tls::install();
    let file = match config::load(cli.config.as_deref()) {
        Ok(file) => file,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(Failure::BadUsage as u8);
        }
    };
    let Some(token) = cli
        .token
        .clone()
        .or(file.token)
        .filter(|t| !t.trim().is_empty())
    else {
        eprintln!(
            "error: no token: pass --token, set RES_TOKEN or put `token` in the config file \
             (the key this command needs: see its --help)"
        );
        return ExitCode::from(Failure::Unauthorized as u8);
    };
    let url = cli
        .url
        .clone()
        .or(file.url)
        .unwrap_or_else(|| "http://127.0.0.1:54321".to_owned());
    let client = match FunctionsClient::new(
        &functions_url(&url),
        token.trim(),
        Duration::from_secs(cli.timeout_seconds),
        concat!("resctl/", env!("CARGO_PKG_VERSION")),
    ) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(Failure::Unreachable as u8);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(Failure::Unreachable as u8);
        }
    };
    match runtime.block_on(commands::run(&client, &cli)) {
        Ok(output) => {
            print!("{output}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let failure = Failure::of(&error);
            match error {
                Unresolved::NotFound(message)
                | Unresolved::Ambiguous(message)
                | Unresolved::BadInput(message) => {
                    eprintln!("error: {message}");
                }
                Unresolved::Partly { output, why, .. } => {
                    print!("{output}");
                    eprintln!("error: {why}");
                }
                Unresolved::Cloud(CloudError::Rejected { body, .. })
                    if body["problems"].is_array() =>
                {
                    // A refused document: every problem at its path, then the warnings.
                    for (kind, list) in
                        [("error", &body["problems"]), ("warning", &body["warnings"])]
                    {
                        for problem in list.as_array().into_iter().flatten() {
                            eprintln!(
                                "{kind}: {}: {}",
                                problem["path"].as_str().unwrap_or("$"),
                                problem["message"].as_str().unwrap_or_default()
                            );
                        }
                    }
                }
                Unresolved::Cloud(error) => eprintln!("error: {error}"),
            }
            ExitCode::from(failure as u8)
        }
    }
}

/// The functions' base URL: `--url` may name the server (`http://host:54321`) or the
/// functions themselves (`…/functions/v1`).
fn functions_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    if url.ends_with(FUNCTIONS_PREFIX) {
        url.to_owned()
    } else {
        format!("{url}{FUNCTIONS_PREFIX}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_may_name_the_server_or_the_functions() {
        assert_eq!(functions_url("http://h:1"), "http://h:1/functions/v1");
        assert_eq!(
            functions_url("http://h:1/functions/v1/"),
            "http://h:1/functions/v1"
        );
    }
}
