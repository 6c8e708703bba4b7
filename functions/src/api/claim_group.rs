//! Single claims of many requests, made together in one transaction.
//!
//! A fleet's rules fall due on the same seconds, so single claims arrive in bursts, and a
//! claim alone is a transaction of five statements (`BEGIN` with its settings, the rules'
//! lock, their latest executions, the insert, `COMMIT`) whose fixed cost in PostgreSQL is
//! most of what the claim costs: the set statements of `branch_rules_claim_batch` claim ten
//! rules for little more than one. So a claim here waits, its turn given back, and a drainer
//! takes every claim waiting at that moment (up to [`MAX_BATCH_ITEMS`], never one rule twice)
//! and makes them in one transaction, each seen through its own caller's scope and answered
//! as it would be alone. No claim waits for others to come: a lone claim is made at once,
//! as a group of one. Drainers are tasks spawned while claims wait, at most [`DRAINERS`]
//! at a time, so a group forms while the one before it is being made.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use res_shared::wire::{ClaimResponse, MAX_BATCH_ITEMS};
use tokio::sync::oneshot;
use tracing::Instrument;
use uuid::Uuid;

use super::claim::{ClaimItem, ClaimMode, claim_rules};
use crate::auth::Caller;
use crate::db::claims::Claimant;
use crate::error::ApiError;
use crate::state::AppState;

/// Groups made at the same time: one being made while the next forms.
const DRAINERS: usize = 2;

/// A group's claims wait for locks as a single claim does: the answers are the same.
const MODE: ClaimMode = ClaimMode {
    skip_locked: false,
    generic_plans: true,
};

/// The claims waiting for a drainer.
#[derive(Debug, Default)]
pub(crate) struct ClaimGroups {
    inbox: Mutex<Inbox>,
}

#[derive(Debug, Default)]
struct Inbox {
    waiting: VecDeque<Waiting>,
    drainers: usize,
}

/// One request's claim, owned until its group is made.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) id: Uuid,
    pub(crate) caller: Caller,
    pub(crate) runner_id: String,
    pub(crate) lease_seconds: i32,
    pub(crate) boot_id: Option<String>,
    answer: Option<oneshot::Sender<Result<ClaimResponse, ApiError>>>,
}

impl Waiting {
    pub(crate) fn new(
        id: Uuid,
        caller: Caller,
        claimant: &Claimant<'_>,
    ) -> (Waiting, oneshot::Receiver<Result<ClaimResponse, ApiError>>) {
        let (sender, receiver) = oneshot::channel();
        let waiting = Waiting {
            id,
            caller,
            runner_id: claimant.runner_id.to_owned(),
            lease_seconds: claimant.lease_seconds,
            boot_id: claimant.boot_id.map(str::to_owned),
            answer: Some(sender),
        };
        (waiting, receiver)
    }

    fn claimant(&self) -> Claimant<'_> {
        Claimant {
            runner_id: &self.runner_id,
            lease_seconds: self.lease_seconds,
            boot_id: self.boot_id.as_deref(),
        }
    }
}

impl ClaimGroups {
    /// Claims `waiting`'s rule with whatever other claims wait now. A caller that goes away
    /// does not stop its claim: like an answer lost on the way, it is made, and its lease
    /// runs out (docs/operate.md, crashed runs).
    pub(crate) async fn claim(
        state: &AppState,
        waiting: Waiting,
        answer: oneshot::Receiver<Result<ClaimResponse, ApiError>>,
    ) -> Result<ClaimResponse, ApiError> {
        let groups = &state.claim_groups;
        let start_drainer = {
            let mut inbox = groups.lock();
            inbox.waiting.push_back(waiting);
            let start = inbox.drainers < DRAINERS;
            if start {
                inbox.drainers += 1;
            }
            start
        };
        if start_drainer {
            tokio::spawn(drain(state.clone()));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(ApiError::Internal("a claim group gave no answer".into())))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next group, or none (and one drainer fewer) when no claim waits.
    fn next_group(&self) -> Vec<Waiting> {
        let mut inbox = self.lock();
        let group = take_group(&mut inbox.waiting);
        if group.is_empty() {
            inbox.drainers = inbox.drainers.saturating_sub(1);
        }
        group
    }
}

/// Takes the waiting claims in order, up to a batch's size, leaving a rule's second claim
/// (another runner's, at the same moment) for the next group: there it is answered as the
/// claim after the first, as if the two had come one after the other.
fn take_group(waiting: &mut VecDeque<Waiting>) -> Vec<Waiting> {
    let mut ids = HashSet::new();
    let mut group = Vec::new();
    let mut kept = VecDeque::new();
    while let Some(claim) = waiting.pop_front() {
        if group.len() < MAX_BATCH_ITEMS && ids.insert(claim.id) {
            group.push(claim);
        } else {
            kept.push_back(claim);
        }
    }
    *waiting = kept;
    group
}

/// Makes groups until no claim waits.
async fn drain(state: AppState) {
    loop {
        let group = state.claim_groups.next_group();
        if group.is_empty() {
            return;
        }
        let span = tracing::info_span!("claim_group", claims = group.len());
        make(&state, group).instrument(span).await;
    }
}

/// Makes one group and sends each claim its answer.
async fn make(state: &AppState, mut group: Vec<Waiting>) {
    state.metrics.claim_group_size.observe(group.len() as f64);
    let answers = match state.turns.take().await {
        Ok(_turn) => answers(state, &group).await,
        Err(refused) => group.iter().map(|_| Err(same(&refused))).collect(),
    };
    for (waiting, answer) in group.iter_mut().zip(answers) {
        if let Some(sender) = waiting.answer.take() {
            // The caller went away: its claim stands, its lease will run out.
            let _ = sender.send(answer);
        }
    }
}

/// The group's answers, in its order. When the group's transaction fails for a reason
/// of one claim's own, each is made again alone, so that one claim's failure is not its
/// neighbours'.
async fn answers(state: &AppState, group: &[Waiting]) -> Vec<Result<ClaimResponse, ApiError>> {
    let claimants: Vec<Claimant<'_>> = group.iter().map(Waiting::claimant).collect();
    let items: Vec<ClaimItem<'_>> = group
        .iter()
        .zip(&claimants)
        .map(|(waiting, claimant)| ClaimItem {
            id: waiting.id,
            caller: &waiting.caller,
            claimant,
        })
        .collect();
    match claim_rules(state, &items, MODE).await {
        Ok(answers) => answers,
        Err(error) if items.len() == 1 => vec![Err(error)],
        Err(error) if is_unavailable(&error) => items.iter().map(|_| Err(same(&error))).collect(),
        Err(error) => {
            tracing::warn!(claims = items.len(), error = %error, "a claim group failed; its claims are made one by one");
            let mut answers = Vec::with_capacity(items.len());
            for item in &items {
                let alone = claim_rules(state, std::slice::from_ref(item), MODE).await;
                answers.push(alone.and_then(|mut one| one.pop().unwrap_or_else(no_answer)));
            }
            answers
        }
    }
}

fn no_answer() -> Result<ClaimResponse, ApiError> {
    Err(ApiError::Internal("a claim gave no answer".into()))
}

/// The database or the functions could not take the group at all: every claim in it gets
/// the same answer (503), as each would have alone.
fn is_unavailable(error: &ApiError) -> bool {
    error.detail().0 == axum::http::StatusCode::SERVICE_UNAVAILABLE
}

/// An unavailable answer again, for each claim of the group.
fn same(error: &ApiError) -> ApiError {
    match error {
        ApiError::Overloaded(seconds) => ApiError::Overloaded(*seconds),
        other => ApiError::Database(sqlx::Error::Io(std::io::Error::other(other.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(id: Uuid) -> Waiting {
        let caller = Caller {
            key_id: Uuid::nil(),
            key_name: "site".into(),
            role: crate::access::Role::Runner,
            all_brands: false,
            branch_ids: Vec::new(),
        };
        let claimant = Claimant {
            runner_id: "r",
            lease_seconds: 60,
            boot_id: None,
        };
        Waiting::new(id, caller, &claimant).0
    }

    #[test]
    fn a_group_holds_each_rule_once_and_leaves_the_second_claim_for_the_next() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let mut inbox: VecDeque<Waiting> = [a, b, a, b, a].into_iter().map(waiting).collect();
        let ids = |group: &[Waiting]| group.iter().map(|w| w.id).collect::<Vec<_>>();
        assert_eq!(ids(&take_group(&mut inbox)), vec![a, b]);
        assert_eq!(ids(&take_group(&mut inbox)), vec![a, b]);
        assert_eq!(ids(&take_group(&mut inbox)), vec![a]);
        assert!(take_group(&mut inbox).is_empty());
    }

    #[test]
    fn a_group_is_at_most_a_batch() {
        let mut inbox: VecDeque<Waiting> = (0..MAX_BATCH_ITEMS + 3)
            .map(|_| waiting(Uuid::new_v4()))
            .collect();
        assert_eq!(take_group(&mut inbox).len(), MAX_BATCH_ITEMS);
        assert_eq!(take_group(&mut inbox).len(), 3);
    }
}
