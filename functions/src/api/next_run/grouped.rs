//! `branch_rules_set_NextRunTime` in groups (see `api::group`): the reports waiting at one
//! moment are recorded in one transaction, their rules locked in id order (the order claims
//! lock rules in, so two groups never wait on each other in a circle) and their runs written
//! by one statement each for all (see `record`). A refusal is decided before its report
//! writes anything, so it leaves the others' writes standing; any other failure fails the
//! group (see `api::group`).

use res_shared::wire::{MAX_BATCH_ITEMS, SetNextRunTimeRequest, SetNextRunTimeResponse};
use tracing::Instrument;

use super::record::{Call, record_all, report_span};
use super::{count, record};
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
    // A group's runs are written by one statement each for all, so, as for claims, two
    // drainers of groups of up to a hundred: at 12,000 sites a report's median was 31–33 ms
    // and its p99 73–86 ms (docs/benchmarks.md).
    const DRAINERS: usize = 2;
    const GROUP_SIZE: usize = MAX_BATCH_ITEMS;

    fn keys(&self) -> crate::api::group::Keys {
        [Some(self.request.branch_rule_id), self.request.execution_id]
    }

    fn groups(state: &AppState) -> &Groups<Self> {
        &state.report_groups
    }

    async fn alone(state: &AppState, call: &ReportCall) -> Answer<Self> {
        record(state, &call.caller, &call.request)
            .instrument(report_span(&call.request))
            .await
            .map(|answer| answer.0)
    }

    async fn together(
        state: &AppState,
        group: &[ReportCall],
    ) -> Result<Vec<Answer<Self>>, ApiError> {
        let calls: Vec<Call<'_>> = group
            .iter()
            .map(|call| (&call.caller, &call.request))
            .collect();
        let mut tx = db::begin_run_bookkeeping(&state.pool, true).await?;
        let recorded = record_all(&mut tx, &calls).await?;
        tx.commit().await?;
        Ok(group
            .iter()
            .zip(recorded)
            .map(|(call, one)| {
                count(state, &call.request, &one);
                one.map(|recorded| recorded.answer)
            })
            .collect())
    }
}
