//! Failure threshold, overlap policy and jitter, wherever a document sets them.

use res_shared::schedule::{MAX_JITTER_SECONDS, OverlapPolicy};

use super::Report;
use crate::path::Path;

/// Most failures in a row a threshold may wait for.
const MAX_FAILURE_THRESHOLD: u32 = 1_000;

pub(super) fn check_failure_threshold(value: Option<u32>, at: &Path, report: &mut Report) {
    if let Some(threshold) = value
        && !(1..=MAX_FAILURE_THRESHOLD).contains(&threshold)
    {
        report.error(
            &at.field("failure_threshold"),
            format!("must be 1-{MAX_FAILURE_THRESHOLD} failures in a row"),
        );
    }
}

pub(super) fn check_overlap(value: Option<&str>, at: &Path, report: &mut Report) {
    if let Some(text) = value
        && let Err(message) = text.parse::<OverlapPolicy>()
    {
        report.error(&at.field("overlap_policy"), message);
    }
}

pub(super) fn check_jitter(value: Option<u32>, at: &Path, report: &mut Report) {
    if let Some(seconds) = value
        && seconds > MAX_JITTER_SECONDS
    {
        report.error(
            &at.field("jitter_seconds"),
            format!("must be 0-{MAX_JITTER_SECONDS} seconds"),
        );
    }
}
