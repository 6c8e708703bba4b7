//! Batches of the runner's calls: claims, heartbeats and reports of many rules in one
//! request. Each item is answered as its single call would be — the same status and the
//! same body — so a caller handles a batch item exactly as it handles a single answer.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use super::{Call, ClaimRequest, HeartbeatRequest, SetNextRunTimeRequest};

/// The most items one batch may carry.
pub const MAX_BATCH_ITEMS: usize = 100;

/// The largest request body the functions read (a report's is larger).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The largest report or batch of reports the functions read: a run's output (at most
/// 512 KiB of text, up to six times that as JSON escapes) beside the result; below
/// Lambda's 6 MB request limit.
pub const MAX_REPORT_BODY_BYTES: usize = 5 * 1024 * 1024;

/// `branch_rules_claim_batch` request: claim each rule as `branch_rules_claim` would, in one
/// transaction that skips rules another request holds at this moment (answered `busy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimBatchRequest {
    /// 1 to `MAX_BATCH_ITEMS` (100) branch rules, answered in this order.
    pub branch_rule_ids: Vec<Uuid>,
    /// Who is claiming (recorded on each execution).
    pub runner_id: String,
    /// Seconds each claim lasts without a heartbeat: 1-600, default 60.
    #[serde(default, deserialize_with = "super::seconds::whole_opt")]
    pub lease_seconds: Option<i64>,
    #[serde(default)]
    pub boot_id: Option<String>,
}

/// `executions_heartbeat_batch` request: each beat as `executions_heartbeat` takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBatchRequest {
    /// 1 to `MAX_BATCH_ITEMS` (100) beats, answered in this order.
    pub beats: Vec<HeartbeatRequest>,
}

/// `branch_rules_set_NextRunTime_batch` request: each report as
/// `branch_rules_set_NextRunTime` takes it, each in its own transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetNextRunTimeBatchRequest {
    /// 1 to `MAX_BATCH_ITEMS` (100) reports, answered in this order.
    pub reports: Vec<SetNextRunTimeRequest>,
}

/// A batch's answer: one item per request item, in the request's order.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchResponse {
    pub items: Vec<BatchItem>,
}

/// One item's answer: the HTTP status its single call would have answered, and that
/// call's body (the success answer, `ClaimRefusal`, or the common error shape).
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchItem {
    pub status: u16,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub body: Box<RawValue>,
}

/// A batch of `Item` calls, answered item by item as `Item` would be.
pub trait Batch: Call<Response = BatchResponse> {
    /// The single call each item stands for.
    type Item: Call;

    /// The largest body the functions read for this batch: a sender splits its items to
    /// stay under it.
    const BODY_LIMIT: usize = MAX_BODY_BYTES;

    /// How many items the request carries (the answer has as many).
    fn len(&self) -> usize;

    /// Whether the request carries no item.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Batch for ClaimBatchRequest {
    type Item = ClaimRequest;
    fn len(&self) -> usize {
        self.branch_rule_ids.len()
    }
}

impl Batch for HeartbeatBatchRequest {
    type Item = HeartbeatRequest;
    fn len(&self) -> usize {
        self.beats.len()
    }
}

impl Batch for SetNextRunTimeBatchRequest {
    type Item = SetNextRunTimeRequest;
    const BODY_LIMIT: usize = MAX_REPORT_BODY_BYTES;
    fn len(&self) -> usize {
        self.reports.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_keeps_its_body_as_sent() {
        let text = r#"{"items":[{"status":409,"body":{"claimed":false,"reason":"busy"}}]}"#;
        let answer: BatchResponse = serde_json::from_str(text).expect("a batch answer");
        assert_eq!(answer.items[0].status, 409);
        assert_eq!(
            answer.items[0].body.get(),
            r#"{"claimed":false,"reason":"busy"}"#
        );
        assert_eq!(serde_json::to_string(&answer).expect("encodes"), text);
    }
}
