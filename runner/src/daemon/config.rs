//! `res-runner run` configuration: a TOML file, then environment variables over it
//! (`RES_RUNNER_<KEY>` for every key, and the reference system's names for its settings),
//! checked at start with messages that name the key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// The reference system's environment variables and the keys they set.
pub(crate) const LEGACY_ENV: [(&str, &str); 4] = [
    ("EXECUTION_PLAN_REFRESH_SECONDS", "plan_refresh_seconds"),
    (
        "PLAN_MIN_WRITE_INTERVAL_SECONDS",
        "plan_min_write_interval_seconds",
    ),
    ("PLAN_WORKFLOW_MAX_AGE_HOURS", "plan_workflow_max_age_hours"),
    ("PLAN_ACTION_DETAILS_CAP", "plan_action_details_cap"),
];

/// The prefix of environment overrides.
pub(crate) const ENV_PREFIX: &str = "RES_RUNNER_";

/// The widest start spread, and the default: a run starts within its due second.
const MAX_START_SPREAD_MS: u64 = 1_000;

/// A token that never appears in logs or debug output.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "<empty>"
        } else {
            "<redacted>"
        })
    }
}

/// Every setting of the runner daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Base URL of the functions, e.g. `https://x.example/functions/v1`.
    pub(crate) functions_url: String,
    /// The runner's API token (a runner key scoped to its branches).
    pub(crate) token: Secret,
    /// This runner's name in claims and logs.
    pub(crate) runner_id: String,
    /// Where the plan, outbox and shutdown marker live.
    pub(crate) state_dir: PathBuf,
    /// Workers running jobs in parallel.
    pub(crate) workers: usize,
    /// Seconds between plan refreshes (reference: `EXECUTION_PLAN_REFRESH_SECONDS`) when
    /// the server does not wait for changes.
    pub(crate) plan_refresh_seconds: u64,
    /// Seconds a plan request asks the server to wait for a change (0: poll every
    /// `plan_refresh_seconds` instead).
    pub(crate) plan_wait_seconds: u64,
    /// Minimum seconds between plan file writes.
    pub(crate) plan_min_write_interval_seconds: u64,
    /// Hours before a rule the server stopped listing is pruned.
    pub(crate) plan_workflow_max_age_hours: u64,
    /// Prepared workflows (loaded configs with their action details) kept in memory.
    pub(crate) plan_action_details_cap: usize,
    /// Jobs queued per scheduler cycle at most.
    pub(crate) max_jobs_per_cycle: usize,
    /// Longest the scheduler sleeps without a reason to wake.
    pub(crate) safety_tick_seconds: u64,
    /// A rule processed this recently is not queued again.
    pub(crate) recent_seconds: u64,
    /// Claim lease; heartbeats go every third of it.
    pub(crate) lease_seconds: u32,
    /// No new job starts while host memory use is at or above this percentage.
    pub(crate) memory_limit_percent: f64,
    /// Whether due rules run from the local plan while the functions are unreachable.
    pub(crate) offline_execution: OfflineExecution,
    /// On shutdown, running jobs get this long to finish before they are cancelled.
    pub(crate) shutdown_grace_seconds: u64,
    /// Address of the status endpoint (`/`, `/healthz`, `/metrics`, `/status`).
    pub(crate) status_listen: SocketAddr,
    /// Timeout of each call to the functions.
    pub(crate) request_timeout_seconds: u64,
    /// Delays up to this long wait in place; longer ones pause the execution.
    pub(crate) delay_in_place_max_seconds: u64,
    /// Between SIGTERM and SIGKILL for `command` detectors.
    pub(crate) stop_grace_seconds: u64,
    /// Warn when the runner's clock and the server's differ by more than this.
    pub(crate) clock_skew_warn_seconds: u64,
    /// Due runs start at this runner's moment within this many milliseconds after their due
    /// second (see `res_shared::schedule::start_offset`), so that a fleet's claims of one
    /// second do not all reach the functions in the same few milliseconds.
    pub(crate) start_spread_ms: u64,
    /// Below this much free space in the state directory (MiB) the runner warns — health,
    /// status, metrics and the fleet view — before a write fails; 0 turns the warning off.
    pub(crate) state_free_warn_mb: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            functions_url: String::new(),
            token: Secret::default(),
            runner_id: String::new(),
            state_dir: PathBuf::from("/var/lib/res-runner"),
            workers: 4,
            plan_refresh_seconds: 20,
            plan_wait_seconds: 240,
            plan_min_write_interval_seconds: 1,
            plan_workflow_max_age_hours: 24,
            plan_action_details_cap: 1500,
            max_jobs_per_cycle: 10,
            safety_tick_seconds: 60,
            recent_seconds: 30,
            lease_seconds: 60,
            memory_limit_percent: 90.0,
            offline_execution: OfflineExecution::Owner,
            shutdown_grace_seconds: 30,
            status_listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            request_timeout_seconds: 15,
            delay_in_place_max_seconds: 60,
            stop_grace_seconds: 10,
            clock_skew_warn_seconds: 5,
            start_spread_ms: MAX_START_SPREAD_MS,
            state_free_warn_mb: 100,
        }
    }
}

/// Whether a runner runs due rules from its local plan while the functions are unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum OfflineExecution {
    /// When the cloud named this runner its branch's offline owner (the default); the other
    /// runners of the branch hold its rules.
    #[default]
    Owner,
    /// Always (`true`): this runner is known to be its branches' sole runner.
    Always,
    /// Never (`false`): due rules wait for the cloud.
    Never,
}

impl OfflineExecution {
    /// The name the configuration takes.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OfflineExecution::Owner => "owner",
            OfflineExecution::Always => "true",
            OfflineExecution::Never => "false",
        }
    }
}

impl Serialize for OfflineExecution {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for OfflineExecution {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Flag(bool),
            Name(String),
        }
        match Given::deserialize(deserializer)? {
            Given::Flag(true) => Ok(OfflineExecution::Always),
            Given::Flag(false) => Ok(OfflineExecution::Never),
            Given::Name(name) => match name.trim() {
                "owner" => Ok(OfflineExecution::Owner),
                "true" => Ok(OfflineExecution::Always),
                "false" => Ok(OfflineExecution::Never),
                other => Err(serde::de::Error::custom(format!(
                    "offline_execution must be \"owner\", true or false, not {other:?}"
                ))),
            },
        }
    }
}

/// Why the configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The file or an environment variable could not be read as configuration.
    #[error("{0}")]
    Read(String),
    /// Values that parse but make no sense, every one listed.
    #[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
}

impl Config {
    /// Reads `path` (if given; a named file must exist), applies environment overrides
    /// from `env` (the process environment in production), and checks the result.
    pub(crate) fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = path {
            if !path.exists() {
                return Err(ConfigError::Read(format!(
                    "config file {} does not exist",
                    path.display()
                )));
            }
            figment = figment.merge(Toml::file_exact(path));
        }
        let figment = figment
            .merge(Env::raw().filter_map(|key| {
                LEGACY_ENV
                    .iter()
                    .find(|(legacy, _)| key == *legacy)
                    .map(|(_, ours)| (*ours).into())
            }))
            // These two are command-line options (`--config`, `--log-format`), not keys.
            .merge(Env::prefixed(ENV_PREFIX).ignore(&["config", "log_format"]));
        let config: Config = figment
            .extract()
            .map_err(|e| ConfigError::Read(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// Every problem with the values.
    /// A warning when the functions are reached in clear over a network: the token, the
    /// plan and the brand's secrets in it would cross it unencrypted.
    pub(crate) fn cleartext_warning(&self) -> Option<String> {
        let url = reqwest::Url::parse(&self.functions_url).ok()?;
        let local = match url.host()? {
            url::Host::Domain(name) => name == "localhost",
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
        };
        (url.scheme() == "http" && !local).then(|| {
            format!(
                "functions_url {} is plain http to another host: the token, the plan and the secrets it carries cross the network unencrypted; use https",
                url.origin().ascii_serialization()
            )
        })
    }

    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut need = |ok: bool, message: &str| {
            if !ok {
                problems.push(message.to_owned());
            }
        };
        need(
            !self.functions_url.trim().is_empty(),
            "functions_url is required (e.g. https://<project>/functions/v1)",
        );
        if !self.functions_url.trim().is_empty() {
            let parsed = reqwest::Url::parse(&self.functions_url);
            need(
                parsed
                    .as_ref()
                    .is_ok_and(|u| matches!(u.scheme(), "http" | "https")),
                &format!(
                    "functions_url '{}' is not an http(s) URL",
                    self.functions_url
                ),
            );
        }
        need(
            !self.token.0.trim().is_empty(),
            "token is required (a runner API key)",
        );
        need(
            !self.runner_id.trim().is_empty() && self.runner_id.len() <= 200,
            "runner_id is required (1-200 characters)",
        );
        need(self.workers >= 1, "workers must be at least 1");
        need(
            self.plan_refresh_seconds >= 1,
            "plan_refresh_seconds must be at least 1",
        );
        need(
            self.plan_wait_seconds <= 300,
            "plan_wait_seconds must be between 0 and 300",
        );
        need(
            self.max_jobs_per_cycle >= 1,
            "max_jobs_per_cycle must be at least 1",
        );
        need(
            self.safety_tick_seconds >= 1,
            "safety_tick_seconds must be at least 1",
        );
        need(
            self.plan_action_details_cap >= 1,
            "plan_action_details_cap must be at least 1",
        );
        need(
            (1..=600).contains(&self.lease_seconds),
            "lease_seconds must be between 1 and 600",
        );
        need(
            self.memory_limit_percent > 0.0 && self.memory_limit_percent <= 100.0,
            "memory_limit_percent must be in (0, 100]",
        );
        need(
            self.request_timeout_seconds >= 1,
            "request_timeout_seconds must be at least 1",
        );
        need(
            self.start_spread_ms <= MAX_START_SPREAD_MS,
            "start_spread_ms must be between 0 and 1000",
        );
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// `plan_refresh_seconds` as a duration.
    pub(crate) fn refresh_interval(&self) -> Duration {
        Duration::from_secs(self.plan_refresh_seconds)
    }

    /// `plan_wait_seconds` as a duration.
    pub(crate) fn plan_wait(&self) -> Duration {
        Duration::from_secs(self.plan_wait_seconds)
    }

    /// How long after a due second this runner starts the runs due then.
    pub(crate) fn start_offset(&self) -> Duration {
        res_shared::schedule::start_offset(
            &self.runner_id,
            Duration::from_millis(self.start_spread_ms),
        )
    }

    /// The plan file.
    pub(crate) fn plan_path(&self) -> PathBuf {
        self.state_dir.join("plan.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_beyond_this_host_is_warned_of() {
        let at = |url: &str| Config {
            functions_url: url.into(),
            ..Config::default()
        };
        assert!(
            at("https://res.example/functions/v1")
                .cleartext_warning()
                .is_none()
        );
        assert!(
            at("http://127.0.0.1:54321/functions/v1")
                .cleartext_warning()
                .is_none()
        );
        assert!(
            at("http://localhost:54321/functions/v1")
                .cleartext_warning()
                .is_none()
        );
        let warned = at("http://10.0.0.5:54321/functions/v1").cleartext_warning();
        assert!(
            warned.is_some_and(|w| w.contains("http://10.0.0.5:54321") && w.contains("use https"))
        );
    }

    #[test]
    fn problems_are_listed_together_and_the_token_never_shows() {
        let config = Config {
            token: Secret("s3cret".into()),
            workers: 0,
            memory_limit_percent: 120.0,
            functions_url: "ftp://x".into(),
            start_spread_ms: 1_001,
            ..Config::default()
        };
        let message = config.check().expect_err("invalid").to_string();
        for part in [
            "workers",
            "memory_limit_percent",
            "start_spread_ms must be between 0 and 1000",
            "functions_url 'ftp://x'",
            "runner_id",
        ] {
            assert!(message.contains(part), "{part} in {message}");
        }
        assert!(!format!("{config:?}").contains("s3cret"));
    }

    #[test]
    fn a_runner_starts_its_runs_at_its_own_moment_within_the_spread() {
        let at = |runner_id: &str, start_spread_ms: u64| {
            Config {
                runner_id: runner_id.into(),
                start_spread_ms,
                ..Config::default()
            }
            .start_offset()
        };
        assert_eq!(Config::default().start_spread_ms, 1_000);
        assert_eq!(at("site-1", 1_000), Duration::from_millis(750));
        assert_eq!(at("site-1", 200), Duration::from_millis(150));
        assert_eq!(at("site-1", 0), Duration::ZERO);
    }

    #[test]
    fn offline_execution_is_the_owners_by_default_and_takes_true_false_or_owner() {
        assert_eq!(Config::default().offline_execution, OfflineExecution::Owner);
        let read = |toml: &str| {
            Figment::from(Serialized::defaults(Config::default()))
                .merge(Toml::string(toml))
                .extract::<Config>()
                .map(|c| c.offline_execution)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            read("offline_execution = true"),
            Ok(OfflineExecution::Always)
        );
        assert_eq!(
            read("offline_execution = false"),
            Ok(OfflineExecution::Never)
        );
        assert_eq!(
            read("offline_execution = \"owner\""),
            Ok(OfflineExecution::Owner)
        );
        assert_eq!(read(""), Ok(OfflineExecution::Owner));
        let error = read("offline_execution = \"sometimes\"").expect_err("refused");
        assert!(
            error.contains("offline_execution") && error.contains("sometimes"),
            "{error}"
        );
    }
}
