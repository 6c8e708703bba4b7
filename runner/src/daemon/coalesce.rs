//! Calls made at about the same moment travel together: the first caller waits a few
//! milliseconds for others (the workers a dispatch woke, the heartbeats of one tick), then
//! one batch request carries them all. Each caller gets the answer its single call would
//! have got, so nothing downstream changes. Functions older than the batch functions get
//! single calls, as before.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use res_shared::wire::{
    Batch, Call, ClaimBatchRequest, ClaimRequest, HeartbeatBatchRequest, MAX_BATCH_ITEMS,
    SetNextRunTimeBatchRequest,
};
use tokio::sync::oneshot;

use crate::cloud::{CloudError, FunctionsClient};

/// How long the first of a group waits for the rest: the workers one dispatch wakes start
/// within a millisecond or two of each other.
pub(crate) const GATHER: Duration = Duration::from_millis(5);

type Answer<B> = Result<<<B as Batch>::Item as Call>::Response, CloudError>;
type Waiting<B> = (<B as Batch>::Item, oneshot::Sender<Answer<B>>);

/// Gathers calls of `B`'s single function into batches of `B`.
pub(crate) struct Coalescer<B: Batch> {
    inner: Arc<Inner<B>>,
}

struct Inner<B: Batch> {
    client: FunctionsClient,
    pending: Mutex<Vec<Waiting<B>>>,
    /// Cleared when the functions answer that they have no batch function.
    batches_work: AtomicBool,
    /// Builds the batch request from its items.
    make: fn(Vec<B::Item>) -> B,
}

impl<B: Batch> Clone for Coalescer<B> {
    fn clone(&self) -> Self {
        Coalescer {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: Batch> std::fmt::Debug for Coalescer<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescer")
            .field("function", &B::NAME)
            .finish_non_exhaustive()
    }
}

impl<B> Coalescer<B>
where
    B: Batch + Send + Sync + 'static,
    B::Item: Clone + Send + Sync + 'static,
    <B::Item as Call>::Response: Send + 'static,
{
    /// A coalescer calling through `client`; `make` builds a batch from its items.
    pub(crate) fn new(client: FunctionsClient, make: fn(Vec<B::Item>) -> B) -> Coalescer<B> {
        Coalescer {
            inner: Arc::new(Inner {
                client,
                pending: Mutex::new(Vec::new()),
                batches_work: AtomicBool::new(true),
                make,
            }),
        }
    }

    /// Calls `item`'s function, in a batch with the calls made within [`GATHER`] of it.
    pub(crate) async fn call(&self, item: B::Item) -> Answer<B> {
        let (sender, answer) = oneshot::channel();
        let leads = {
            let mut pending = self
                .inner
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            pending.push((item, sender));
            pending.len() == 1
        };
        if leads {
            // A task of its own: a caller that gives up must not strand the others.
            let inner = Arc::clone(&self.inner);
            tokio::spawn(async move {
                tokio::time::sleep(GATHER).await;
                let taken = std::mem::take(
                    &mut *inner.pending.lock().unwrap_or_else(PoisonError::into_inner),
                );
                inner.send(taken).await;
            });
        }
        answer.await.unwrap_or_else(|_| {
            Err(CloudError::Unreachable {
                function: <B::Item as Call>::NAME,
                message: "the batched call was dropped".to_owned(),
            })
        })
    }
}

impl<B> Inner<B>
where
    B: Batch + Send + Sync + 'static,
    B::Item: Clone + Send + Sync + 'static,
    <B::Item as Call>::Response: Send + 'static,
{
    async fn send(&self, waiting: Vec<Waiting<B>>) {
        // An item that cannot be measured goes alone, and meets its single call's handling.
        let sizes: Vec<usize> = waiting
            .iter()
            .map(|(item, _)| serde_json::to_vec(item).map_or(usize::MAX, |body| body.len()))
            .collect();
        let mut waiting = waiting.into_iter();
        for len in batch_lengths(&sizes, MAX_BATCH_ITEMS, B::BODY_LIMIT) {
            self.send_one_batch(waiting.by_ref().take(len).collect())
                .await;
        }
    }

    async fn send_one_batch(&self, waiting: Vec<Waiting<B>>) {
        let (items, senders): (Vec<B::Item>, Vec<_>) = waiting.into_iter().unzip();
        let answers = if items.len() == 1 || !self.batches_work.load(Ordering::Relaxed) {
            self.singly(items).await
        } else {
            match self.client.call_batch(&(self.make)(items.clone())).await {
                Ok(answers) => answers,
                Err(error) if error.is_transient() => {
                    items.iter().map(|_| Err(error.clone())).collect()
                }
                // Refused whole (older functions, a body over their limit): each alone, as
                // it would have gone without batches.
                Err(error) => {
                    if error.is_unknown_function() {
                        self.batches_work.store(false, Ordering::Relaxed);
                        tracing::warn!(
                            function = B::NAME,
                            "the functions are older than this runner: calls go one at a time"
                        );
                    } else {
                        tracing::warn!(%error, "a batch was refused whole; sending its items one at a time");
                    }
                    self.singly(items).await
                }
            }
        };
        for (sender, answer) in senders.into_iter().zip(answers) {
            // The caller may have gone (its run was stopped): nothing to tell.
            let _ = sender.send(answer);
        }
    }

    async fn singly(&self, items: Vec<B::Item>) -> Vec<Answer<B>> {
        let calls = items.iter().map(|item| self.client.call(item));
        futures_util::future::join_all(calls).await
    }
}

/// Room left in a batch body for what surrounds its items (`{"reports":[…]}`).
const ENVELOPE_BYTES: usize = 64;

/// How many items, in order, each batch carries: at most `max_items`, and no more than fit
/// in `max_bytes` as JSON — a batch over the functions' body limit would be refused whole.
/// An item too large to share a batch goes alone.
fn batch_lengths(sizes: &[usize], max_items: usize, max_bytes: usize) -> Vec<usize> {
    let budget = max_bytes.saturating_sub(ENVELOPE_BYTES);
    let mut lengths = Vec::new();
    let (mut items, mut bytes) = (0_usize, 0_usize);
    for &size in sizes {
        // Each item after the first adds a comma.
        let with = bytes.saturating_add(size).saturating_add(1);
        if items > 0 && (items == max_items || with > budget) {
            lengths.push(items);
            (items, bytes) = (0, 0);
        }
        items += 1;
        bytes = bytes.saturating_add(size).saturating_add(1);
    }
    if items > 0 {
        lengths.push(items);
    }
    lengths
}

/// The runner's hot calls, each gathered into batches.
#[derive(Debug)]
pub(crate) struct Batched {
    pub(crate) claims: Coalescer<ClaimBatchRequest>,
    pub(crate) beats: Coalescer<HeartbeatBatchRequest>,
    pub(crate) reports: Coalescer<SetNextRunTimeBatchRequest>,
}

impl Batched {
    /// Batches through `client`.
    pub(crate) fn new(client: &FunctionsClient) -> Batched {
        Batched {
            claims: Coalescer::new(client.clone(), claim_batch),
            beats: Coalescer::new(client.clone(), |beats| HeartbeatBatchRequest { beats }),
            reports: Coalescer::new(client.clone(), |reports| SetNextRunTimeBatchRequest {
                reports,
            }),
        }
    }
}

/// One runner's claims differ only in the rule: the batch carries the rest once.
fn claim_batch(claims: Vec<ClaimRequest>) -> ClaimBatchRequest {
    let first = claims.first().cloned();
    ClaimBatchRequest {
        branch_rule_ids: claims.iter().map(|c| c.branch_rule_id).collect(),
        runner_id: first
            .as_ref()
            .map(|c| c.runner_id.clone())
            .unwrap_or_default(),
        lease_seconds: first.as_ref().and_then(|c| c.lease_seconds),
        boot_id: first.and_then(|c| c.boot_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use res_shared::wire::MAX_REPORT_BODY_BYTES;

    #[test]
    fn batches_are_cut_by_count() {
        assert_eq!(batch_lengths(&[10; 250], 100, 1 << 20), vec![100, 100, 50]);
        assert_eq!(batch_lengths(&[], 100, 1 << 20), Vec::<usize>::new());
    }

    #[test]
    fn batches_are_cut_before_the_body_limit() {
        // Reports of a run's full output: three fit under 5 MiB, a fourth would not.
        let report = 1_500_000;
        let lengths = batch_lengths(&[report; 7], 100, MAX_REPORT_BODY_BYTES);
        assert_eq!(lengths, vec![3, 3, 1]);
        assert!(3 * (report + 1) + ENVELOPE_BYTES <= MAX_REPORT_BODY_BYTES);
    }

    #[test]
    fn an_item_too_large_for_any_batch_goes_alone_and_the_rest_carry_on() {
        let lengths = batch_lengths(&[10, 10, 6_000_000, 10, usize::MAX, 10], 100, 1 << 20);
        assert_eq!(lengths, vec![2, 1, 1, 1, 1]);
        assert_eq!(lengths.iter().sum::<usize>(), 6, "every item is sent");
    }
}
