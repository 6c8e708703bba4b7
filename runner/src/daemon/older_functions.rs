//! What the functions this runner talks to are too old to read, learnt from their refusals.
//!
//! Functions refuse a request field they do not know (`400 invalid_field: unknown field
//! …`). A report's newer fields only add detail — when the run started and ended, what its
//! programs printed — so functions that refuse one get the report again without it, and
//! every later report goes without it from the first try. A functions rollback (or a
//! runner upgraded before its cloud) then costs detail, never a run's record: without this,
//! each report of such a runner was refused for good and its run ended `crashed`.

use std::sync::atomic::{AtomicBool, Ordering};

use res_shared::wire::SetNextRunTimeRequest;

use crate::cloud::CloudError;

/// A report field older functions may not know, and how to leave it out.
struct Optional {
    /// The field as the functions name it in their refusal.
    field: &'static str,
    present: fn(&SetNextRunTimeRequest) -> bool,
    strip: fn(&mut SetNextRunTimeRequest),
}

/// Newest first. `started_at` and `finished_at` came together: either refused drops both.
const REPORT_FIELDS: [Optional; 3] = [
    Optional {
        field: "started_at",
        present: |r| r.started_at.is_some() || r.finished_at.is_some(),
        strip: strip_times,
    },
    Optional {
        field: "finished_at",
        present: |r| r.started_at.is_some() || r.finished_at.is_some(),
        strip: strip_times,
    },
    Optional {
        field: "output",
        present: |r| !r.output.is_empty(),
        strip: |r| r.output.clear(),
    },
];

fn strip_times(request: &mut SetNextRunTimeRequest) {
    request.started_at = None;
    request.finished_at = None;
}

/// The report fields the functions refused so far (one flag per [`REPORT_FIELDS`] entry),
/// and whether they refused the disk's state in a plan request's health.
#[derive(Debug, Default)]
pub(crate) struct OlderFunctions {
    refused: [AtomicBool; 3],
    disk_refused: AtomicBool,
}

impl OlderFunctions {
    /// Whether plan requests may tell the registry that the disk refuses writes.
    pub(crate) fn tells_disk(&self) -> bool {
        !self.disk_refused.load(Ordering::Relaxed)
    }

    /// Whether `error` refused the disk's state in the health (`state_unwritable_since` or
    /// `state_space_low_since`, both new in 0.3.0): noted, so later plan requests leave
    /// both out.
    pub(crate) fn refused_disk(&self, error: &CloudError) -> bool {
        let refused = error.refuses_field("state_unwritable_since")
            || error.refuses_field("state_space_low_since");
        if refused && !self.disk_refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the functions are older than this runner: plan requests leave out \
                 `health.state_unwritable_since` and `health.state_space_low_since` from now on"
            );
        }
        refused
    }

    /// `request` without the fields these functions refused before.
    pub(crate) fn fit(&self, request: &SetNextRunTimeRequest) -> SetNextRunTimeRequest {
        let mut fitted = request.clone();
        for (optional, refused) in REPORT_FIELDS.iter().zip(&self.refused) {
            if refused.load(Ordering::Relaxed) {
                (optional.strip)(&mut fitted);
            }
        }
        fitted
    }

    /// When `error` refuses a field `request` carries that may be left out: notes it, and
    /// gives the request without it.
    pub(crate) fn without_refused(
        &self,
        request: &SetNextRunTimeRequest,
        error: &CloudError,
    ) -> Option<SetNextRunTimeRequest> {
        let (optional, refused) = REPORT_FIELDS
            .iter()
            .zip(&self.refused)
            .find(|(o, _)| (o.present)(request) && error.refuses_field(o.field))?;
        if !refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                field = optional.field,
                "the functions are older than this runner: reports leave out `{}` from now on",
                optional.field
            );
        }
        let mut fitted = request.clone();
        (optional.strip)(&mut fitted);
        Some(fitted)
    }
}

#[cfg(test)]
mod tests {
    use res_shared::wire::NodeOutput;
    use uuid::Uuid;

    use super::*;

    fn refusal(message: &str) -> CloudError {
        CloudError::Rejected {
            function: "branch_rules_set_NextRunTime",
            status: 400,
            code: "invalid_field".to_owned(),
            message: message.to_owned(),
            body: serde_json::Value::Null,
        }
    }

    fn full_report() -> SetNextRunTimeRequest {
        let mut request: SetNextRunTimeRequest = serde_json::from_value(serde_json::json!({
            "branch_rule_id": Uuid::new_v4(), "is_last_run_failed": false,
            "output": [{"node_id": "detect", "visit": 1, "stream": "stdout", "text": "hi"}]
        }))
        .expect("a report");
        request.started_at = Some(crate::clock::now());
        request.finished_at = Some(crate::clock::now());
        request
    }

    /// The wording is serde's, as the functions of 2026-11-25 answered a report with times.
    #[test]
    fn a_refused_field_is_left_out_now_and_from_then_on() {
        let older = OlderFunctions::default();
        let report = full_report();
        assert_eq!(older.fit(&report), report, "nothing refused yet");
        let error = refusal(
            "invalid request body: unknown field `started_at`, expected one of \
             `branch_rule_id`, `is_last_run_failed`, `execution_id`",
        );
        let again = older.without_refused(&report, &error).expect("stripped");
        assert_eq!((again.started_at, again.finished_at), (None, None));
        assert_eq!(again.output, report.output, "only what was refused goes");
        let later = older.fit(&full_report());
        assert_eq!((later.started_at, later.finished_at), (None, None));
        assert!(!later.output.is_empty());
        let error = refusal("invalid request body: unknown field `output`");
        let bare = older.without_refused(&later, &error).expect("stripped");
        assert!(bare.output.is_empty());
        assert!(older.fit(&full_report()).output.is_empty());
    }

    #[test]
    fn other_refusals_and_absent_fields_are_not_stepped_down_from() {
        let older = OlderFunctions::default();
        let mut report = full_report();
        let lost = CloudError::Rejected {
            function: "branch_rules_set_NextRunTime",
            status: 409,
            code: "lease_lost".to_owned(),
            message: "the lease ran out".to_owned(),
            body: serde_json::Value::Null,
        };
        assert!(older.without_refused(&report, &lost).is_none());
        let unknown = refusal("invalid request body: unknown field `offline`");
        assert!(
            older.without_refused(&report, &unknown).is_none(),
            "an offline run must not be reported as an online one"
        );
        report.output = Vec::<NodeOutput>::new();
        let output = refusal("invalid request body: unknown field `output`");
        assert!(
            older.without_refused(&report, &output).is_none(),
            "a field the report does not carry cannot be what was refused"
        );
    }

    #[test]
    fn a_refused_disk_state_is_not_told_again() {
        let older = OlderFunctions::default();
        assert!(older.tells_disk());
        let other = refusal("invalid request body: unknown field `format`");
        assert!(!older.refused_disk(&other));
        assert!(older.tells_disk());
        let refused = refusal(
            "invalid request body: health: unknown field `state_unwritable_since`, expected \
             one of `version`, `outbox_depth`, `last_outage`, `runs_offline`",
        );
        assert!(older.refused_disk(&refused));
        assert!(!older.tells_disk());
        // The low-space field is the same release's: refusing it refuses both.
        let older = OlderFunctions::default();
        let refused = refusal(
            "invalid request body: health: unknown field `state_space_low_since`, expected \
             one of `version`, `outbox_depth`, `last_outage`, `runs_offline`",
        );
        assert!(older.refused_disk(&refused));
        assert!(!older.tells_disk());
    }
}
