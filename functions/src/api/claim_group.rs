//! `branch_rules_claim` in groups (see `group`): the claims waiting at one moment are made
//! with the set statements of `branch_rules_claim_batch`, which claim ten rules for little
//! more than one, but wait for a held rule as a single claim does.

use res_shared::wire::{ClaimResponse, MAX_BATCH_ITEMS};
use uuid::Uuid;

use super::batch;
use super::claim::{ClaimItem, ClaimMode, claim_rules};
use super::group::{Answer, Grouped, Groups};
use crate::auth::Caller;
use crate::db::claims::Claimant;
use crate::error::ApiError;
use crate::state::AppState;

const MODE: ClaimMode = ClaimMode {
    skip_locked: false,
    generic_plans: true,
};

/// One request's claim, owned until its group is made.
#[derive(Debug)]
pub(crate) struct ClaimCall {
    id: Uuid,
    caller: Caller,
    runner_id: String,
    lease_seconds: i32,
    boot_id: Option<String>,
}

impl ClaimCall {
    pub(crate) fn new(id: Uuid, caller: Caller, claimant: &Claimant<'_>) -> ClaimCall {
        ClaimCall {
            id,
            caller,
            runner_id: claimant.runner_id.to_owned(),
            lease_seconds: claimant.lease_seconds,
            boot_id: claimant.boot_id.map(str::to_owned),
        }
    }

    fn claimant(&self) -> Claimant<'_> {
        Claimant {
            runner_id: &self.runner_id,
            lease_seconds: self.lease_seconds,
            boot_id: self.boot_id.as_deref(),
        }
    }
}

impl Grouped for ClaimCall {
    type Response = ClaimResponse;
    const KIND: &'static str = "claim";
    const DRAINERS: usize = 2;
    // A group's claims are made by one statement each for all: a large group costs little
    // more than a small one.
    const GROUP_SIZE: usize = MAX_BATCH_ITEMS;

    fn keys(&self) -> crate::api::group::Keys {
        [Some(self.id), None]
    }

    fn groups(state: &AppState) -> &Groups<Self> {
        &state.claim_groups
    }

    async fn alone(state: &AppState, call: &ClaimCall) -> Answer<Self> {
        let claimant = call.claimant();
        let item = ClaimItem {
            id: call.id,
            caller: &call.caller,
            claimant: &claimant,
        };
        batch::only(claim_rules(state, std::slice::from_ref(&item), MODE).await?)
    }

    async fn together(
        state: &AppState,
        group: &[ClaimCall],
    ) -> Result<Vec<Answer<Self>>, ApiError> {
        let claimants: Vec<Claimant<'_>> = group.iter().map(ClaimCall::claimant).collect();
        let items: Vec<ClaimItem<'_>> = group
            .iter()
            .zip(&claimants)
            .map(|(call, claimant)| ClaimItem {
                id: call.id,
                caller: &call.caller,
                claimant,
            })
            .collect();
        claim_rules(state, &items, MODE).await
    }
}
