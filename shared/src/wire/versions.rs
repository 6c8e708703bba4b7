//! Which runner releases these functions serve (docs/compatibility.md): a runner reports its
//! version when it registers and with each plan request; one outside the range is an item
//! of the fleet view, with its reason.

use serde::{Deserialize, Serialize};

use super::ServedBranch;

/// The oldest runner release the functions of this release serve: at least the two
/// releases before it (releases.txt lists them; tests/tests/e2e/compat.rs runs them).
pub const OLDEST_SERVED_RUNNER: (u32, u32, u32) = (0, 1, 0);

/// `major.minor.patch` of a version as runners report it (`0.2.0`, `0.3.0-rc.1`), if it
/// is one.
pub fn release_of(version: &str) -> Option<(u32, u32, u32)> {
    let core = version.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
    let release = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(release)
}

/// Why a runner reporting `version` is outside what these functions serve, if it is.
pub fn unsupported_runner(version: Option<&str>) -> Option<String> {
    let (major, minor, patch) = OLDEST_SERVED_RUNNER;
    let oldest = format!("{major}.{minor}.{patch}");
    match version {
        None => Some(format!(
            "reports no version: older than {oldest}, the oldest runner these functions serve; upgrade it"
        )),
        Some(text) => match release_of(text) {
            None => Some(format!(
                "reports version '{text}', which is not a release; these functions serve {oldest} and later"
            )),
            Some(release) if release < OLDEST_SERVED_RUNNER => Some(format!(
                "runs {text}, older than {oldest}, the oldest runner these functions serve; upgrade it"
            )),
            Some(_) => None,
        },
    }
}

/// The first runner release that reads opening hours (plan format 4): an older one is
/// sent no rule that needs them.
pub const FIRST_RUNNER_WITH_HOURS: (u32, u32, u32) = (0, 3, 0);

/// Whether a runner reporting `version` reads opening hours (one that reports none or an
/// unreadable one is counted as not).
pub fn reads_hours(version: Option<&str>) -> bool {
    version
        .and_then(release_of)
        .is_some_and(|release| release >= FIRST_RUNNER_WITH_HOURS)
}

/// Why a runner that reads no opening hours needs someone, when its branches have
/// `left_out` rules that run by them (and so are not in its plan).
pub fn left_out_for_hours(version: Option<&str>, left_out: u64) -> Option<String> {
    if left_out == 0 || reads_hours(version) {
        return None;
    }
    let (major, minor, patch) = FIRST_RUNNER_WITH_HOURS;
    Some(format!(
        "runs {}, which cannot honour opening hours: {left_out} rule(s) of its branches that \
         run by them are left out of its plan and do not run; upgrade it to \
         {major}.{minor}.{patch} or later",
        version.unwrap_or("an unknown version")
    ))
}

/// A runner that needs someone (outside the served range, its disk refusing writes), as
/// the fleet view lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerAttention {
    pub runner_id: String,
    pub version: Option<String>,
    /// Why it needs someone, and what to do ("; " between reasons).
    pub reason: String,
    /// Its key's branches that the caller may see.
    pub branches: Vec<ServedBranch>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_read_and_the_oldest_served_is_the_bound() {
        assert_eq!(release_of("0.2.0"), Some((0, 2, 0)));
        assert_eq!(release_of("1.10.3-rc.1+build"), Some((1, 10, 3)));
        assert_eq!(release_of("0.2"), None);
        assert_eq!(release_of("0.2.0.1"), None);
        assert_eq!(release_of("v0.2.0"), None);
        assert_eq!(unsupported_runner(Some("0.1.0")), None);
        assert_eq!(unsupported_runner(Some("0.3.0")), None);
        assert!(
            unsupported_runner(Some("0.0.9"))
                .is_some_and(|r| r.contains("older than 0.1.0") && r.contains("upgrade"))
        );
        assert!(unsupported_runner(Some("banana")).is_some_and(|r| r.contains("'banana'")));
        assert!(unsupported_runner(None).is_some_and(|r| r.contains("no version")));
        assert!(reads_hours(Some("0.3.0")) && !reads_hours(Some("0.2.0")) && !reads_hours(None));
        assert_eq!(left_out_for_hours(Some("0.2.0"), 0), None);
        assert_eq!(left_out_for_hours(Some("0.3.1"), 4), None);
        assert!(
            left_out_for_hours(Some("0.2.0"), 2)
                .is_some_and(|r| r.contains("2 rule(s)") && r.contains("upgrade it to 0.3.0"))
        );
    }
}
