//! A rule's configuration as a person reads it (schedule in words, window, zone, the
//! workflow's nodes in the order a run meets them and its edges with their conditions),
//! its brand's change history, and an edit form for the branch rule's schedule, window and
//! active flag. The form goes through `config_apply` itself: the same validation, the diff
//! with next runs shown before Save (a dry run), and the revision recording who and why.
//! An admin of the whole brand only; another brand's rule is as unknown as any.

use askama::Template;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;
use res_config::{BranchRule, Document, NodeDoc, Window};
use res_shared::wire::{
    ConfigApplyRequest, ConfigExportRequest, ConfigHistoryRequest, DescribeRuleRequest,
    RuleDescription,
};
use serde::Deserialize;
use uuid::Uuid;

use super::error::ConsoleError;
use super::query::DoneQuery;
use super::rule::path_id;
use super::session::Signed;
use super::view::{Chrome, When, when};
use crate::api::operator::config::{ConfigScope, may_configure};
use crate::api::operator::{config, config_apply, inspect};
use crate::auth::Administrator;
use crate::db;
use crate::error::ApiError;
use crate::state::AppState;

const HISTORY_SHOWN: u32 = 20;

/// What the edit form holds (and keeps when refused or previewed).
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct EditForm {
    #[serde(default)]
    csrf: String,
    /// `preview` (a dry run) or `save`.
    #[serde(default)]
    step: String,
    /// The brand's schedule for this rule; blank follows the catalogue's.
    #[serde(default)]
    schedule: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    /// A checkbox: present when ticked.
    #[serde(default)]
    active: Option<String>,
    #[serde(default)]
    message: String,
    /// The revision the preview was made at: Save is refused if the rule changed since.
    #[serde(default)]
    base: Option<i64>,
}

struct NodeRow {
    id: String,
    kind: &'static str,
    what: String,
}

struct EdgeRow {
    from: String,
    to: String,
    condition: String,
}

struct RevisionRow {
    revision: i64,
    at: When,
    by: String,
    changes: String,
    message: String,
}

#[derive(Template)]
#[template(path = "console/configuration.html")]
struct ConfigurationPage {
    chrome: Chrome,
    id: Uuid,
    rule_name: String,
    branch_name: String,
    schedule_words: String,
    schedule_source: String,
    window: String,
    timezone: String,
    active: bool,
    settings: Vec<(&'static str, String)>,
    nodes: Vec<NodeRow>,
    edges: Vec<EdgeRow>,
    consolidation: Option<String>,
    max_runtime: Option<String>,
    history: Vec<RevisionRow>,
    form: EditForm,
    catalogue_schedule: String,
    /// The dry run's diff, shown with the Save button.
    preview: Option<String>,
    problems: Vec<String>,
    refused: Option<String>,
    done: bool,
}

/// The rule, its brand's document (at its revision) and the catalogue rule's workflow,
/// for an admin of the whole brand.
struct Loaded {
    rule: RuleDescription,
    document: Document,
    revision: i64,
}

async fn load(state: &AppState, signed: &Signed, id: Uuid) -> Result<Loaded, ConsoleError> {
    let admin = administrator(signed)?;
    let request = DescribeRuleRequest {
        branch_rule_id: id,
        next_runs: Some(1),
    };
    let rule = inspect::describe_for(state, &signed.reader(), request).await?;
    // A key of some of the brand's branches may see the rule but not configure it: to it,
    // the configuration is as unknown as the rule of another brand.
    may_configure(state, &admin.0, ConfigScope::Brand(rule.brand_id))
        .await
        .map_err(|_| ApiError::NotFound(format!("branch rule {id} not found")))?;
    let request = ConfigExportRequest {
        brand_id: Some(rule.brand_id),
        catalogue: false,
    };
    let exported = config::export_for(state, &admin, request).await?;
    let document: Document = serde_json::from_value(exported.document)
        .map_err(|e| ApiError::Internal(format!("the export would not read back: {e}")))?;
    Ok(Loaded {
        rule,
        document,
        revision: exported.revision,
    })
}

fn administrator(signed: &Signed) -> Result<Administrator, ConsoleError> {
    signed.caller.may_administer().map_err(|_| {
        ConsoleError::Forbidden(
            "a rule's configuration is changed with an admin key of its brand".into(),
        )
    })?;
    Ok(Administrator(signed.caller.clone()))
}

/// This branch rule in the brand's document.
fn branch_rule<'d>(document: &'d Document, rule: &RuleDescription) -> Option<&'d BranchRule> {
    document
        .brand
        .as_ref()?
        .branches
        .iter()
        .find(|b| b.id == Some(rule.branch_id))?
        .rules
        .get(&rule.rule_name)
}

pub(super) async fn page(
    State(state): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    query: Result<Query<DoneQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(q) = query?;
    let id = path_id("branch rule", &id)?;
    let loaded = load(&state, &signed, id).await?;
    let form = form_of(&loaded);
    let view = View {
        form,
        done: q.done.is_some(),
        ..View::default()
    };
    render(&state, &signed, &loaded, view).await
}

/// The form as the stored configuration fills it.
fn form_of(loaded: &Loaded) -> EditForm {
    let stored = branch_rule(&loaded.document, &loaded.rule);
    let window = stored.and_then(|r| r.window.clone());
    EditForm {
        schedule: brand_schedule(&loaded.document, &loaded.rule.rule_name).unwrap_or_default(),
        from: window.as_ref().map(|w| w.from.clone()).unwrap_or_default(),
        to: window.map(|w| w.to).unwrap_or_default(),
        active: stored.is_none_or(|r| r.active).then(|| "on".to_owned()),
        ..EditForm::default()
    }
}

fn brand_schedule(document: &Document, rule: &str) -> Option<String> {
    document.brand.as_ref()?.rules.get(rule)?.schedule.clone()
}

/// What the page shows besides the stored configuration.
#[derive(Default)]
struct View {
    form: EditForm,
    preview: Option<String>,
    problems: Vec<String>,
    refused: Option<String>,
    done: bool,
}

async fn render(
    state: &AppState,
    signed: &Signed,
    loaded: &Loaded,
    view: View,
) -> Result<Response, ConsoleError> {
    let rule = &loaded.rule;
    let mut conn = state.pool.acquire().await.map_err(ApiError::from)?;
    let catalogue = db::config::catalogue(&mut conn)
        .await
        .map_err(ApiError::from)?;
    drop(conn);
    let catalogue_rule = catalogue.rules.iter().find(|r| r.name == rule.rule_name);
    let workflow = catalogue_rule
        .map(|r| r.workflow.clone())
        .unwrap_or_default();
    let nodes = res_config::node_order(&workflow)
        .into_iter()
        .filter_map(|id| workflow.nodes.get(id).map(|node| node_row(id, node)))
        .collect();
    let edges = workflow
        .edges
        .iter()
        .map(|e| EdgeRow {
            from: e.from.clone(),
            to: e.to.clone(),
            condition: e.condition.clone().unwrap_or_else(|| "always".into()),
        })
        .collect();
    let stored = branch_rule(&loaded.document, rule);
    let brand_rule = loaded
        .document
        .brand
        .as_ref()
        .and_then(|b| b.rules.get(&rule.rule_name));
    let catalogue_schedule = catalogue_rule
        .and_then(|r| r.schedule.clone())
        .unwrap_or_else(|| "none".into());
    let schedule_source = if brand_rule.is_some_and(|r| r.schedule.is_some()) {
        "the brand's schedule for this rule".to_owned()
    } else {
        format!("the catalogue's default ({catalogue_schedule})")
    };
    let setting = |value: Option<String>| value.unwrap_or_else(|| "not set".into());
    let settings = vec![
        (
            "Failure threshold",
            setting(brand_rule.and_then(|r| r.failure_threshold.map(|n| n.to_string()))),
        ),
        (
            "Overlap policy",
            setting(
                stored
                    .and_then(|r| r.overlap_policy.clone())
                    .or_else(|| brand_rule.and_then(|r| r.overlap_policy.clone())),
            ),
        ),
        (
            "Jitter",
            setting(
                stored
                    .and_then(|r| r.jitter_seconds)
                    .or_else(|| brand_rule.and_then(|r| r.jitter_seconds))
                    .map(|s| format!("up to {s} s")),
            ),
        ),
    ];
    let request = ConfigHistoryRequest {
        brand_id: Some(rule.brand_id),
        catalogue: false,
        before: None,
        limit: Some(HISTORY_SHOWN),
    };
    let history = config::history_for(state, &administrator(signed)?, request)
        .await?
        .revisions;
    let now = Utc::now();
    super::html(&ConfigurationPage {
        chrome: signed.chrome("rules"),
        id: rule.branch_rule_id,
        rule_name: rule.rule_name.clone(),
        branch_name: rule.branch_name.clone(),
        schedule_words: rule.schedule.clone(),
        schedule_source,
        window: stored
            .and_then(|r| r.window.as_ref())
            .map_or_else(|| "all day".to_owned(), |w| format!("{}–{}", w.from, w.to)),
        timezone: rule.timezone.clone(),
        active: stored.is_none_or(|r| r.active),
        settings,
        nodes,
        edges,
        consolidation: workflow.consolidation_logic.clone(),
        max_runtime: workflow.max_runtime_seconds.map(|s| format!("{s} s")),
        history: history
            .iter()
            .map(|r| RevisionRow {
                revision: r.revision,
                at: when(r.applied_at, &rule.timezone, now),
                by: r.key_name.clone(),
                changes: format!("+{} ~{} -{}", r.created, r.changed, r.removed),
                message: r.message.clone(),
            })
            .collect(),
        form: view.form,
        catalogue_schedule,
        preview: view.preview,
        problems: view.problems,
        refused: view.refused,
        done: view.done,
    })
}

fn node_row(id: &str, node: &NodeDoc) -> NodeRow {
    let kind = match node.kind {
        res_config::NodeKind::Detection => "detection",
        res_config::NodeKind::Business => "business",
        res_config::NodeKind::Delay => "delay",
    };
    let what = match (&node.template, &node.action, node.seconds) {
        (_, _, Some(seconds)) => format!("waits {seconds} s"),
        (Some(template), Some(action), _) => format!("{action} with {template}"),
        (Some(template), None, _) => template.clone(),
        (None, Some(action), _) => action.clone(),
        (None, None, None) => String::new(),
    };
    NodeRow {
        id: id.to_owned(),
        kind,
        what,
    }
}

/// The brand's document with the form's values in this branch rule (and its brand rule's
/// schedule); a problem with the form itself is named by its field.
fn edited(loaded: &Loaded, form: &EditForm, base: i64) -> Result<Document, String> {
    let mut document = loaded.document.clone();
    document.base_revision = Some(base);
    let rule = &loaded.rule;
    let Some(brand) = document.brand.as_mut() else {
        return Err("the brand went missing".into());
    };
    let window = match (form.from.trim(), form.to.trim()) {
        ("", "") => None,
        ("", _) | (_, "") => {
            return Err("window: give both from and to, or neither (all day)".into());
        }
        (from, to) => Some(Window {
            from: from.to_owned(),
            to: to.to_owned(),
        }),
    };
    let schedule = Some(form.schedule.trim().to_owned()).filter(|s| !s.is_empty());
    if let Some(brand_rule) = brand.rules.get_mut(&rule.rule_name) {
        brand_rule.schedule = schedule;
    }
    let Some(branch_rule) = brand
        .branches
        .iter_mut()
        .find(|b| b.id == Some(rule.branch_id))
        .and_then(|b| b.rules.get_mut(&rule.rule_name))
    else {
        return Err("this rule is no longer configured at its branch".into());
    };
    branch_rule.window = window;
    branch_rule.active = form.active.is_some();
    Ok(document)
}

pub(super) async fn edit(
    State(state): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    form: Result<Form<EditForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    signed.check_csrf(&form.csrf)?;
    let id = path_id("branch rule", &id)?;
    let loaded = load(&state, &signed, id).await?;
    let save = match form.step.as_str() {
        "preview" => false,
        "save" => true,
        other => {
            return Err(ConsoleError::BadInput(format!(
                "step: {other:?} is not preview or save"
            )));
        }
    };
    let message = form.message.trim().to_owned();
    if message.is_empty() {
        let view = View {
            refused: Some("Reason: say why (it is recorded with the change)".into()),
            form,
            ..View::default()
        };
        return render(&state, &signed, &loaded, view).await;
    }
    // Save applies what was previewed: refused if the brand changed since, not merged.
    let base = if save {
        form.base.unwrap_or(loaded.revision)
    } else {
        loaded.revision
    };
    let document = match edited(&loaded, &form, base) {
        Ok(document) => document,
        Err(problem) => {
            let view = View {
                problems: vec![problem],
                form,
                ..View::default()
            };
            return render(&state, &signed, &loaded, view).await;
        }
    };
    let text = res_config::to_yaml(&document, "edited in the console")
        .map_err(|e| ApiError::Internal(format!("the document would not print: {e}")))?;
    let request = ConfigApplyRequest {
        document: text,
        message: Some(message),
        dry_run: !save,
        prune: false,
        force: false,
    };
    let answer = config_apply::apply_for(&state, &administrator(&signed)?, request).await;
    let error = match answer {
        Ok(_) if save => {
            let saved = format!("/console/rules/{id}/configuration?done=saved");
            return Ok(Redirect::to(&saved).into_response());
        }
        Ok(answer) => {
            let view = View {
                preview: Some(answer.summary),
                form: EditForm {
                    base: Some(base),
                    ..form
                },
                ..View::default()
            };
            return render(&state, &signed, &loaded, view).await;
        }
        // Unknown (or out of scope) stays unknown: the plain not-found page.
        Err(error @ ApiError::NotFound(_)) => return Err(error.into()),
        Err(error) => error,
    };
    // The page again, with the status the function answered and the form as it was.
    error.log_cause();
    let (status, detail) = error.detail();
    let view = match error {
        ApiError::InvalidDocument(refusal) => View {
            problems: refusal
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.path, p.message))
                .collect(),
            form,
            ..View::default()
        },
        _ => View {
            refused: Some(format!("Not saved: {}", detail.message)),
            form,
            ..View::default()
        },
    };
    Ok((status, render(&state, &signed, &loaded, view).await?).into_response())
}
