//! The local status endpoint: `/healthz`, `/metrics` (Prometheus), `/status` (JSON) and
//! `/`, a page a site technician can open in a browser.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use res_shared::schedule::{Blocker, describe_blocker};

use super::outbox::Unwritable;
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
    /// Added to this host's clock to get the server's time (0 while they agree).
    clock_correction_seconds: f64,
    /// How many secrets the plan's rules use are kept here (names and values never shown).
    secrets: usize,
    queue_size: usize,
    active_jobs: usize,
    alive_workers: i64,
    outbox_depth: usize,
    /// Of those, held in memory because the state directory refuses writes.
    outbox_in_memory: usize,
    /// Since when, and why, the state directory refuses writes (disk full, read-only).
    state_unwritable: Option<Unwritable>,
    /// Bytes free in the state directory's file system (`None`: it cannot be asked).
    state_free_bytes: Option<u64>,
    /// Since when that has been under `state_free_warn_mb`.
    state_space_low_since: Option<DateTime<Utc>>,
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
    /// Left alone after an outage until then (another runner's report may be coming).
    held_after_outage: Option<DateTime<Utc>>,
    /// Not run offline until then: it came due just before the outage, and another runner
    /// may have claimed it.
    unsure_until: Option<DateTime<Utc>>,
    missing_since: Option<DateTime<Utc>>,
    running: bool,
    last_run_time: Option<DateTime<Utc>>,
    is_last_run_failed: bool,
}

fn snapshot(daemon: &Daemon) -> Status {
    // One statvfs for the gauges and the page alike.
    let space = daemon.sample_gauges();
    let now = crate::clock::now();
    let (workflows, rules, offline_owners, secrets) = {
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
                    held_after_outage: why.held_after_outage,
                    unsure_until: why.unsure_until,
                    missing_since: why.missing_since,
                    running: w.is_currently_running,
                    last_run_time: w.last_run_time,
                    is_last_run_failed: w.is_last_run_failed,
                }
            })
            .collect();
        (plan.len(), rules, offline_owners, plan.secrets.len())
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
        clock_correction_seconds: crate::clock::correction().num_milliseconds() as f64 / 1000.0,
        secrets,
        queue_size,
        active_jobs,
        alive_workers: daemon.metrics.alive_workers.get(),
        outbox_depth: daemon.outbox.depth(),
        outbox_in_memory: daemon.outbox.in_memory(),
        state_unwritable: daemon.outbox.unwritable(),
        state_free_bytes: space.map(|space| space.free_bytes),
        state_space_low_since: space.and_then(|space| space.low_since),
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
    // Unwritable state is degraded, not unhealthy: a restart would lose the reports held in
    // memory, so nothing should restart the runner for it.
    // So is a state directory nearly full: the operator hears of it before a write fails.
    let unwritable = daemon.outbox.unwritable();
    let space = daemon.disk.read();
    let low = space.and_then(|space| space.low_since);
    let body = serde_json::json!({
        "status": match (writer && workers > 0, unwritable.is_some() || low.is_some()) {
            (false, _) => "unhealthy",
            (true, true) => "degraded",
            (true, false) => "ok",
        },
        "state_unwritable_since": unwritable.map(|u| u.since),
        "state_space_low_since": low,
        "state_free_bytes": space.map(|space| space.free_bytes),
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

async fn page(State(daemon): State<Arc<Daemon>>) -> Response {
    match render(&snapshot(&daemon)) {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::error!(%error, "the status page could not be rendered");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the status page could not be rendered; /status has the same facts",
            )
                .into_response()
        }
    }
}

fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(
        || "—".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// The HTML status page (templates/status.html, escaped by askama): `/status`'s facts with
/// times and reasons in words.
#[derive(Template)]
#[template(path = "status.html")]
struct Page<'a> {
    s: &'a Status,
    last_refresh: String,
    skew: String,
    /// "times corrected by -420.0 s to the server's", while this host's clock is off.
    corrected: Option<String>,
    memory: String,
    started: String,
    /// "unwritable since …: why", while the state directory refuses writes.
    unwritable: Option<String>,
    /// "… free since …", while the state directory is nearly full (and still writable).
    space_low: Option<String>,
    owners: Vec<OwnerLine<'a>>,
    running: Vec<RunningLine>,
    rules: Vec<RuleLine<'a>>,
    recent: Vec<ResultLine<'a>>,
}

struct OwnerLine<'a> {
    branch: &'a str,
    owner: &'a str,
    note: &'static str,
}

struct RunningLine {
    rule: Uuid,
    execution: String,
    since: String,
}

struct RuleLine<'a> {
    branch: &'a str,
    rule: &'a str,
    id: Uuid,
    next_run: String,
    /// Why it is not ready, in words; none when it is.
    waiting: Option<String>,
    last_run: String,
    failed: bool,
}

struct ResultLine<'a> {
    rule: Uuid,
    execution: String,
    status: &'a str,
    offline: bool,
    started: String,
    duration_ms: i64,
    next_run: String,
    error: &'a str,
}

fn waiting(rule: &RuleRow) -> Option<String> {
    if rule.ready {
        return None;
    }
    let mut reasons: Vec<String> = rule.blockers.iter().map(describe_blocker).collect();
    if let Some(owner) = &rule.held_for {
        reasons.push(format!(
            "held for {owner}, the branch's offline owner, until its offline runs are in"
        ));
    }
    if let Some(until) = rule.held_after_outage {
        reasons.push(format!(
            "left alone until {} after an outage: the runner that was running it may still report it",
            time(Some(until))
        ));
    }
    if let Some(until) = rule.unsure_until {
        reasons.push(format!(
            "not run offline before {}: it came due just before the outage, and another runner of the branch may have claimed it",
            time(Some(until))
        ));
    }
    if let Some(since) = rule.missing_since {
        reasons.push(format!(
            "not in the server's plan since {}",
            time(Some(since))
        ));
    }
    Some(reasons.join("; "))
}

/// The HTML status page.
pub(crate) fn render(s: &Status) -> Result<String, askama::Error> {
    let page = Page {
        s,
        last_refresh: time(s.last_refresh),
        skew: format!("{:.1}", s.clock_skew_seconds),
        corrected: (s.clock_correction_seconds != 0.0).then(|| {
            format!(
                "times corrected by {:+.1} s to the server's",
                s.clock_correction_seconds
            )
        }),
        memory: s
            .memory_used_percent
            .map_or_else(|| "?".into(), |m| format!("{m:.0}%")),
        started: time(Some(s.started_at)),
        unwritable: s
            .state_unwritable
            .as_ref()
            .map(|u| format!("unwritable since {}: {}", time(Some(u.since)), u.error)),
        space_low: s
            .state_space_low_since
            .filter(|_| s.state_unwritable.is_none())
            .map(|since| {
                format!(
                    "{} MiB free since {}",
                    s.state_free_bytes.unwrap_or(0) / (1024 * 1024),
                    time(Some(since))
                )
            }),
        owners: s
            .offline_owners
            .iter()
            .map(|owner| OwnerLine {
                branch: &owner.branch,
                owner: &owner.owner,
                note: match (owner.this_runner, owner.held) {
                    (true, _) => "this runner",
                    (false, true) => "held: waiting for its offline runs to be in",
                    (false, false) => "",
                },
            })
            .collect(),
        running: s
            .running
            .iter()
            .map(|job| RunningLine {
                rule: job.branch_rule_id,
                execution: job
                    .execution_id
                    .map_or_else(|| "claiming".into(), |e| e.to_string()),
                since: time(Some(job.started_at)),
            })
            .collect(),
        rules: s
            .rules
            .iter()
            .map(|rule| RuleLine {
                branch: &rule.branch,
                rule: &rule.rule,
                id: rule.id,
                next_run: time(rule.next_run_time),
                waiting: waiting(rule),
                last_run: time(rule.last_run_time),
                failed: rule.is_last_run_failed,
            })
            .collect(),
        recent: s
            .recent
            .iter()
            .map(|r| ResultLine {
                rule: r.branch_rule_id,
                execution: r.execution_id.map_or_else(|| "—".into(), |e| e.to_string()),
                status: &r.status,
                offline: r.offline,
                started: time(Some(r.started_at)),
                duration_ms: r.duration_ms,
                next_run: time(r.next_run_time),
                error: r.error.as_deref().unwrap_or(""),
            })
            .collect(),
    };
    page.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    fn status() -> Status {
        let hostile = "<script>alert(\"x\")</script> & co";
        Status {
            runner_id: hostile.to_owned(),
            boot_id: "boot".to_owned(),
            started_at: at("2026-03-02T08:00:00Z"),
            last_stop: "graceful".to_owned(),
            plan_at_start: "loaded".to_owned(),
            cloud_reachable: false,
            offline_execution: "owner",
            offline_owners: vec![OwnerRow {
                branch_id: Uuid::nil(),
                branch: hostile.to_owned(),
                owner: "site-b".to_owned(),
                this_runner: false,
                held: true,
            }],
            last_refresh: None,
            clock_skew_seconds: 0.26,
            clock_correction_seconds: 0.0,
            secrets: 2,
            queue_size: 1,
            active_jobs: 0,
            alive_workers: 4,
            outbox_depth: 2,
            outbox_in_memory: 0,
            state_unwritable: None,
            state_free_bytes: None,
            state_space_low_since: None,
            write_thread_alive: true,
            memory_used_percent: Some(41.6),
            memory_limit_percent: 90.0,
            workflows: 3,
            rules: vec![RuleRow {
                id: Uuid::from_u128(7),
                branch: "Olaya".to_owned(),
                rule: hostile.to_owned(),
                next_run_time: Some(at("2026-03-02T09:00:00Z")),
                ready: false,
                blockers: vec![Blocker::ForceStopped],
                held_for: Some("site-<b>".to_owned()),
                held_after_outage: None,
                unsure_until: None,
                missing_since: None,
                running: false,
                last_run_time: None,
                is_last_run_failed: true,
            }],
            running: Vec::new(),
            recent: vec![JobResult {
                branch_rule_id: Uuid::from_u128(7),
                execution_id: None,
                status: "failed".to_owned(),
                started_at: at("2026-03-02T08:30:00Z"),
                duration_ms: 1200,
                next_run_time: None,
                offline: true,
                error: Some("camera <3> gone".to_owned()),
            }],
        }
    }

    #[test]
    fn the_page_escapes_what_sites_and_rules_are_called_and_says_why_a_rule_waits() {
        let html = render(&status()).expect("renders");
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"),
            "{html}"
        );
        assert!(
            !html.contains("site-<b>") && !html.contains("camera <3>"),
            "{html}"
        );
        for shown in [
            "<b class=\"bad\">unreachable</b>",
            "clock skew 0.3 s",
            "memory 42% (limit 90%)",
            "held: waiting for its offline runs to be in",
            "Showing the 1 running or soonest of 3 rules",
            "force-stopped",
            "2026-03-02 09:00:00 UTC",
            "<b class=\"bad\">failed</b>",
            "failed (offline)",
            "00000000-0000-0000-0000-000000000007",
        ] {
            assert!(html.contains(shown), "{shown} in\n{html}");
        }
    }
}
