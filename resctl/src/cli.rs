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
    /// The API key; each command's help says which role it needs [default: the config
    /// file's `token`].
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
    #[command(after_help = READS)]
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
    /// A brand's secrets (camera passwords, API tokens) that documents refer to as
    /// `${secret:NAME}`: set from standard input or a file, list, delete; values are never
    /// shown.
    #[command(subcommand)]
    Secrets(SecretCommand),
    /// Configuration documents (the catalogue, a brand): check and compare them here, print
    /// their JSON Schema, read the history of what was applied.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The stored configuration as a YAML document (an admin key): one brand, or the
    /// catalogue (a platform-wide key).
    #[command(after_help = CONFIGURES)]
    Export(ExportArgs),
    /// What applying a brand or catalogue document would change, checked by the functions
    /// (nothing is written): each object and field, and when each moved branch rule runs
    /// next.
    #[command(after_help = CONFIGURES)]
    Diff(DiffArgs),
    /// Apply a brand or catalogue document in one transaction, or nothing: the diff, then
    /// the new configuration revision. A brand document without an id names its brand by
    /// name (a platform-wide key naming a new one makes it).
    #[command(after_help = CONFIGURES)]
    Apply(ApplyArgs),
}

/// The role a reading command needs, under its help.
const READS: &str = "Key: a viewer, operator or admin key (or a service key), through --token, \
RES_TOKEN or the config file; it sees its own scope only.";
/// … an acting command.
const ACTS: &str = "Key: an operator or admin key (or a service key), through --token, \
RES_TOKEN or the config file; a viewer key is refused (exit 3).";
/// … a command over keys or channels.
const ADMIN: &str = "Key: an admin key (or, for channels, a service key), through --token, \
RES_TOKEN or the config file; it manages what lies inside its own scope.";
/// … a command over configuration documents.
const CONFIGURES: &str = "Key: an admin key of the whole brand; the catalogue takes an \
all-brands admin key or a service key. Through --token, RES_TOKEN or the config file.";
/// … a command that reads no functions.
const OFFLINE: &str = "Key: none; no functions are needed.";

/// A document to show the changes of.
#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The document (YAML or JSON; `-` reads standard input).
    #[arg(short = 'f', long = "file")]
    pub(crate) file: PathBuf,
    /// Delete what the document leaves out, with its history, instead of archiving it.
    #[arg(long)]
    pub(crate) prune: bool,
}

/// A document to apply.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    #[command(flatten)]
    pub(crate) document: DiffArgs,
    /// Why (recorded with the revision).
    #[arg(short = 'm', long = "message")]
    pub(crate) message: Option<String>,
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
    #[command(after_help = OFFLINE)]
    Schema,
    /// Check a document here, without the functions: every problem with its path, then
    /// warnings. Exit 2 when it has problems.
    #[command(after_help = OFFLINE)]
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
    #[command(after_help = OFFLINE)]
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
    #[command(after_help = CONFIGURES)]
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
    #[command(after_help = CONFIGURES)]
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
pub(crate) enum SecretCommand {
    /// Create a secret or give it a new value (its version goes up), read from standard
    /// input or --from-file; never from the command line.
    #[command(after_help = SECRETS)]
    Set {
        /// The secret's name (lower-case letters, digits, '.', '_', '-').
        name: String,
        #[arg(long)]
        brand: Uuid,
        /// Read the value from this file (`-`, the default: standard input). One trailing
        /// newline is dropped.
        #[arg(long = "from-file", default_value = "-")]
        from_file: std::path::PathBuf,
        /// Send it only to these branches' sites (repeat; default: every branch).
        #[arg(long = "branch")]
        branches: Vec<Uuid>,
    },
    /// The secrets of your brands: name, branches, version, who set it and when.
    #[command(after_help = SECRETS)]
    List {
        #[arg(long)]
        brand: Option<Uuid>,
    },
    /// Every change to one secret (created, set, deleted, rewrapped): when, which version,
    /// by whom; even after it was deleted.
    #[command(after_help = SECRETS)]
    History {
        name: String,
        #[arg(long)]
        brand: Uuid,
    },
    /// Delete a secret: sites lose it at their next plan answer, and rules referring to it
    /// fail until it is set again.
    #[command(after_help = SECRETS)]
    Delete {
        name: String,
        #[arg(long)]
        brand: Uuid,
    },
}

/// … a command over secrets.
const SECRETS: &str = "Key: an admin key of the whole brand (or an all-brands admin or \
service key), through --token, RES_TOKEN or the config file; another brand's secret answers \
as an unknown one.";

#[derive(Debug, Subcommand)]
pub(crate) enum ChannelCommand {
    /// The channels of your brands: where each points, whether it delivers, what waits.
    #[command(after_help = READS)]
    List {
        /// One brand.
        #[arg(long)]
        brand: Option<Uuid>,
    },
    /// A new channel (an admin key of the whole brand); a webhook's signing secret is
    /// printed this once.
    #[command(after_help = ADMIN)]
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
    #[command(after_help = ADMIN)]
    Delete {
        /// The channel's id.
        channel: Uuid,
    },
    /// Queue a test message behind the channel's others.
    #[command(after_help = ADMIN)]
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
    #[command(after_help = ADMIN)]
    List {
        /// Include revoked keys.
        #[arg(long)]
        all: bool,
    },
    /// Make a key inside your scope (an admin key's); its secret is printed this once.
    #[command(after_help = ADMIN)]
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
    #[command(after_help = ADMIN)]
    Rotate {
        /// The key's id.
        id: uuid::Uuid,
    },
    /// Revoke a key: it stops working at once.
    #[command(after_help = ADMIN)]
    Revoke {
        /// The key's id.
        id: uuid::Uuid,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RuleCommand {
    /// Rules with their state, next run and last run; needs-attention and overdue marked.
    #[command(after_help = READS)]
    List(RuleListArgs),
    /// Run the rule as soon as a runner of its branch claims it, even outside its window.
    #[command(after_help = ACTS)]
    RunNow(GroupableAction),
    /// No new run starts; a live run finishes.
    #[command(after_help = ACTS)]
    Pause(GroupableAction),
    /// Clear a pause, a force-stop or "needs attention"; the next run comes from the schedule.
    #[command(after_help = ACTS)]
    Resume(GroupableAction),
    /// No new run starts and the live run is cancelled.
    #[command(after_help = ACTS)]
    ForceStop(RuleAction),
    /// Acknowledge that the rule needs attention (or is overdue): `fleet` and the console
    /// show it apart, with who, why and until when, until `--hours` run out or it is
    /// flagged anew.
    #[command(after_help = ACTS)]
    Acknowledge {
        #[command(flatten)]
        action: GroupableAction,
        /// How long, 1 to 168 hours.
        #[arg(long, default_value_t = 4)]
        hours: u32,
    },
    /// The rule's state, what blocks it, its schedule in words, next runs and last runs.
    #[command(after_help = READS)]
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
    #[command(after_help = READS)]
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
    #[command(after_help = READS)]
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
    #[command(after_help = READS)]
    List(ListArgs),
    /// One execution in full, with its violations and retry chain.
    #[command(after_help = READS)]
    Show {
        /// The execution's id.
        execution: Uuid,
    },
    /// What its programs printed: the last 64 KiB of each stream of each node run, the cut
    /// marked, control characters shown as escapes.
    #[command(after_help = READS)]
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
    #[command(after_help = ACTS)]
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every command a person runs, by its words (`rules run-now`).
    fn leaves(command: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands() {
            let words = format!("{path} {}", sub.get_name()).trim().to_owned();
            if sub.has_subcommands() {
                leaves(sub, &words, out);
            } else {
                out.push((words, sub.clone()));
            }
        }
    }

    #[test]
    fn every_commands_help_names_the_key_it_needs_and_only_its_own_flags() {
        let cli = Cli::command();
        cli.clone().debug_assert();
        let token = cli
            .get_arguments()
            .find(|a| a.get_id() == "token")
            .and_then(|a| a.get_help().map(ToString::to_string))
            .unwrap_or_default();
        assert!(!token.contains("operator or viewer"), "{token}");
        let mut all = Vec::new();
        leaves(&cli, "", &mut all);
        assert!(all.len() > 25, "{}", all.len());
        for (words, command) in &all {
            let after = command
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(
                after.starts_with("Key: "),
                "`resctl {words} --help` names no key"
            );
        }
        let key = |words: &str| {
            all.iter()
                .find(|(w, _)| w == words)
                .and_then(|(_, c)| c.get_after_help().map(ToString::to_string))
                .unwrap_or_default()
        };
        for words in ["apply", "diff", "export", "config history", "config show"] {
            assert!(key(words).starts_with("Key: an admin key"), "{words}");
        }
        assert!(key("rules run-now").starts_with("Key: an operator or admin key"));
        assert!(key("rules describe").starts_with("Key: a viewer, operator or admin key"));
        assert!(key("config validate").starts_with("Key: none"));
        let flags = |words: &str| -> Vec<String> {
            all.iter()
                .find(|(w, _)| w == words)
                .map(|(_, c)| c.get_arguments().map(|a| a.get_id().to_string()).collect())
                .unwrap_or_default()
        };
        let diff = flags("diff");
        assert!(diff.contains(&"file".to_owned()) && diff.contains(&"prune".to_owned()));
        assert!(
            !diff.contains(&"force".to_owned()) && !diff.contains(&"message".to_owned()),
            "{diff:?}"
        );
        let apply = flags("apply");
        assert!(apply.contains(&"force".to_owned()) && apply.contains(&"message".to_owned()));
    }
}
