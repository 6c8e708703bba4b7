//! `get-execution-plan-v2`: the workflows a runner may execute, in full or as a delta.

mod keepalive;

pub(crate) use keepalive::ANSWERED as KEEPALIVE_ANSWERED;

use res_shared::wire::ErrorCode;
use std::collections::BTreeSet;

use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeDelta, Utc};
use res_shared::wire::{
    ColumnarPlan, ErrorBody, PLAN_FORMAT_COLUMNS, PLAN_FORMAT_HOURS, PLAN_FORMAT_SHARED, PlanEntry,
    PlanLookups, PlanRequest, PlanResponse, SharedPlan,
};
use tokio::time::Instant;
use uuid::Uuid;

use super::cursor::{PlanCursor, PlanKind, plan_kind, scope_key};
use super::{require_runner_id, require_text};
use crate::access::{Role, Scope};
use crate::admission::TurnSlot;
use crate::auth::SiteCaller;
use crate::db;
use crate::db::changes::Glance;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::logging::Untrusted;
use crate::plan_waits::WaitingRunner;
use crate::state::AppState;

/// Serve the caller's execution plan.
#[utoipa::path(
    post,
    path = "/functions/v1/get-execution-plan-v2",
    request_body = PlanRequest,
    responses(
        (status = 200, description = "The plan: a full snapshot, or the changes since `since`", body = PlanResponse),
        (status = 400, description = "Malformed body or cursor", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 422, description = "Empty runner_id, or wait_seconds over 300", body = ErrorBody),
        (status = 503, description = "The database is unavailable, or the functions are overloaded", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "plan"
)]
pub(crate) async fn get_execution_plan(
    State(state): State<AppState>,
    turn: Option<Extension<TurnSlot>>,
    headers: HeaderMap,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<PlanRequest>,
) -> Result<Response, ApiError> {
    require_runner_id("runner_id", &request.runner_id)?;
    if let Some(version) = request.health.as_ref().and_then(|h| h.version.as_ref()) {
        require_text("health.version", version, 100)?;
    }
    if let Some(format) = request
        .format
        .filter(|f| !(1..=PLAN_FORMAT_HOURS).contains(f))
    {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!(
                "format must be 1, 2, {PLAN_FORMAT_COLUMNS} or {PLAN_FORMAT_HOURS}, got {format}"
            ),
        ));
    }
    let requested_wait = request.wait_seconds.unwrap_or(0);
    if requested_wait > MAX_WAIT_SECONDS {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("wait_seconds must be between 0 and {MAX_WAIT_SECONDS}"),
        ));
    }
    let since = request
        .since
        .as_deref()
        .map(PlanCursor::decode)
        .transpose()
        .map_err(|message| ApiError::bad_request(ErrorCode::InvalidCursor, message))?;
    let scope = caller.scope();
    let scope_fingerprint = scope_key(scope);

    // Watching starts before the first read, so a change committed after that read's
    // snapshot is heard even if it commits before the wait begins.
    let wait = Duration::from_secs(u64::from(requested_wait)).min(state.settings.plan_wait_max);
    let may_wait = since.is_some() && turn.is_some() && !wait.is_zero();
    let waiter = if may_wait {
        state
            .plan_waits
            .watch(scope, waiting_runner(&caller, &request))
    } else {
        None
    };
    // Up to a sixteenth less: sites woken together (a shared definition changed) would
    // otherwise come back together at every wait's end.
    let deadline = Instant::now() + wait.mul_f64(1.0 - rand::random::<f64>() / 16.0);
    // Noted, and the offline owners read, at or before the plan's snapshot: an owner's
    // contact seen there came after its outbox was delivered, so the snapshot holds its
    // offline runs — a runner holding the branch for it may go on once it sees that. A
    // runner's delta takes its first look at the changes in the same statement.
    let contact = db::plan_contact::PlanContact {
        key_id: caller.key_id,
        runner_id: &request.runner_id,
        health: request.health.as_ref(),
        branches: match caller.role {
            Role::Runner => &caller.branch_ids,
            _ => &[],
        },
        may_own: request.health.as_ref().and_then(|h| h.runs_offline),
        stale_after_seconds: state.settings.runner_thresholds.stale_after_seconds,
    };
    let (offline_owners, glance) = match (&since, caller.role) {
        (Some(cursor), Role::Runner) if db::changes::probes(&caller.branch_ids) => {
            let (owners, glance) = db::plan_contact::noted_with_glance(
                &state.pool,
                &contact,
                (&cursor.snapshot, cursor.at),
            )
            .await?;
            (owners, Some(glance))
        }
        _ => (db::plan_contact::noted(&state.pool, &contact).await?, None),
    };
    let read = read_plan(&state, scope, since.as_ref(), &scope_fingerprint, glance).await?;
    let turn = turn.map(|Extension(turn)| turn);
    // Only a request that will wait answers early: one with news keeps its status.
    let keep_alive = keepalive::asked(&headers)
        && !state.settings.plan_keepalive.is_zero()
        && waiter.is_some()
        && turn.is_some()
        && read.is_unchanged();
    let pending = Pending {
        state,
        caller,
        request,
        since,
        scope_fingerprint,
        read,
        read_at: Instant::now(),
        waiter,
        turn,
        deadline,
        wait,
        may_wait,
        offline_owners,
    };
    if keep_alive {
        let interval = pending.state.settings.plan_keepalive;
        return Ok(keepalive::respond(interval, pending.finish()));
    }
    let body = pending.finish().await?;
    Ok(([(CONTENT_TYPE, "application/json")], body).into_response())
}

/// What a plan request still has to do after its first read, owned, so that it can go on
/// after a keep-alive answer has begun.
struct Pending {
    state: AppState,
    caller: crate::access::Caller,
    request: PlanRequest,
    since: Option<PlanCursor>,
    scope_fingerprint: String,
    read: PlanRead,
    read_at: Instant,
    waiter: Option<crate::plan_waits::Waiter>,
    turn: Option<TurnSlot>,
    deadline: Instant,
    wait: Duration,
    may_wait: bool,
    offline_owners: Vec<res_shared::wire::OfflineOwner>,
}

impl Pending {
    /// Waits for a change (when it may), then the plan as JSON.
    async fn finish(self) -> Result<Vec<u8>, ApiError> {
        let Pending {
            state,
            caller,
            request,
            since,
            scope_fingerprint,
            mut read,
            mut read_at,
            waiter,
            turn,
            deadline,
            wait,
            may_wait,
            offline_owners,
        } = self;
        let scope = caller.scope();
        let older_format = request.format.unwrap_or(1) < PLAN_FORMAT_HOURS;
        // The database's time when answered: the read's, unless a wait ran out after it.
        let mut generated_at = read.now;
        if let (Some(waiter), Some(turn)) = (&waiter, &turn) {
            while read.is_unchanged() {
                // Waiting holds neither a connection nor a turn: thousands of sites may wait.
                turn.give_back();
                let heard = tokio::time::timeout_at(deadline, waiter.changed())
                    .await
                    .is_ok();
                if !heard {
                    // Every commit in scope since the read would have been heard, so its
                    // empty delta and cursor still hold: no second read, an idle site's wait
                    // costs one statement. Only time moved on; what time alone changes (a
                    // lease that ran out) the next request's first read brings.
                    generated_at =
                        read.now + TimeDelta::from_std(read_at.elapsed()).unwrap_or_default();
                    break;
                }
                turn.take_again().await?;
                read = read_plan(&state, scope, since.as_ref(), &scope_fingerprint, None).await?;
                read_at = Instant::now();
                generated_at = read.now;
                if waiter.must_answer() {
                    break;
                }
            }
        }
        if older_format {
            let left_out = without_hours(
                &mut read.workflows,
                (!read.full).then_some(&mut read.removed),
                &mut read.lookups,
            );
            if left_out > 0 {
                tracing::info!(runner_id = %Untrusted(&request.runner_id), left_out, "rules that need opening hours left out of an older plan format");
            }
        }
        tracing::info!(
            runner_id = %Untrusted(&request.runner_id),
            full = read.full,
            workflows = read.workflows.len(),
            removed = read.removed.len(),
            "served execution plan"
        );
        // Only a site's runner is sent secret values, and only those its answered rules use.
        let secrets = if caller.role == Role::Runner {
            crate::secrets::plan::for_answer(
                &state.pool,
                state.keyring.as_deref(),
                &read.workflows,
                &read.lookups,
            )
            .await?
        } else {
            Vec::new()
        };
        let plan = PlanResponse {
            generated_at,
            secrets,
            cursor: PlanCursor::new(read.snapshot, read.now, scope_fingerprint).encode(),
            full: read.full,
            workflows: read.workflows,
            removed: read.removed,
            lookups: read.lookups,
            // A process shutting down waits no more, but its runners should ask again at
            // once (the next serve waits), not fall back to polling.
            wait_seconds: if waiter.is_some() || (may_wait && state.plan_waits.is_stopped()) {
                u32::try_from(wait.as_secs()).unwrap_or(u32::MAX)
            } else {
                0
            },
            offline_owners,
        };
        // A turn taken again after a keep-alive answer began is not the middleware's to end.
        if let Some(turn) = &turn {
            turn.give_back();
        }
        plan_json(&plan, request.format)
    }
}

/// A plan for a runner that reads no opening hours (a format before 4): a rule that needs
/// them would run on closed days there, so it is left out (a delta names it removed; a full
/// plan just does not list it), and
/// what remains is sent exactly as before hours existed. How many were left out.
fn without_hours(
    workflows: &mut Vec<PlanEntry>,
    mut removed: Option<&mut Vec<uuid::Uuid>>,
    lookups: &mut PlanLookups,
) -> usize {
    let before = workflows.len();
    workflows.retain_mut(|entry| {
        let needs = needs_hours(entry);
        if needs {
            if let Some(removed) = removed.as_deref_mut() {
                removed.push(entry.id);
            }
        } else {
            entry.timing = None;
        }
        !needs
    });
    for branch in lookups.branches.values_mut() {
        branch.hours = None;
    }
    for brand in lookups.brands.values_mut() {
        brand.calendars.clear();
    }
    before - workflows.len()
}

/// Whether an entry's schedule depends on opening hours or dates an older runner ignores.
pub(crate) fn needs_hours(entry: &PlanEntry) -> bool {
    entry
        .timing
        .as_ref()
        .is_some_and(res_shared::schedule::TimingSpec::needs_hours)
        || entry
            .cron_expression
            .as_deref()
            .is_some_and(res_shared::schedule::AnchorSchedule::is_anchor)
}

/// The runner behind a site's plan request, kept present while its request waits; a
/// service key's caller is not a site's runner.
fn waiting_runner(caller: &crate::access::Caller, request: &PlanRequest) -> Option<WaitingRunner> {
    let runs_offline = request.health.as_ref().and_then(|h| h.runs_offline);
    (caller.role == Role::Runner).then(|| WaitingRunner {
        key_id: caller.key_id,
        runner_id: request.runner_id.clone(),
        may_own: match runs_offline {
            Some(true) => caller.branch_ids.clone(),
            _ => Vec::new(),
        },
    })
}

/// The longest wait a request may ask for; the server's own limit
/// (`--plan-wait-max-seconds`) may shorten it.
const MAX_WAIT_SECONDS: u32 = 300;

/// One reading of the plan: in full, or the changes since a cursor.
struct PlanRead {
    now: DateTime<Utc>,
    snapshot: String,
    full: bool,
    workflows: Vec<PlanEntry>,
    removed: Vec<Uuid>,
    lookups: PlanLookups,
}

impl PlanRead {
    /// A delta with nothing in it.
    fn is_unchanged(&self) -> bool {
        !self.full && self.workflows.is_empty() && self.removed.is_empty()
    }
}

/// Reads the plan in full or the changes since `since`; `glance` is a first look at those
/// changes already taken (else it is taken here).
async fn read_plan(
    state: &AppState,
    scope: Scope<'_>,
    since: Option<&PlanCursor>,
    scope_fingerprint: &str,
    glance: Option<Glance>,
) -> Result<PlanRead, ApiError> {
    // Nearly every delta of a fleet is unchanged: one statement answers it.
    if let Some(cursor) = since {
        let glance = match glance {
            Some(glance) => glance,
            None => db::changes::glance(&state.pool, &cursor.snapshot, cursor.at, scope).await?,
        };
        let delta = matches!(
            plan_kind(Some(cursor.clone()), scope_fingerprint, glance.now),
            PlanKind::Delta(_)
        );
        if delta && !glance.changed {
            return Ok(PlanRead {
                now: glance.now,
                snapshot: glance.snapshot,
                full: false,
                workflows: Vec::new(),
                removed: Vec::new(),
                lookups: PlanLookups::default(),
            });
        }
        // A site's changed delta (after each of its own claims and reports): one more.
        if let (true, Scope::Branches(branches)) = (delta, scope)
            && db::changes::probes(branches)
        {
            let read =
                db::plan_delta::read(&state.pool, (&cursor.snapshot, cursor.at), branches).await?;
            if !read.global {
                return Ok(PlanRead {
                    now: read.now,
                    snapshot: read.snapshot,
                    full: false,
                    workflows: read.workflows,
                    removed: read.removed,
                    lookups: read.lookups,
                });
            }
        }
    }
    let (mut tx, snapshot, now) = db::changes::begin_snapshot(&state.pool).await?;
    // None: a full plan (no usable cursor, or shared definitions changed since it).
    let delta = match plan_kind(since.cloned(), scope_fingerprint, now) {
        PlanKind::Full => None,
        PlanKind::Delta(cursor) => {
            let changes = db::changes::changes_since(&mut tx, &cursor.snapshot, scope).await?;
            if changes.global {
                None
            } else {
                let mut rules = changes.branch_rules;
                rules.extend(db::changes::leases_expired_since(&mut tx, cursor.at, scope).await?);
                Some((rules, changes.branches))
            }
        }
    };
    let (workflows, lookups, removed) = match &delta {
        None => {
            let (workflows, lookups) = db::plan::full(&state.pool, &mut tx, scope).await?;
            (workflows, lookups, Vec::new())
        }
        Some((rules, branches)) if rules.is_empty() && branches.is_empty() => {
            (Vec::new(), PlanLookups::default(), Vec::new())
        }
        Some((rules, branches)) => {
            let rule_ids: Vec<Uuid> = rules.iter().copied().collect();
            let branch_ids: Vec<Uuid> = branches.iter().copied().collect();
            let (workflows, lookups) =
                db::plan::changed(&mut tx, scope, &rule_ids, &branch_ids).await?;
            let present: BTreeSet<Uuid> = workflows.iter().map(|w| w.id).collect();
            let removed = rules.difference(&present).copied().collect();
            (workflows, lookups, removed)
        }
    };
    tx.commit().await?;
    Ok(PlanRead {
        now,
        snapshot,
        full: delta.is_none(),
        workflows,
        removed,
        lookups,
    })
}

/// The shape a plan answer is written in, chosen once from the format asked for.
enum Encoding<'a> {
    Full(&'a PlanResponse),
    Shared(SharedPlan<'a>),
    // Boxed: its column lists are hundreds of bytes of vectors, the others a reference.
    Columns(Box<ColumnarPlan<'a>>),
}

impl<'a> Encoding<'a> {
    fn of(plan: &'a PlanResponse, format: Option<u32>) -> Self {
        match format {
            // A plan whose entries refer to definitions it does not carry cannot be written
            // as columns; format 2 says the same, and every reader of format 3 reads it.
            Some(PLAN_FORMAT_COLUMNS | PLAN_FORMAT_HOURS) => ColumnarPlan::new(plan)
                .map_or(Self::Shared(SharedPlan(plan)), |c| {
                    Self::Columns(Box::new(c))
                }),
            Some(PLAN_FORMAT_SHARED) => Self::Shared(SharedPlan(plan)),
            _ => Self::Full(plan),
        }
    }

    /// Bytes a workflow entry takes, roughly, so the buffer is sized once.
    fn bytes_per_workflow(&self) -> usize {
        match self {
            Self::Full(_) => 1_600,
            Self::Shared(_) => 700,
            Self::Columns(_) => 400,
        }
    }

    fn write(&self, body: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            Self::Full(plan) => serde_json::to_writer(body, plan),
            Self::Shared(shared) => serde_json::to_writer(body, shared),
            Self::Columns(columns) => serde_json::to_writer(body, &**columns),
        }
    }
}

/// Serialises a plan into one buffer sized up front: a full plan runs to megabytes, and
/// growing a small buffer doubles and copies it a dozen times.
fn plan_json(plan: &PlanResponse, format: Option<u32>) -> Result<Vec<u8>, ApiError> {
    let encoding = Encoding::of(plan, format);
    let mut body = Vec::with_capacity(4_096 + plan.workflows.len() * encoding.bytes_per_workflow());
    encoding
        .write(&mut body)
        .map_err(|e| ApiError::Internal(format!("cannot encode the plan: {e}")))?;
    Ok(body)
}
