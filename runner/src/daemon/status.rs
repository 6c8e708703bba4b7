//! The local status endpoint: `/healthz`, `/metrics` (Prometheus), `/status` (JSON) and
//! `/`, a page a site technician can open in a browser.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use res_shared::schedule::{Blocker, describe_blocker};
use serde::Serialize;
use uuid::Uuid;

use super::Daemon;
use super::telemetry::{JobResult, RunningJob};
use crate::plan::explain;

/// Rules listed on the status page and in `/status` at most.
const RULES_SHOWN: usize = 500;

/// Serves until the task is aborted.
pub(crate) async fn serve(daemon: Arc<Daemon>, listener: tokio::net::TcpListener) {
    let app = Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .with_state(daemon);
    if let Err(error) = axum::serve(listener, app).await {
        tracing::error!(%error, "the status endpoint stopped");
    }
}

/// `/status`.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    runner_id: String,
    boot_id: String,
    started_at: DateTime<Utc>,
    last_stop: String,
    plan_at_start: String,
    cloud_reachable: bool,
    /// `owner`, `true` or `false` (the setting).
    offline_execution: &'static str,
    /// Who runs each of this runner's branches while the functions are unreachable.
    offline_owners: Vec<OwnerRow>,
    last_refresh: Option<DateTime<Utc>>,
    clock_skew_seconds: f64,
    queue_size: usize,
    active_jobs: usize,
    alive_workers: i64,
    outbox_depth: usize,
    write_thread_alive: bool,
    memory_used_percent: Option<f64>,
    memory_limit_percent: f64,
    workflows: usize,
    rules: Vec<RuleRow>,
    running: Vec<RunningJob>,
    recent: Vec<JobResult>,
}

/// A branch's offline owner as the status page shows it.
#[derive(Debug, Serialize)]
pub(crate) struct OwnerRow {
    branch_id: Uuid,
    branch: String,
    /// The owner's runner id.
    owner: String,
    this_runner: bool,
    /// This runner holds the branch's rules until the owner's offline runs are in.
    held: bool,
}

/// One rule as the status page shows it.
#[derive(Debug, Serialize)]
pub(crate) struct RuleRow {
    id: Uuid,
    branch: String,
    rule: String,
    next_run_time: Option<DateTime<Utc>>,
    ready: bool,
    blockers: Vec<Blocker>,
    /// Held for this runner, the branch's offline owner.
    held_for: Option<String>,
    missing_since: Option<DateTime<Utc>>,
    running: bool,
    last_run_time: Option<DateTime<Utc>>,
    is_last_run_failed: bool,
}

fn snapshot(daemon: &Daemon) -> Status {
    daemon.sample_gauges();
    let now = Utc::now();
    let (workflows, rules, offline_owners) = {
        let plan = daemon.plan.read();
        let offline_owners = plan
            .offline_owners
            .iter()
            .map(|owner| OwnerRow {
                branch_id: owner.branch_id,
                branch: plan
                    .lookups
                    .branches
                    .get(&owner.branch_id)
                    .map_or_else(|| owner.branch_id.to_string(), |b| b.name.clone()),
                owner: owner.runner_id.clone(),
                this_runner: owner.is_you,
                held: plan.offline_owners.holding_for(owner.branch_id).is_some(),
            })
            .collect();
        let rules: Vec<RuleRow> = explain::listing(&plan, RULES_SHOWN)
            .into_iter()
            .map(|entry| {
                let why = explain::explain(&plan, entry, now);
                let w = &entry.workflow;
                RuleRow {
                    id: w.id,
                    branch: plan
                        .lookups
                        .branches
                        .get(&w.branch_id)
                        .map_or_else(|| w.branch_id.to_string(), |b| b.name.clone()),
                    rule: plan
                        .lookups
                        .rules
                        .get(&w.rule_id)
                        .map_or_else(|| w.rule_id.to_string(), |r| r.name.clone()),
                    next_run_time: w.next_run_time,
                    ready: why.ready,
                    blockers: why.blockers,
                    held_for: why.held_for,
                    missing_since: why.missing_since,
                    running: w.is_currently_running,
                    last_run_time: w.last_run_time,
                    is_last_run_failed: w.is_last_run_failed,
                }
            })
            .collect();
        (plan.len(), rules, offline_owners)
    };
    let (queue_size, active_jobs) = {
        let queue = daemon.queue();
        (queue.len(), queue.active())
    };
    Status {
        runner_id: daemon.config.runner_id.clone(),
        boot_id: daemon.boot_id.clone(),
        started_at: daemon.started_at,
        last_stop: daemon.last_stop.clone(),
        plan_at_start: daemon.plan_at_start.clone(),
        cloud_reachable: daemon.cloud_reachable.load(Ordering::SeqCst),
        offline_execution: daemon.config.offline_execution.as_str(),
        offline_owners,
        last_refresh: *daemon
            .last_refresh
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        clock_skew_seconds: daemon.metrics.clock_skew_seconds.get(),
        queue_size,
        active_jobs,
        alive_workers: daemon.metrics.alive_workers.get(),
        outbox_depth: daemon.outbox.depth(),
        write_thread_alive: daemon.plan.writer_stats().alive.load(Ordering::SeqCst),
        memory_used_percent: daemon.memory.used_percent(),
        memory_limit_percent: daemon.memory.limit_percent(),
        workflows,
        rules,
        running: daemon.activity.running(),
        recent: daemon.activity.recent(),
    }
}

async fn status(State(daemon): State<Arc<Daemon>>) -> Response {
    axum::Json(snapshot(&daemon)).into_response()
}

async fn healthz(State(daemon): State<Arc<Daemon>>) -> Response {
    let writer = daemon.plan.writer_stats().alive.load(Ordering::SeqCst);
    let workers = daemon.metrics.alive_workers.get();
    let body = serde_json::json!({
        "status": if writer && workers > 0 { "ok" } else { "unhealthy" },
        "write_thread_alive": writer,
        "alive_workers": workers,
        "cloud_reachable": daemon.cloud_reachable.load(Ordering::SeqCst),
    });
    let code = if writer && workers > 0 {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(body)).into_response()
}

async fn metrics(State(daemon): State<Arc<Daemon>>) -> Response {
    daemon.sample_gauges();
    let mut text = String::new();
    if let Err(error) =
        prometheus_client::encoding::text::encode(&mut text, &daemon.metrics.registry)
    {
        return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn page(State(daemon): State<Arc<Daemon>>) -> Html<String> {
    Html(render(&snapshot(&daemon)))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(
        || "—".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// The HTML status page.
pub(crate) fn render(s: &Status) -> String {
    let mut html = String::with_capacity(16 * 1024);
    let _ = write!(
        html,
        "<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content=5>\
         <title>res-runner {id}</title><style>body{{font:14px sans-serif;margin:1em}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}\
         .bad{{color:#b00}}.ok{{color:#070}}</style></head><body>\
         <h1>res-runner {id}</h1><p>Cloud: <b class={cloud_class}>{cloud}</b> · last plan refresh {refresh} · \
         clock skew {skew:.1} s · {workflows} rules · queue {queue} · running {active} · workers {workers} · \
         outbox {outbox} · memory {memory} (limit {limit}%)</p><p>Started {started}; last stop: {last_stop}; \
         plan at start: {plan}.</p>",
        id = escape(&s.runner_id),
        cloud_class = if s.cloud_reachable { "ok" } else { "bad" },
        cloud = if s.cloud_reachable {
            "reachable"
        } else {
            "unreachable"
        },
        refresh = time(s.last_refresh),
        skew = s.clock_skew_seconds,
        workflows = s.workflows,
        queue = s.queue_size,
        active = s.active_jobs,
        workers = s.alive_workers,
        outbox = s.outbox_depth,
        memory = s
            .memory_used_percent
            .map_or_else(|| "?".into(), |m| format!("{m:.0}%")),
        limit = s.memory_limit_percent,
        started = time(Some(s.started_at)),
        last_stop = escape(&s.last_stop),
        plan = escape(&s.plan_at_start),
    );
    if !s.offline_owners.is_empty() {
        let _ = write!(
            html,
            "<h2>Offline owners</h2><p>While the functions are unreachable, each branch's owner \
             runs its rules from its local plan and the other runners hold them \
             (offline_execution = {}).</p><table><tr><th>branch</th><th>owner</th><th></th></tr>",
            s.offline_execution
        );
        for owner in &s.offline_owners {
            let note = match (owner.this_runner, owner.held) {
                (true, _) => "this runner",
                (false, true) => "held: waiting for its offline runs to be in",
                (false, false) => "",
            };
            let _ = write!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{note}</td></tr>",
                escape(&owner.branch),
                escape(&owner.owner)
            );
        }
        html.push_str("</table>");
    }
    html.push_str("<h2>Running</h2><table><tr><th>rule</th><th>execution</th><th>since</th></tr>");
    for job in &s.running {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            job.branch_rule_id,
            job.execution_id
                .map_or_else(|| "claiming".into(), |e| e.to_string()),
            time(Some(job.started_at))
        );
    }
    html.push_str("</table><h2>Rules</h2>");
    if s.rules.len() < s.workflows {
        let _ = write!(
            html,
            "<p>Showing the {} running or soonest of {} rules; <code>res-runner plan why &lt;id&gt;</code> explains any rule.</p>",
            s.rules.len(),
            s.workflows
        );
    }
    html.push_str("<table><tr><th>branch</th><th>rule</th><th>id</th><th>next run</th><th>ready?</th><th>last run</th></tr>");
    for rule in &s.rules {
        let why = if rule.ready {
            "<b class=ok>ready</b>".to_owned()
        } else {
            let mut reasons: Vec<String> = rule.blockers.iter().map(describe_blocker).collect();
            if let Some(owner) = &rule.held_for {
                reasons.push(format!(
                    "held for {owner}, the branch's offline owner, until its offline runs are in"
                ));
            }
            if let Some(since) = rule.missing_since {
                reasons.push(format!(
                    "not in the server's plan since {}",
                    time(Some(since))
                ));
            }
            escape(&reasons.join("; "))
        };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td></tr>",
            escape(&rule.branch),
            escape(&rule.rule),
            rule.id,
            time(rule.next_run_time),
            why,
            time(rule.last_run_time),
            if rule.is_last_run_failed {
                " <b class=bad>failed</b>"
            } else {
                ""
            }
        );
    }
    html.push_str("</table><h2>Last results</h2><table><tr><th>rule</th><th>execution</th><th>status</th><th>started</th><th>ms</th><th>next run</th><th>error</th></tr>");
    for r in &s.recent {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.branch_rule_id,
            r.execution_id.map_or_else(|| "—".into(), |e| e.to_string()),
            escape(&r.status),
            if r.offline { " (offline)" } else { "" },
            time(Some(r.started_at)),
            r.duration_ms,
            time(r.next_run_time),
            escape(r.error.as_deref().unwrap_or(""))
        );
    }
    html.push_str("</table><p><a href=/status>/status</a> · <a href=/metrics>/metrics</a> · <a href=/healthz>/healthz</a></p></body></html>");
    html
}
