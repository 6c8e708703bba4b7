//! `branch_rules_set_NextRunTime` in groups (see `api::group`): the reports waiting at one
//! moment are recorded in one transaction, each by the statements it takes alone, in their
//! rules' order (the order claims lock rules in, so two groups never wait on each other in
//! a circle). A refusal is decided before its report writes anything, so it leaves the
//! others' writes standing; any other failure fails the group (see `api::group`).

use res_shared::wire::{MAX_BATCH_ITEMS, SetNextRunTimeRequest, SetNextRunTimeResponse};
use tracing::Instrument;
use uuid::Uuid;

use super::{Recorded, count, record, record_in};
use crate::api::group::{Answer, Grouped, Groups};
use crate::auth::Caller;
use crate::db;
use crate::error::ApiError;
use crate::state::AppState;

/// One request's report, owned until its group is made.
#[derive(Debug)]
pub(crate) struct ReportCall {
    pub(crate) caller: Caller,
    pub(crate) request: SetNextRunTimeRequest,
}

impl Grouped for ReportCall {
    type Response = SetNextRunTimeResponse;
    const KIND: &'static str = "report";
    // A group's reports are recorded one after the other, so its last waits for all the
    // others; four drainers of groups of ten answered sooner (report p50 73 against
    // 100–107 ms at 12,000 sites) but cost more CPU (141 against 124–132 CPU-ms a site an
    // hour, docs/benchmarks.md), and the cost is what this is for.
    const DRAINERS: usize = 2;
    const GROUP_SIZE: usize = MAX_BATCH_ITEMS;

    fn rule(&self) -> Uuid {
        self.request.branch_rule_id
    }

    fn groups(state: &AppState) -> &Groups<Self> {
        &state.report_groups
    }

    async fn alone(state: &AppState, call: &ReportCall) -> Answer<Self> {
        record(state, &call.caller, &call.request)
            .instrument(span(&call.request))
            .await
            .map(|answer| answer.0)
    }

    /// The reports in their rules' order; a refusal stays its report's answer, any other
    /// error fails the group.
    async fn together(
        state: &AppState,
        group: &[ReportCall],
    ) -> Result<Vec<Answer<Self>>, ApiError> {
        let mut order: Vec<usize> = (0..group.len()).collect();
        order.sort_by_key(|&i| group[i].request.branch_rule_id);
        let mut tx = db::begin_run_bookkeeping(&state.pool, true).await?;
        let mut recorded: Vec<Option<Result<Recorded, ApiError>>> =
            group.iter().map(|_| None).collect();
        for i in order {
            let call = &group[i];
            let one = record_in(&mut tx, &call.caller, &call.request)
                .instrument(span(&call.request))
                .await;
            match one {
                Err(error) if !is_refusal(&error) => return Err(error),
                one => recorded[i] = Some(one),
            }
        }
        tx.commit().await?;
        Ok(group
            .iter()
            .zip(recorded)
            .map(|(call, one)| {
                let one =
                    one.unwrap_or_else(|| Err(ApiError::Internal("a report was left out".into())));
                count(state, &call.request, &one);
                one.map(|recorded| recorded.answer)
            })
            .collect())
    }
}

fn span(request: &SetNextRunTimeRequest) -> tracing::Span {
    tracing::info_span!(
        "set_next_run_time",
        branch_rule_id = %request.branch_rule_id,
        execution_id = ?request.execution_id
    )
}

/// A report's own refusal (4xx), decided before it wrote anything (a superseded report's
/// results are meant to stay); a database error, even one answered 409, failed the
/// transaction.
fn is_refusal(error: &ApiError) -> bool {
    !matches!(error, ApiError::Database(_) | ApiError::Internal(_))
        && error.detail().0.is_client_error()
}
