//! Prometheus metrics of the functions: every request by function and status with its
//! latency, what claims, reports and the sweeper did, and fleet gauges read from the
//! database when scraped (so every process reports the same fleet).

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use res_shared::wire::{FUNCTIONS_PREFIX, RunnerState};

use crate::api::group::Grouped;
use crate::db;
use crate::router::Function;
use crate::state::AppState;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    function: &'static str,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FunctionLabel {
    function: &'static str,
}

/// A label with a fixed set of values (an outcome, an action, a state).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Kind {
    kind: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Declares every metric once: its field, type, initial value, name and help; the same
/// declaration registers it, so a metric cannot exist without being exported.
macro_rules! metrics {
    ($( $field:ident: $ty:ty = $init:expr => $name:literal, $help:literal; )*) => {
        /// Every metric of a functions process.
        #[derive(Debug)]
        pub struct Metrics {
            registry: Registry,
            $( #[doc = $help] pub(crate) $field: $ty, )*
        }

        impl Default for Metrics {
            fn default() -> Self {
                let mut registry = Registry::with_prefix("res_functions");
                $(
                    let $field: $ty = $init;
                    registry.register($name, $help, $field.clone());
                )*
                let metrics = Metrics { registry, $( $field, )* };
                metrics.start_at_zero();
                metrics
            }
        }

        impl Metrics {
            /// Every metric's registered name (without the prefix and a counter's `_total`).
            pub const NAMES: &[&str] = &[$( $name ),*];
        }
    };
}

metrics! {
    requests: Family<RequestLabels, Counter> = Family::default() =>
        "requests", "Requests answered, by function and HTTP status";
    request_seconds: Family<FunctionLabel, Histogram> =
        Family::new_with_constructor(latency_histogram) =>
        "request_duration_seconds", "Time to answer a request, by function";
    request_turn_wait_seconds: Family<FunctionLabel, Histogram> =
        Family::new_with_constructor(latency_histogram) =>
        "request_turn_wait_seconds", "Time a request waited for its turn (a free database connection) before its handler ran, by function; the rest of request_duration_seconds is its work";
    request_turn_held_seconds: Family<FunctionLabel, Histogram> =
        Family::new_with_constructor(latency_histogram) =>
        "request_turn_held_seconds", "Time a request held its turn, by function: from taking it to its answer, less any time it gave the turn back while waiting for a change";
    claims: Family<Kind, Counter> = Family::default() =>
        "claims", "Claims by outcome: won (a new run or a resumed one), lost (a live run holds the rule), not_ready, busy (a batch skipped a rule another request held), error";
    group_size: Family<Kind, Histogram> = Family::new_with_constructor(group_histogram) =>
        "group_size", "Single calls made together in one transaction, calls a group, by kind: claim (branch_rules_claim), report (branch_rules_set_NextRunTime)";
    reports: Family<Kind, Counter> = Family::default() =>
        "reports", "Run reports by the status they record (completed, failed, cancelled, timeout, ...), and replayed repeats";
    reports_superseded: Counter = Counter::default() =>
        "reports_superseded", "Late reports of executions that were retried meanwhile";
    sweeper_actions: Family<Kind, Counter> = Family::default() =>
        "sweeper_actions", "What the sweeper did: crashed, needs_attention, changes_pruned, executions_deleted, violations_deleted, runners_deleted, sessions_deleted, alerts_opened, alerts_resolved";
    sweeps: Counter = Counter::default() =>
        "sweeps", "Sweeps this process ran (it held the sweeper lock)";
    runners: Family<Kind, Gauge> = Family::default() =>
        "runners", "Runners by state (alive, stale, gone), read when scraped";
    rules_overdue: Gauge = Gauge::default() =>
        "rules_overdue", "Enabled rules past their next run by over 5 minutes with nothing running them";
    rules_overdue_unserved: Gauge = Gauge::default() =>
        "rules_overdue_unserved", "Overdue rules whose branch's runners have all been silent past the stale threshold";
    branches_offline_owner_absent: Gauge = Gauge::default() =>
        "branches_offline_owner_absent", "Branches whose offline owner has been silent past the stale threshold";
    rules_needing_attention: Gauge = Gauge::default() =>
        "rules_needing_attention", "Rules marked as needing attention";
    live_executions: Gauge = Gauge::default() =>
        "live_executions", "Executions scheduled or running";
    notifications: Family<Kind, Counter> = Family::default() =>
        "notifications", "Notification deliveries by outcome: delivered, failed (retried later)";
    notification_outbox_pending: Gauge = Gauge::default() =>
        "notification_outbox_pending", "Notifications waiting for delivery";
    notification_channels_failing: Gauge = Gauge::default() =>
        "notification_channels_failing", "Notification channels whose deliveries fail";
    plan_requests_waiting: Gauge = Gauge::default() =>
        "plan_requests_waiting", "Plan requests this process holds open waiting for a change, read when scraped";
    runners_kept_present: Counter = Counter::default() =>
        "runners_kept_present", "Registry rows of waiting runners refreshed so they stay present without asking again";
    oldest_live_lease_seconds: FloatGauge = FloatGauge::default() =>
        "oldest_live_lease_seconds", "Age of the oldest live execution's claim, in seconds (0 when none)";
}

/// The calls made in groups (`api::group`).
const GROUP_KINDS: [&str; 2] = [
    <crate::api::claim_group::ClaimCall as Grouped>::KIND,
    <crate::api::next_run::ReportCall as Grouped>::KIND,
];

fn group_histogram() -> Histogram {
    Histogram::new([1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0])
}

fn latency_histogram() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// The values of the labelled counters and gauges, created at zero so every series exists
/// from the start (a rate over a series that appears later misses its first events).
const CLAIM_OUTCOMES: [&str; 5] = ["won", "lost", "not_ready", "busy", "error"];
const REPORT_OUTCOMES: [&str; 6] = [
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "operation_window_exceeded",
    "replayed",
];
/// What the sweeper counts; the names of [`crate::sweeper::SweepReport`]'s fields.
pub(crate) const SWEEPER_ACTIONS: [&str; 9] = [
    "crashed",
    "needs_attention",
    "changes_pruned",
    "executions_deleted",
    "violations_deleted",
    "runners_deleted",
    "sessions_deleted",
    "alerts_opened",
    "alerts_resolved",
];
const NOTIFICATION_OUTCOMES: [&str; 2] = ["delivered", "failed"];

impl Metrics {
    fn start_at_zero(&self) {
        for kind in GROUP_KINDS {
            drop(self.group_size.get_or_create(&Kind { kind }));
        }
        for kind in CLAIM_OUTCOMES {
            drop(self.claims.get_or_create(&Kind { kind }));
        }
        for kind in REPORT_OUTCOMES {
            drop(self.reports.get_or_create(&Kind { kind }));
        }
        for kind in SWEEPER_ACTIONS {
            drop(self.sweeper_actions.get_or_create(&Kind { kind }));
        }
        for kind in NOTIFICATION_OUTCOMES {
            drop(self.notifications.get_or_create(&Kind { kind }));
        }
        for state in RunnerState::ALL {
            drop(self.runners.get_or_create(&Kind {
                kind: state.as_str(),
            }));
        }
    }

    /// Counts a labelled event.
    pub(crate) fn count(family: &Family<Kind, Counter>, kind: &'static str) {
        Metrics::count_by(family, kind, 1);
    }

    /// Counts `n` labelled events.
    pub(crate) fn count_by(family: &Family<Kind, Counter>, kind: &'static str, n: u64) {
        family.get_or_create(&Kind { kind }).inc_by(n);
    }

    /// Every metric in the OpenMetrics text format (`None`, logged, if encoding fails).
    pub fn encode(&self) -> Option<String> {
        let mut text = String::new();
        match prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            Ok(()) => Some(text),
            Err(error) => {
                tracing::error!(%error, "cannot encode the metrics");
                None
            }
        }
    }

    fn observe(&self, function: &'static str, status: StatusCode, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                function,
                status: status.as_u16(),
            })
            .inc();
        self.request_seconds
            .get_or_create(&FunctionLabel { function })
            .observe(seconds);
    }

    /// A group of `calls` of `kind` made in one transaction.
    pub(crate) fn observe_group(&self, kind: &'static str, calls: f64) {
        self.group_size.get_or_create(&Kind { kind }).observe(calls);
    }

    /// How long a request for `path` held its turn.
    pub(crate) fn observe_turn_held(&self, path: &str, seconds: f64) {
        self.request_turn_held_seconds
            .get_or_create(&FunctionLabel {
                function: function_label(path),
            })
            .observe(seconds);
    }

    /// How long a request for `path` waited for its turn.
    pub(crate) fn observe_turn_wait(&self, path: &str, seconds: f64) {
        self.request_turn_wait_seconds
            .get_or_create(&FunctionLabel {
                function: function_label(path),
            })
            .observe(seconds);
    }
}

/// The function a path names, or `other` (unknown paths must not grow the label set).
fn function_label(path: &str) -> &'static str {
    let Some(name) = path
        .strip_prefix(FUNCTIONS_PREFIX)
        .and_then(|p| p.strip_prefix('/'))
    else {
        return "other";
    };
    match name {
        "health" => "health",
        "openapi.json" => "openapi",
        _ => Function::ALL
            .into_iter()
            .map(Function::name)
            .find(|known| *known == name)
            .unwrap_or("other"),
    }
}

/// Middleware: counts and times every request.
pub(crate) async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let function = function_label(request.uri().path());
    let started = Instant::now();
    let response = next.run(request).await;
    state
        .metrics
        .observe(function, response.status(), started.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`: the fleet gauges read now, then every metric in the text format.
pub(crate) async fn scrape(State(state): State<AppState>) -> Response {
    state
        .metrics
        .plan_requests_waiting
        .set(i64::try_from(state.plan_waits.waiting()).unwrap_or(i64::MAX));
    match db::fleet::gauges(&state.pool, state.settings.runner_thresholds).await {
        Ok(fleet) => {
            let m = &state.metrics;
            let counts = [fleet.runners_alive, fleet.runners_stale, fleet.runners_gone];
            for (state, count) in RunnerState::ALL.into_iter().zip(counts) {
                m.runners
                    .get_or_create(&Kind {
                        kind: state.as_str(),
                    })
                    .set(count);
            }
            m.rules_overdue.set(fleet.rules_overdue);
            m.rules_overdue_unserved.set(fleet.rules_overdue_unserved);
            m.branches_offline_owner_absent
                .set(fleet.branches_offline_owner_absent);
            m.rules_needing_attention.set(fleet.rules_needing_attention);
            m.live_executions.set(fleet.live_executions);
            m.notification_outbox_pending
                .set(fleet.notification_outbox_pending);
            m.notification_channels_failing
                .set(fleet.notification_channels_failing);
            m.oldest_live_lease_seconds
                .set(fleet.oldest_live_lease_seconds);
        }
        // The request metrics are still worth serving; the gauges keep their last values.
        Err(error) => tracing::warn!(%error, "cannot read the fleet gauges"),
    }
    let mut text = String::new();
    if let Err(error) =
        prometheus_client::encoding::text::encode(&mut text, &state.metrics.registry)
    {
        tracing::error!(%error, "cannot encode the metrics");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_known_functions_only() {
        assert_eq!(
            function_label("/functions/v1/branch_rules_claim"),
            "branch_rules_claim"
        );
        assert_eq!(function_label("/functions/v1/health"), "health");
        assert_eq!(function_label("/functions/v1/no-such-thing"), "other");
        assert_eq!(function_label("/elsewhere"), "other");
    }

    #[test]
    fn every_metric_is_exported() {
        let metrics = Metrics::default();
        Metrics::count(&metrics.claims, "won");
        metrics.observe("health", StatusCode::OK, 0.01);
        metrics.observe_turn_wait("/functions/v1/health", 0.001);
        metrics.observe_turn_held("/functions/v1/health", 0.002);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &metrics.registry).expect("encodes");
        for name in Metrics::NAMES {
            assert!(
                text.contains(&format!("# HELP res_functions_{name}")),
                "{name} missing from:\n{text}"
            );
        }
    }
}
