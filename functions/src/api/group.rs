//! Single calls of many requests, made together in one transaction.
//!
//! A fleet's rules fall due on the same seconds, so claims and reports arrive in bursts,
//! and a claim or a report alone is a transaction whose fixed cost in PostgreSQL — `BEGIN`
//! with its settings, `COMMIT`, the pool's round trips, each statement's start — is most of
//! what it costs. So such a call waits here, its turn given back, and a drainer takes every
//! call of its kind waiting at that moment (up to its kind's group size, never one rule twice)
//! and makes them in one transaction, each seen through its own caller's scope and answered
//! as it would be alone. No call waits for others to come: a lone call is made at once, as
//! a group of one. Drainers are tasks spawned while calls wait, at most a few of a kind at a
//! time, so a group forms while the one before it is being made; each takes a turn for its
//! group.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::sync::{Mutex, PoisonError};

use res_shared::wire::MAX_BATCH_ITEMS;
use tokio::sync::oneshot;
use tracing::Instrument;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

/// A call that can be made in a group.
pub(crate) trait Grouped: Send + Sync + Sized + std::fmt::Debug + 'static {
    /// What a call answers when it succeeds.
    type Response: Send + std::fmt::Debug + 'static;
    /// What the span of a group says it makes.
    const KIND: &'static str;
    /// Groups of this kind made at the same time: at least one being made while the next
    /// forms.
    const DRAINERS: usize;
    /// The most calls in one group (at most [`MAX_BATCH_ITEMS`]).
    const GROUP_SIZE: usize;
    /// The rule it writes, and the execution it names if any: no group holds either twice
    /// (a group's calls are judged against one snapshot).
    fn keys(&self) -> Keys;
    /// The waiting calls of this kind.
    fn groups(state: &AppState) -> &Groups<Self>;
    /// Makes one call in a transaction of its own.
    fn alone(state: &AppState, call: &Self) -> impl Future<Output = Answer<Self>> + Send;
    /// Makes a group of several calls in one transaction: one answer each, in its order, or
    /// the error that failed the transaction (then nothing of it was written).
    fn together(
        state: &AppState,
        group: &[Self],
    ) -> impl Future<Output = Result<Vec<Answer<Self>>, ApiError>> + Send;
}

/// A call's rule, and its execution when it names one.
pub(crate) type Keys = [Option<Uuid>; 2];

/// A call's answer, as it would be alone.
pub(crate) type Answer<T> = Result<<T as Grouped>::Response, ApiError>;

/// The calls of one kind waiting for a drainer.
#[derive(Debug)]
pub(crate) struct Groups<T: Grouped> {
    inbox: Mutex<Inbox<T>>,
}

impl<T: Grouped> Default for Groups<T> {
    fn default() -> Self {
        Groups {
            inbox: Mutex::new(Inbox {
                waiting: VecDeque::new(),
                drainers: 0,
            }),
        }
    }
}

#[derive(Debug)]
struct Inbox<T: Grouped> {
    waiting: VecDeque<Waiting<T>>,
    drainers: usize,
}

#[derive(Debug)]
struct Waiting<T: Grouped> {
    call: T,
    answer: oneshot::Sender<Answer<T>>,
}

/// Makes `call` with whatever other calls of its kind wait now. A caller that goes away
/// does not stop its call: like an answer lost on the way, it is made.
pub(crate) async fn make<T: Grouped>(state: &AppState, call: T) -> Answer<T> {
    let (sender, receiver) = oneshot::channel();
    let start_drainer = {
        let mut inbox = T::groups(state).lock();
        inbox.waiting.push_back(Waiting {
            call,
            answer: sender,
        });
        let start = inbox.drainers < T::DRAINERS;
        if start {
            inbox.drainers += 1;
        }
        start
    };
    if start_drainer {
        tokio::spawn(drain::<T>(state.clone()));
    }
    receiver
        .await
        .unwrap_or_else(|_| Err(ApiError::Internal("a group gave no answer".into())))
}

impl<T: Grouped> Groups<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inbox<T>> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next group, or none (and one drainer fewer) when no call waits.
    fn next_group(&self) -> Vec<Waiting<T>> {
        let mut inbox = self.lock();
        let group = take_group(&mut inbox.waiting, T::GROUP_SIZE, Waiting::keys);
        if group.is_empty() {
            inbox.drainers = inbox.drainers.saturating_sub(1);
        }
        group
    }
}

impl<T: Grouped> Waiting<T> {
    fn keys(&self) -> Keys {
        self.call.keys()
    }
}

/// Takes the waiting calls in order, up to `size`, leaving a second call for a rule or an
/// execution (another runner's claim, a repeated report, one execution named under two
/// rules) for a later group: there it is answered as the call after the first, as if the
/// two had come one after the other. A call left waiting holds its keys too, so a later
/// call that shares one stays behind it — the order `next_run::rounds` keeps in a batch.
fn take_group<W>(waiting: &mut VecDeque<W>, size: usize, keys: impl Fn(&W) -> Keys) -> Vec<W> {
    let mut held: HashSet<Uuid> = HashSet::new();
    let mut group = Vec::new();
    let mut kept = VecDeque::new();
    while let Some(call) = waiting.pop_front() {
        let keys = keys(&call);
        let free = group.len() < size.min(MAX_BATCH_ITEMS)
            && keys.iter().flatten().all(|key| !held.contains(key));
        held.extend(keys.iter().flatten());
        if free {
            group.push(call);
        } else {
            kept.push_back(call);
        }
    }
    *waiting = kept;
    group
}

/// Makes groups until no call of its kind waits.
async fn drain<T: Grouped>(state: AppState) {
    loop {
        let group = T::groups(&state).next_group();
        if group.is_empty() {
            return;
        }
        state.metrics.observe_group(T::KIND, group.len() as f64);
        let span = tracing::info_span!("group", kind = T::KIND, calls = group.len());
        let (calls, senders): (Vec<T>, Vec<_>) =
            group.into_iter().map(|w| (w.call, w.answer)).unzip();
        let answers = async {
            match state.turns.take().await {
                Ok(_turn) => make_group(&state, &calls).await,
                Err(refused) => calls
                    .iter()
                    .map(|_| Err(unavailable_again(&refused)))
                    .collect(),
            }
        }
        .instrument(span)
        .await;
        for (sender, answer) in senders.into_iter().zip(answers) {
            // The caller went away: its call was made all the same.
            let _ = sender.send(answer);
        }
    }
}

/// A group's answers, in its order. When its transaction fails for a reason of one call's
/// own, each call is made again alone, so that one call's failure is not its neighbours'.
/// A batch's round of reports is made here too, under the turn its request holds.
pub(crate) async fn make_group<T: Grouped>(state: &AppState, group: &[T]) -> Vec<Answer<T>> {
    if let [call] = group {
        return vec![T::alone(state, call).await];
    }
    match T::together(state, group).await {
        Ok(answers) => answers,
        Err(error) if is_unavailable(&error) => group
            .iter()
            .map(|_| Err(unavailable_again(&error)))
            .collect(),
        Err(error) => {
            tracing::warn!(kind = T::KIND, calls = group.len(), error = %error, "a group failed; its calls are made one by one");
            let mut answers = Vec::with_capacity(group.len());
            for call in group {
                answers.push(T::alone(state, call).await);
            }
            answers
        }
    }
}

/// The database or the functions could not take a group at all: each call gets the answer
/// it would have had alone (503).
fn is_unavailable(error: &ApiError) -> bool {
    error.detail().0 == axum::http::StatusCode::SERVICE_UNAVAILABLE
}

/// An unavailable answer again, for each call of a group.
fn unavailable_again(error: &ApiError) -> ApiError {
    match error {
        ApiError::Overloaded(seconds) => ApiError::Overloaded(*seconds),
        other => ApiError::Database(sqlx::Error::Io(std::io::Error::other(other.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule_only(id: &Uuid) -> Keys {
        [Some(*id), None]
    }

    #[test]
    fn one_execution_named_by_two_calls_is_never_in_one_group() {
        let (r1, r2, r3) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let (e, f) = (Uuid::from_u128(11), Uuid::from_u128(12));
        // (rule, execution): one execution under two rules, then a call behind the second.
        let calls = [
            (r1, Some(e)),
            (r2, Some(e)),
            (r3, None),
            (r3, Some(f)),
            (r2, Some(f)),
        ];
        let mut inbox: VecDeque<(Uuid, Option<Uuid>)> = calls.into_iter().collect();
        let keys = |call: &(Uuid, Option<Uuid>)| [Some(call.0), call.1];
        let mut groups = Vec::new();
        loop {
            let group = take_group(&mut inbox, MAX_BATCH_ITEMS, keys);
            if group.is_empty() {
                break;
            }
            groups.push(group);
        }
        assert_eq!(
            groups,
            vec![
                vec![(r1, Some(e)), (r3, None)],
                vec![(r2, Some(e)), (r3, Some(f))],
                vec![(r2, Some(f))],
            ]
        );
        // Exactly as a batch of the same reports is split into rounds.
        let rounds = crate::api::next_run::rounds_of(&calls);
        let as_rounds: Vec<Vec<_>> = rounds
            .into_iter()
            .map(|round| round.into_iter().map(|i| calls[i]).collect())
            .collect();
        assert_eq!(groups, as_rounds);
    }

    #[test]
    fn a_group_holds_each_rule_once_and_leaves_the_second_call_for_the_next() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let mut inbox: VecDeque<Uuid> = [a, b, a, b, a].into_iter().collect();
        assert_eq!(
            take_group(&mut inbox, MAX_BATCH_ITEMS, rule_only),
            vec![a, b]
        );
        assert_eq!(
            take_group(&mut inbox, MAX_BATCH_ITEMS, rule_only),
            vec![a, b]
        );
        assert_eq!(take_group(&mut inbox, MAX_BATCH_ITEMS, rule_only), vec![a]);
        assert!(take_group(&mut inbox, MAX_BATCH_ITEMS, rule_only).is_empty());
    }

    #[test]
    fn a_group_is_at_most_a_batch() {
        let mut inbox: VecDeque<Uuid> = (0..MAX_BATCH_ITEMS + 3).map(|_| Uuid::new_v4()).collect();
        assert_eq!(
            take_group(&mut inbox, MAX_BATCH_ITEMS, rule_only).len(),
            MAX_BATCH_ITEMS
        );
        assert_eq!(take_group(&mut inbox, MAX_BATCH_ITEMS, rule_only).len(), 3);
        let mut inbox: VecDeque<Uuid> = (0..12).map(|_| Uuid::new_v4()).collect();
        assert_eq!(take_group(&mut inbox, 10, rule_only).len(), 10);
        assert_eq!(take_group(&mut inbox, 500, rule_only).len(), 2);
    }
}
