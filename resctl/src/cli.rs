//! The command line and what each command calls.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use res_shared::wire::{
    AttentionKind, ChannelKind, ExecutionStatus, OutputStream, RuleCondition, RunnerState, Trigger,
};
use uuid::Uuid;

#[derive(Debug, Parser)]
#[command(
    name = "resctl",
    version,
    about = "Operate RES: rules, runs, runners and violations over the functions"
)]
pub(crate) struct Cli {
    /// The functions' address (`http://host:54321` or `…/functions/v1`) [default: the
    /// config file's `url`, else http://127.0.0.1:54321].
    #[arg(long, env = "RES_URL", global = true)]
    pub(crate) url: Option<String>,
    /// An operator or viewer key [default: the config file's `token`].
    #[arg(long, env = "RES_TOKEN", hide_env_values = true, global = true)]
    pub(crate) token: Option<String>,
    /// A TOML file with `url` and `token` [default: $XDG_CONFIG_HOME/resctl/config.toml,
    /// else ~/.config/resctl/config.toml, when it exists].
    #[arg(long, env = "RESCTL_CONFIG", global = true)]
    pub(crate) config: Option<PathBuf>,
    /// Print the functions' JSON answer instead of a table.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Give up on an answer after this many seconds.
    #[arg(long, default_value_t = 30, global = true)]
    pub(crate) timeout_seconds: u64,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// The fleet at a glance: rules, runners and the last day's runs counted, and what
    /// needs someone grouped by rule and reason, with how many branches and since when.
    Fleet {
        /// One brand of your scope.
        #[arg(long)]
        brand: Option<Uuid>,
        /// List each group's branches with their own reason.
        #[arg(long)]
        branches: bool,
    },
    /// Branch rules: list, describe, run now, pause, resume, force-stop.
    #[command(subcommand)]
    Rules(RuleCommand),
    /// Executions: list the history, show one, cancel one.
    #[command(subcommand)]
    Executions(ExecutionCommand),
    /// Site runners: who serves which branches, and who is silent.
    #[command(subcommand)]
    Runners(RunnerCommand),
    /// Violations the rules found.
    #[command(subcommand)]
    Violations(ViolationCommand),
    /// API keys within your scope: list, create, rotate, revoke.
    #[command(subcommand)]
    Keys(KeyCommand),
    /// Where a brand's alerts go: list, create, delete, test its notification channels.
    #[command(subcommand)]
    Channels(ChannelCommand),
    /// Configuration documents (the catalogue, a brand): check and compare them here, print
    /// their JSON Schema, read the history of what was applied.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The stored configuration as a YAML document (an admin key): one brand, or the
    /// catalogue (a platform-wide key).
    Export(ExportArgs),
    /// What applying a brand or catalogue document would change, checked by the functions
    /// (nothing is written): each object and field, and when each moved branch rule runs
    /// next.
    Diff(ApplyArgs),
    /// Apply a brand or catalogue document in one transaction, or nothing: the diff, then
    /// the new configuration revision. A brand document without an id names its brand by
    /// name (a platform-wide key naming a new one makes it).
    Apply(ApplyArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// The document (YAML or JSON; `-` reads standard input).
    #[arg(short = 'f', long = "file")]
    pub(crate) file: PathBuf,
    /// Why (recorded with the revision).
    #[arg(short = 'm', long = "message")]
    pub(crate) message: Option<String>,
    /// Delete what the document leaves out, with its history, instead of archiving it.
    #[arg(long)]
    pub(crate) prune: bool,
    /// Apply even when objects it changes were changed since its base_revision.
    #[arg(long)]
    pub(crate) force: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The brand's id.
    #[arg(
        long,
        conflicts_with = "catalogue",
        required_unless_present = "catalogue"
    )]
    pub(crate) brand: Option<Uuid>,
    /// The catalogue instead of a brand.
    #[arg(long)]
    pub(crate) catalogue: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// The JSON Schema of configuration documents, for editors (`# yaml-language-server:
    /// $schema=…` or VS Code's `yaml.schemas`).
    Schema,
    /// Check a document here, without the functions: every problem with its path, then
    /// warnings. Exit 2 when it has problems.
    Validate {
        /// The document (YAML or JSON; `-` reads standard input).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// A catalogue document to check a brand's rule and template names against.
        #[arg(long)]
        catalogue: Option<PathBuf>,
    },
    /// Compare two documents here: what applying FILE over FROM would create, change and
    /// archive, with the next runs of every branch rule whose timing moves.
    Compare {
        /// The document as it was (an earlier export, say).
        #[arg(long)]
        from: PathBuf,
        /// The document as it should be.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// A catalogue document a brand's rules resolve against.
        #[arg(long)]
        catalogue: Option<PathBuf>,
        /// Show objects left out as deleted rather than archived.
        #[arg(long)]
        prune: bool,
    },
    /// The applied revisions of a brand or of the catalogue, newest first (an admin key).
    History {
        /// The brand's id.
        #[arg(
            long,
            conflicts_with = "catalogue",
            required_unless_present = "catalogue"
        )]
        brand: Option<Uuid>,
        /// The catalogue's revisions instead.
        #[arg(long)]
        catalogue: bool,
        /// Only revisions older than this one.
        #[arg(long)]
        before: Option<i64>,
        /// How many.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// One revision: who, when, why and its changes; with --document, the document as
    /// applied (apply it to roll back to that revision).
    Show {
        revision: i64,
        /// Print the document (YAML) instead of the changes.
        #[arg(long)]
        document: bool,
    },
}

impl ConfigCommand {
    /// Whether it runs here, without a token or the functions.
    pub(crate) fn is_offline(&self) -> bool {
        matches!(
            self,
            ConfigCommand::Schema | ConfigCommand::Validate { .. } | ConfigCommand::Compare { .. }
        )
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum ChannelCommand {
    /// The channels of your brands: where each points, whether it delivers, what waits.
    List {
        /// One brand.
        #[arg(long)]
        brand: Option<Uuid>,
    },
    /// A new channel (an admin key of the whole brand); a webhook's signing secret is
    /// printed this once.
    Create {
        #[arg(long)]
        brand: Uuid,
        #[arg(long)]
        name: String,
        /// webhook (signed JSON) or slack (an incoming-webhook URL).
        #[arg(long, value_parser = parse_channel_kind)]
        kind: ChannelKind,
        /// Where to POST (`--url` is the functions' address).
        #[arg(long)]
        to: String,
    },
    /// Delete a channel and the messages waiting for it.
    Delete {
        /// The channel's id.
        channel: Uuid,
    },
    /// Queue a test message behind the channel's others.
    Test {
        /// The channel's id.
        channel: Uuid,
    },
}

fn parse_channel_kind(text: &str) -> Result<ChannelKind, String> {
    ChannelKind::parse(text).ok_or_else(|| format!("no channel kind '{text}' (webhook or slack)"))
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeyCommand {
    /// Keys whose whole scope lies inside yours: name, role, scope, last use; never a secret.
    List {
        /// Include revoked keys.
        #[arg(long)]
        all: bool,
    },
    /// Make a key inside your scope (an admin key's); its secret is printed this once.
    Create {
        /// Who will hold it.
        #[arg(long)]
        name: String,
        /// runner, viewer, operator or admin.
        #[arg(long)]
        role: String,
        /// A brand id (repeatable).
        #[arg(long = "brand")]
        brands: Vec<uuid::Uuid>,
        /// A branch id or name (repeatable).
        #[arg(long = "branch")]
        branches: Vec<String>,
        /// Every brand (an all-brands admin key only).
        #[arg(long)]
        all_brands: bool,
    },
    /// Make a successor of a key, same name, role and scope; its secret is printed this once.
    /// The old key works until you revoke it.
    Rotate {
        /// The key's id.
        id: uuid::Uuid,
    },
    /// Revoke a key: it stops working at once.
    Revoke {
        /// The key's id.
        id: uuid::Uuid,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RuleCommand {
    /// Rules with their state, next run and last run; needs-attention and overdue marked.
    List(RuleListArgs),
    /// Run the rule as soon as a runner of its branch claims it, even outside its window.
    RunNow(GroupableAction),
    /// No new run starts; a live run finishes.
    Pause(GroupableAction),
    /// Clear a pause, a force-stop or "needs attention"; the next run comes from the schedule.
    Resume(GroupableAction),
    /// No new run starts and the live run is cancelled.
    ForceStop(RuleAction),
    /// Acknowledge that the rule needs attention (or is overdue): `fleet` and the console
    /// show it apart, with who, why and until when, until `--hours` run out or it is
    /// flagged anew.
    Acknowledge {
        #[command(flatten)]
        action: GroupableAction,
        /// How long, 1 to 168 hours.
        #[arg(long, default_value_t = 4)]
        hours: u32,
    },
    /// The rule's state, what blocks it, its schedule in words, next runs and last runs.
    Describe {
        #[command(flatten)]
        rule: RuleRef,
        /// How many next run times to list.
        #[arg(long, default_value_t = 5)]
        next: u32,
    },
}

/// A branch rule by id, or by rule name (with `--branch` where the name is in several).
#[derive(Debug, Args)]
pub(crate) struct RuleRef {
    /// The branch rule's id, or its rule's name.
    pub(crate) rule: String,
    /// The branch (id or name), when the rule name is in several branches.
    #[arg(long)]
    pub(crate) branch: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RuleAction {
    #[command(flatten)]
    pub(crate) rule: RuleRef,
    /// Why (kept with your key's name and shown in the rule's history).
    #[arg(long)]
    pub(crate) reason: String,
}

/// A rule action at one branch, or at every branch of one of `fleet`'s groups.
#[derive(Debug, Args)]
pub(crate) struct GroupableAction {
    #[command(flatten)]
    pub(crate) action: RuleAction,
    /// Act at every branch where `fleet` groups the rule for this reason (needs_attention
    /// or overdue), with one reason; the rule is its name or its brand rule id.
    #[arg(long, value_parser = parse_attention_kind, conflicts_with = "branch")]
    pub(crate) group: Option<AttentionKind>,
}

#[derive(Debug, Args)]
pub(crate) struct RuleListArgs {
    #[arg(long)]
    pub(crate) brand: Option<Uuid>,
    /// A branch id or name.
    #[arg(long)]
    pub(crate) branch: Option<String>,
    /// Only rules with this rule name.
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// running, idle, paused, stopped or needs_attention.
    #[arg(long, value_parser = parse_condition)]
    pub(crate) state: Option<RuleCondition>,
    #[command(flatten)]
    pub(crate) page: PageArgs,
}

#[derive(Debug, Args)]
pub(crate) struct PageArgs {
    /// Rows per page (1–500).
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: u32,
    /// The cursor a previous page printed.
    #[arg(long)]
    pub(crate) after: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunnerCommand {
    /// Runners with their state (alive, stale, gone), version, boot, last plan and outbox.
    List {
        #[arg(long)]
        brand: Option<Uuid>,
        /// A branch id or name.
        #[arg(long)]
        branch: Option<String>,
        /// alive, stale or gone.
        #[arg(long, value_parser = parse_runner_state)]
        state: Option<RunnerState>,
        #[command(flatten)]
        page: PageArgs,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ViolationCommand {
    /// Violations newest first, with the execution that found each.
    List {
        #[arg(long)]
        brand: Option<Uuid>,
        /// A branch id or name.
        #[arg(long)]
        branch: Option<String>,
        /// A branch rule's id or rule name (with --branch where the name is in several).
        #[arg(long)]
        rule: Option<String>,
        #[arg(long)]
        kind: Option<String>,
        /// Created at or after this instant (RFC 3339).
        #[arg(long)]
        since: Option<DateTime<Utc>>,
        /// Created before this instant (RFC 3339).
        #[arg(long)]
        until: Option<DateTime<Utc>>,
        #[command(flatten)]
        page: PageArgs,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ExecutionCommand {
    /// Executions newest first.
    List(ListArgs),
    /// One execution in full, with its violations and retry chain.
    Show {
        /// The execution's id.
        execution: Uuid,
    },
    /// What its programs printed: the last 64 KiB of each stream of each node run, the cut
    /// marked, control characters shown as escapes.
    Logs {
        /// The execution's id.
        execution: Uuid,
        /// Only this node's output.
        #[arg(long)]
        node: Option<String>,
        /// Only stdout or only stderr.
        #[arg(long, value_parser = parse_stream)]
        stream: Option<OutputStream>,
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
pub(crate) struct ListArgs {
    #[arg(long)]
    pub(crate) brand: Option<Uuid>,
    /// A branch id or name.
    #[arg(long)]
    pub(crate) branch: Option<String>,
    /// A branch rule's id or rule name (with --branch where the name is in several).
    #[arg(long)]
    pub(crate) rule: Option<String>,
    /// scheduled, running, paused, completed, failed, cancelled, timeout,
    /// operation_window_exceeded or crashed.
    #[arg(long, value_parser = parse_status)]
    pub(crate) status: Option<ExecutionStatus>,
    /// schedule, manual, retry, crash_retry, resume or offline.
    #[arg(long, value_parser = parse_trigger)]
    pub(crate) trigger: Option<Trigger>,
    /// Scheduled at or after this instant (RFC 3339).
    #[arg(long)]
    pub(crate) since: Option<DateTime<Utc>>,
    /// Scheduled before this instant (RFC 3339).
    #[arg(long)]
    pub(crate) until: Option<DateTime<Utc>>,
    #[command(flatten)]
    pub(crate) page: PageArgs,
    /// The cursor a page printed as "newer": the page of newer runs before it.
    #[arg(long, conflicts_with = "after")]
    pub(crate) before: Option<String>,
    /// Also count the matching runs by status (the --status filter aside).
    #[arg(long)]
    pub(crate) counts: bool,
}

fn parse_status(text: &str) -> Result<ExecutionStatus, String> {
    ExecutionStatus::parse(text).ok_or_else(|| format!("no execution status '{text}'"))
}

fn parse_stream(text: &str) -> Result<OutputStream, String> {
    OutputStream::parse(text).ok_or_else(|| format!("no stream '{text}' (stdout or stderr)"))
}

fn parse_trigger(text: &str) -> Result<Trigger, String> {
    Trigger::parse(text).ok_or_else(|| format!("no trigger '{text}'"))
}

fn parse_condition(text: &str) -> Result<RuleCondition, String> {
    RuleCondition::parse(text).ok_or_else(|| format!("no rule state '{text}'"))
}

fn parse_attention_kind(text: &str) -> Result<AttentionKind, String> {
    AttentionKind::parse(text)
        .ok_or_else(|| format!("no attention group '{text}': needs_attention or overdue"))
}

fn parse_runner_state(text: &str) -> Result<RunnerState, String> {
    RunnerState::parse(text).ok_or_else(|| format!("no runner state '{text}'"))
}
