//! The command line and what each command calls.

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use res_client::{CloudError, FunctionsClient};
use res_shared::wire::{
    CancelExecutionRequest, DescribeRuleRequest, ExecutionListRequest, ExecutionStatus,
    ForceStopRuleRequest, PauseRuleRequest, ResumeRuleRequest, RunNowRequest, ShowExecutionRequest,
    Trigger,
};
use serde::Serialize;
use uuid::Uuid;

use crate::render;

#[derive(Debug, Parser)]
#[command(
    name = "resctl",
    version,
    about = "Operate RES: run now, pause, cancel, history"
)]
pub(crate) struct Cli {
    /// The functions' address (`http://host:54321` or `…/functions/v1`).
    #[arg(
        long,
        env = "RES_URL",
        default_value = "http://127.0.0.1:54321",
        global = true
    )]
    pub(crate) url: String,
    /// An operator or viewer key.
    #[arg(long, env = "RES_TOKEN", hide_env_values = true, global = true)]
    pub(crate) token: Option<String>,
    /// Print the functions' JSON answer instead of a table.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Give up on an answer after this many seconds.
    #[arg(long, default_value_t = 30, global = true)]
    pub(crate) timeout_seconds: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Branch rules: run now, pause, resume, force-stop, describe.
    #[command(subcommand)]
    Rules(RuleCommand),
    /// Executions: list the history, show one, cancel one.
    #[command(subcommand)]
    Executions(ExecutionCommand),
}

#[derive(Debug, Subcommand)]
enum RuleCommand {
    /// Run the rule as soon as a runner of its branch claims it, even outside its window.
    RunNow(RuleAction),
    /// No new run starts; a live run finishes.
    Pause(RuleAction),
    /// Clear a pause, a force-stop or "needs attention"; the next run comes from the schedule.
    Resume(RuleAction),
    /// No new run starts and the live run is cancelled.
    ForceStop(RuleAction),
    /// The rule's state, what blocks it, its schedule in words, next runs and last runs.
    Describe {
        /// The branch rule's id.
        rule: Uuid,
        /// How many next run times to list.
        #[arg(long, default_value_t = 5)]
        next: u32,
    },
}

#[derive(Debug, Args)]
struct RuleAction {
    /// The branch rule's id.
    rule: Uuid,
    /// Why (kept with your key's name and shown in the rule's history).
    #[arg(long)]
    reason: String,
}

#[derive(Debug, Subcommand)]
enum ExecutionCommand {
    /// Executions newest first.
    List(ListArgs),
    /// One execution in full, with its violations and retry chain.
    Show {
        /// The execution's id.
        execution: Uuid,
    },
    /// Stop an execution (a running one within one heartbeat interval).
    Cancel {
        /// The execution's id.
        execution: Uuid,
        /// Why.
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Args)]
struct ListArgs {
    #[arg(long)]
    brand: Option<Uuid>,
    #[arg(long)]
    branch: Option<Uuid>,
    /// A branch rule's id.
    #[arg(long)]
    rule: Option<Uuid>,
    /// scheduled, running, paused, completed, failed, cancelled, timeout,
    /// operation_window_exceeded or crashed.
    #[arg(long, value_parser = parse_status)]
    status: Option<ExecutionStatus>,
    /// schedule, manual, retry, crash_retry, resume or offline.
    #[arg(long, value_parser = parse_trigger)]
    trigger: Option<Trigger>,
    /// Scheduled at or after this instant (RFC 3339).
    #[arg(long)]
    since: Option<DateTime<Utc>>,
    /// Scheduled before this instant (RFC 3339).
    #[arg(long)]
    until: Option<DateTime<Utc>>,
    /// Rows per page (1–500).
    #[arg(long, default_value_t = 20)]
    limit: u32,
    /// The cursor a previous page printed.
    #[arg(long)]
    after: Option<String>,
}

fn parse_status(text: &str) -> Result<ExecutionStatus, String> {
    ExecutionStatus::parse(text).ok_or_else(|| format!("no execution status '{text}'"))
}

fn parse_trigger(text: &str) -> Result<Trigger, String> {
    Trigger::parse(text).ok_or_else(|| format!("no trigger '{text}'"))
}

/// Runs the command; its output, ready to print.
pub(crate) async fn run(client: &FunctionsClient, cli: &Cli) -> Result<String, CloudError> {
    let now = Utc::now();
    match &cli.command {
        Command::Rules(command) => match command {
            RuleCommand::RunNow(a) => {
                let request = RunNowRequest {
                    branch_rule_id: a.rule,
                    reason: a.reason.clone(),
                };
                let answer = client.call(&request).await?;
                emit(cli, &answer, || {
                    render::rule_action("run requested", &answer, now)
                })
            }
            RuleCommand::Pause(a) => {
                let request = PauseRuleRequest {
                    branch_rule_id: a.rule,
                    reason: a.reason.clone(),
                };
                let answer = client.call(&request).await?;
                emit(cli, &answer, || render::rule_action("paused", &answer, now))
            }
            RuleCommand::Resume(a) => {
                let request = ResumeRuleRequest {
                    branch_rule_id: a.rule,
                    reason: a.reason.clone(),
                };
                let answer = client.call(&request).await?;
                emit(cli, &answer, || {
                    render::rule_action("resumed", &answer, now)
                })
            }
            RuleCommand::ForceStop(a) => {
                let request = ForceStopRuleRequest {
                    branch_rule_id: a.rule,
                    reason: a.reason.clone(),
                };
                let answer = client.call(&request).await?;
                emit(cli, &answer, || {
                    render::rule_action("force-stopped", &answer, now)
                })
            }
            RuleCommand::Describe { rule, next } => {
                let request = DescribeRuleRequest {
                    branch_rule_id: *rule,
                    next_runs: Some(*next),
                };
                let answer = client.call(&request).await?;
                emit(cli, &answer, || render::description(&answer, now))
            }
        },
        Command::Executions(command) => match command {
            ExecutionCommand::List(args) => {
                let request = ExecutionListRequest {
                    brand_id: args.brand,
                    branch_id: args.branch,
                    branch_rule_id: args.rule,
                    status: args.status,
                    trigger: args.trigger,
                    since: args.since,
                    until: args.until,
                    limit: Some(args.limit),
                    after: args.after.clone(),
                };
                let answer = client.call(&request).await?;
                emit(cli, &answer, || render::history(&answer, now))
            }
            ExecutionCommand::Show { execution } => {
                let answer = client
                    .call(&ShowExecutionRequest {
                        execution_id: *execution,
                    })
                    .await?;
                emit(cli, &answer, || render::detail(&answer, now))
            }
            ExecutionCommand::Cancel { execution, reason } => {
                let request = CancelExecutionRequest {
                    execution_id: *execution,
                    reason: reason.clone(),
                };
                let answer = client.call(&request).await?;
                emit(cli, &answer, || {
                    if answer.cancel_requested {
                        format!(
                            "cancel requested: {execution} stops at its runner's next heartbeat\n"
                        )
                    } else {
                        format!("cancelled: {execution}\n")
                    }
                })
            }
        },
    }
}

/// The answer as JSON with `--json`, else as text for people.
fn emit<T: Serialize>(
    cli: &Cli,
    answer: &T,
    text: impl FnOnce() -> String,
) -> Result<String, CloudError> {
    if cli.json {
        serde_json::to_string_pretty(answer)
            .map(|json| json + "\n")
            .map_err(|e| CloudError::Invalid {
                function: "resctl",
                message: e.to_string(),
            })
    } else {
        Ok(text())
    }
}
