//! What each command calls, and how its answer is printed.

use chrono::Utc;
use res_client::{CloudError, FunctionsClient};
use res_shared::untrusted::Untrusted;
use res_shared::wire::{
    CancelExecutionRequest, ChannelCreateRequest, ChannelDeleteRequest, ChannelListRequest,
    ChannelTestRequest, ConfigApplyRequest, ConfigExportRequest, ConfigHistoryRequest,
    ConfigShowRequest, DescribeRuleRequest, ExecutionListRequest, FleetSummaryRequest,
    KeyCreateRequest, KeyListRequest, KeyRevokeRequest, KeyRotateRequest,
    RuleAction::{ForceStop, Pause, Resume, RunNow},
    RuleListRequest, RunnerListRequest, SecretDeleteRequest, SecretListRequest, SecretSetRequest,
    SecretValue, ShowExecutionRequest, ViolationListRequest,
};
use serde::Serialize;
use uuid::Uuid;

use crate::action::{self, Act};
use crate::channels;
use crate::cli::{
    ApplyArgs, ChannelCommand, Cli, Command, ConfigCommand, DiffArgs, ExecutionCommand, KeyCommand,
    RuleCommand, RuleRef, RunnerCommand, SecretCommand, ViolationCommand,
};
use crate::logs;
use crate::render;
use crate::resolve::{self, Unresolved};
use crate::secrets;

/// An exported document this resctl cannot read or write.
fn invalid_document(message: String) -> Unresolved {
    Unresolved::Cloud(CloudError::Invalid {
        function: "config_export",
        message,
    })
}

/// Runs the command; its output, ready to print.
pub(crate) async fn run(client: &FunctionsClient, cli: &Cli) -> Result<String, Unresolved> {
    let now = Utc::now();
    let json = cli.json;
    match &cli.command {
        Command::Rules(command) => match command {
            RuleCommand::List(args) => {
                let request = RuleListRequest {
                    brand_id: args.brand,
                    branch_id: branch(client, args.branch.as_deref()).await?,
                    rule_name: args.name.clone(),
                    branch_name: None,
                    condition: args.state,
                    limit: Some(args.page.limit),
                    after: args.page.after.clone(),
                };
                let answer = client.call(&request).await?;
                emit(json, &answer, || render::rules(&answer, now))
            }
            RuleCommand::RunNow(a) => action::run(client, Act::Rule(RunNow), a, json, now).await,
            RuleCommand::Pause(a) => action::run(client, Act::Rule(Pause), a, json, now).await,
            RuleCommand::Acknowledge { action: a, hours } => {
                action::run(client, Act::Acknowledge { hours: *hours }, a, json, now).await
            }
            RuleCommand::Resume(a) => action::run(client, Act::Rule(Resume), a, json, now).await,
            RuleCommand::ForceStop(a) => {
                action::one(client, Act::Rule(ForceStop), a, json, now).await
            }
            RuleCommand::Describe { rule, next } => {
                let request = DescribeRuleRequest {
                    branch_rule_id: resolve::rule(client, rule).await?,
                    next_runs: Some(*next),
                };
                let answer = client.call(&request).await?;
                emit(json, &answer, || render::description(&answer, now))
            }
        },
        Command::Executions(command) => match command {
            ExecutionCommand::List(args) => {
                let rule = optional_rule(client, &args.rule, &args.branch).await?;
                let request = ExecutionListRequest {
                    brand_id: args.brand,
                    branch_id: branch(client, args.branch.as_deref()).await?,
                    branch_rule_id: rule,
                    status: args.status,
                    trigger: args.trigger,
                    since: args.since,
                    until: args.until,
                    limit: Some(args.page.limit),
                    after: args.page.after.clone(),
                    before: args.before.clone(),
                    counts: args.counts,
                };
                let answer = client.call(&request).await?;
                emit(json, &answer, || render::history(&answer, now))
            }
            ExecutionCommand::Show { execution } => {
                let answer = client
                    .call(&ShowExecutionRequest {
                        execution_id: *execution,
                        output: false,
                        output_node: None,
                    })
                    .await?;
                emit(json, &answer, || render::detail(&answer, now))
            }
            ExecutionCommand::Logs {
                execution,
                node,
                stream,
            } => {
                let answer = client
                    .call(&ShowExecutionRequest {
                        execution_id: *execution,
                        output: true,
                        output_node: node.clone(),
                    })
                    .await?;
                let outputs = logs::select(answer.output.unwrap_or_default(), *stream);
                if outputs.is_empty() {
                    eprintln!(
                        "no output kept for execution {execution}{}: its programs printed nothing, \
                         or it has not reported yet",
                        node.as_deref()
                            .map(|n| format!(" at node {}", Untrusted(n)))
                            .unwrap_or_default()
                    );
                }
                emit(json, &outputs, || logs::render(&outputs))
            }
            ExecutionCommand::Cancel { execution, reason } => {
                let request = CancelExecutionRequest {
                    execution_id: *execution,
                    reason: reason.clone(),
                };
                let answer = client.call(&request).await?;
                emit(json, &answer, || {
                    if answer.already_requested {
                        format!(
                            "already requested: {execution} stops at its runner's next heartbeat (this cancel changed nothing)\n"
                        )
                    } else if answer.cancel_requested {
                        format!(
                            "cancel requested: {execution} stops at its runner's next heartbeat\n"
                        )
                    } else {
                        format!("cancelled: {execution}\n")
                    }
                })
            }
        },
        Command::Fleet { brand, branches } => {
            let request = FleetSummaryRequest { brand_id: *brand };
            let answer = client.call(&request).await?;
            emit(json, &answer, || render::fleet(&answer, *branches, now))
        }
        Command::Runners(RunnerCommand::List {
            brand,
            branch: branch_ref,
            state,
            page,
        }) => {
            let request = RunnerListRequest {
                brand_id: *brand,
                branch_id: branch(client, branch_ref.as_deref()).await?,
                state: *state,
                limit: Some(page.limit),
                after: page.after.clone(),
            };
            let answer = client.call(&request).await?;
            emit(json, &answer, || render::runners(&answer, now))
        }
        Command::Channels(command) => match command {
            ChannelCommand::List { brand } => {
                let answer = client
                    .call(&ChannelListRequest { brand_id: *brand })
                    .await?;
                emit(json, &answer, || channels::list(&answer.channels, now))
            }
            ChannelCommand::Create {
                brand,
                name,
                kind,
                to,
            } => {
                let request = ChannelCreateRequest {
                    brand_id: *brand,
                    name: name.clone(),
                    kind: *kind,
                    url: to.clone(),
                };
                let answer = client.call(&request).await?;
                emit(json, &answer, || channels::created(&answer))
            }
            ChannelCommand::Delete { channel } => {
                let answer = client
                    .call(&ChannelDeleteRequest {
                        channel_id: *channel,
                    })
                    .await?;
                emit(json, &answer, || format!("deleted: {channel}\n"))
            }
            ChannelCommand::Test { channel } => {
                let answer = client
                    .call(&ChannelTestRequest {
                        channel_id: *channel,
                    })
                    .await?;
                emit(json, &answer, || {
                    format!("queued: a test message for {channel}\n")
                })
            }
        },
        Command::Secrets(command) => match command {
            SecretCommand::Set {
                name,
                brand,
                from_file,
                branches,
            } => {
                let value = secrets::read_value(name, from_file)?;
                let request = SecretSetRequest {
                    brand_id: *brand,
                    name: name.clone(),
                    value: SecretValue(value),
                    branch_ids: (!branches.is_empty()).then(|| branches.clone()),
                };
                let answer = client.call(&request).await?;
                emit(json, &answer, || secrets::set(&answer))
            }
            SecretCommand::List { brand } => {
                let answer = client
                    .call(&SecretListRequest {
                        brand_id: *brand,
                        name: None,
                    })
                    .await?;
                emit(json, &answer, || secrets::list(&answer.secrets, now))
            }
            SecretCommand::History { name, brand } => {
                let answer = client
                    .call(&SecretListRequest {
                        brand_id: Some(*brand),
                        name: Some(name.clone()),
                    })
                    .await?;
                emit(json, &answer, || {
                    secrets::history(name, &answer.changes, now)
                })
            }
            SecretCommand::Delete { name, brand } => {
                let answer = client
                    .call(&SecretDeleteRequest {
                        brand_id: *brand,
                        name: name.clone(),
                    })
                    .await?;
                emit(json, &answer, || format!("deleted: secret '{name}'\n"))
            }
        },
        Command::Keys(KeyCommand::List { all }) => {
            let answer = client
                .call(&KeyListRequest {
                    include_revoked: *all,
                })
                .await?;
            emit(json, &answer, || render::keys(&answer.keys, now))
        }
        Command::Keys(KeyCommand::Create {
            name,
            role,
            brands,
            branches,
            all_brands,
        }) => {
            let mut branch_ids = Vec::new();
            for branch in branches {
                branch_ids.push(resolve::branch(client, branch).await?);
            }
            let answer = client
                .call(&KeyCreateRequest {
                    name: name.clone(),
                    role: role.clone(),
                    brand_ids: brands.clone(),
                    branch_ids,
                    all_brands: *all_brands,
                })
                .await?;
            emit(json, &answer, || render::secret("created", &answer))
        }
        Command::Keys(KeyCommand::Rotate { id }) => {
            let answer = client.call(&KeyRotateRequest { key_id: *id }).await?;
            emit(json, &answer, || {
                render::secret("rotated: its successor", &answer)
            })
        }
        Command::Keys(KeyCommand::Revoke { id }) => {
            let answer = client.call(&KeyRevokeRequest { key_id: *id }).await?;
            emit(json, &answer, || {
                format!("revoked: {} ({})\n", answer.key.id, answer.key.name)
            })
        }
        Command::Config(ConfigCommand::History {
            brand,
            catalogue,
            before,
            limit,
        }) => {
            let answer = client
                .call(&ConfigHistoryRequest {
                    brand_id: *brand,
                    catalogue: *catalogue,
                    before: *before,
                    limit: *limit,
                })
                .await?;
            emit(json, &answer, || {
                render::config_history(&answer.revisions, now)
            })
        }
        Command::Config(ConfigCommand::Show { revision, document }) => {
            let answer = client
                .call(&ConfigShowRequest {
                    revision: *revision,
                })
                .await?;
            if json {
                return emit(json, &answer, String::new);
            }
            if *document {
                let parsed: res_config::Document = serde_json::from_value(answer.document.clone())
                    .map_err(|e| invalid_document(e.to_string()))?;
                let header = format!(
                    "RES configuration as revision {} applied it ({}, {}).\n\
                     Apply it to roll back to it: resctl apply -f FILE",
                    answer.revision.revision,
                    answer.revision.key_name,
                    answer.revision.applied_at.format("%Y-%m-%d %H:%M UTC")
                );
                return res_config::to_yaml(&parsed, &header).map_err(invalid_document);
            }
            let diff: res_config::Diff = serde_json::from_value(answer.diff.clone())
                .map_err(|e| invalid_document(e.to_string()))?;
            Ok(render::config_revision(&answer.revision, &diff, now))
        }
        // Run offline in `main`, before any client exists.
        Command::Config(_) => Ok(String::new()),
        Command::Diff(args) => apply(client, args, None, json).await,
        Command::Apply(args) => apply(client, &args.document, Some(args), json).await,
        Command::Export(args) => {
            let answer = client
                .call(&ConfigExportRequest {
                    brand_id: args.brand,
                    catalogue: args.catalogue,
                })
                .await?;
            if json {
                return emit(json, &answer, String::new);
            }
            let document: res_config::Document = serde_json::from_value(answer.document)
                .map_err(|e| invalid_document(e.to_string()))?;
            let header = format!(
                "RES configuration at revision {}, exported {}.\n\
                 Check an edited copy with: resctl config validate -f FILE",
                answer.revision,
                now.format("%Y-%m-%d %H:%M UTC")
            );
            res_config::to_yaml(&document, &header).map_err(invalid_document)
        }
        Command::Violations(ViolationCommand::List {
            brand,
            branch: branch_ref,
            rule,
            kind,
            since,
            until,
            page,
        }) => {
            let rule = optional_rule(client, rule, branch_ref).await?;
            let request = ViolationListRequest {
                brand_id: *brand,
                branch_id: branch(client, branch_ref.as_deref()).await?,
                branch_rule_id: rule,
                kind: kind.clone(),
                since: *since,
                until: *until,
                limit: Some(page.limit),
                after: page.after.clone(),
            };
            let answer = client.call(&request).await?;
            emit(json, &answer, || render::violations(&answer, now))
        }
    }
}

/// `resctl diff` (no `apply`: nothing is written) or `resctl apply`.
async fn apply(
    client: &FunctionsClient,
    document: &DiffArgs,
    apply: Option<&ApplyArgs>,
    json: bool,
) -> Result<String, Unresolved> {
    let text = crate::documents::read_text(&document.file).map_err(Unresolved::BadInput)?;
    let answer = client
        .call(&ConfigApplyRequest {
            document: text,
            message: apply.and_then(|a| a.message.clone()),
            dry_run: apply.is_none(),
            prune: document.prune,
            force: apply.is_some_and(|a| a.force),
        })
        .await?;
    emit(json, &answer, || render::applied(&answer, apply.is_none()))
}

/// A `--rule` filter (id or name, narrowed by `--branch`).
async fn optional_rule(
    client: &FunctionsClient,
    rule: &Option<String>,
    branch: &Option<String>,
) -> Result<Option<Uuid>, Unresolved> {
    let Some(rule) = rule else { return Ok(None) };
    let reference = RuleRef {
        rule: rule.clone(),
        branch: branch.clone(),
    };
    resolve::rule(client, &reference).await.map(Some)
}

async fn branch(client: &FunctionsClient, text: Option<&str>) -> Result<Option<Uuid>, Unresolved> {
    match text {
        Some(text) => resolve::branch(client, text).await.map(Some),
        None => Ok(None),
    }
}

/// The answer as JSON with `--json`, else as text for people.
pub(crate) fn emit<T: Serialize>(
    json: bool,
    answer: &T,
    text: impl FnOnce() -> String,
) -> Result<String, Unresolved> {
    if json {
        serde_json::to_string_pretty(answer)
            .map(|json| json + "\n")
            .map_err(|e| {
                Unresolved::Cloud(CloudError::Invalid {
                    function: "resctl",
                    message: e.to_string(),
                })
            })
    } else {
        Ok(text())
    }
}
