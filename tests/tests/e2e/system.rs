//! The whole system as processes: a fresh database migrated by `res-functions migrate`,
//! `res-functions serve`, runner keys from `res-functions create-api-key`, and
//! `res-runner run` processes on the same branch.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use res_tests::functions::{RuleSpec, Seed};
use res_tests::postgres::{TestDatabase, server};
use res_tests::processes::{FunctionsServer, Runner, RunnerSpec, binary, eventually};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

/// Where the functions listen unless a test says otherwise.
pub const LOOPBACK: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// A running system.
pub struct System {
    /// Direct database access, to seed and to check.
    pub pool: PgPool,
    /// The functions process.
    pub functions: FunctionsServer,
    /// The branch every rule belongs to.
    pub branch: Uuid,
    /// A runner key for it.
    pub token: String,
    /// An operator key (`alice`) scoped to the branch.
    pub operator: String,
    /// State and logs.
    pub dir: PathBuf,
    database_url: String,
    /// The test's own database, dropped with the system (none on a server of the test's).
    _database: Option<TestDatabase>,
}

impl Drop for System {
    fn drop(&mut self) {
        // A passing test leaves nothing behind; a failing one keeps its logs to read.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs `res-functions <args>` against `database_url`; its stdout.
pub fn functions_cli(database_url: &str, args: &[&str]) -> String {
    let output = Command::new(binary("res-functions"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .output()
        .expect("res-functions runs");
    assert!(
        output.status.success(),
        "res-functions {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

impl System {
    /// Database, migrations, functions, a brand in Asia/Riyadh with one branch, a runner key.
    pub async fn start() -> System {
        System::start_with(&[]).await
    }

    /// [`System::start`] with more `res-functions serve` arguments.
    pub async fn start_with(serve_args: &[&str]) -> System {
        System::start_serving(&binary("res-functions"), serve_args, LOOPBACK).await
    }

    /// [`System::start_with`] with `functions` serving (another release's) on `host`; the
    /// database is migrated by today's, as a functions rollback leaves it.
    pub async fn start_serving(
        functions: &std::path::Path,
        serve_args: &[&str],
        host: std::net::IpAddr,
    ) -> System {
        let database = server().create_database().await;
        let url = database.url.clone();
        System::start_on(&url, Some(database), functions, serve_args, host).await
    }

    /// Today's system, serving with `serve_args`, on the database at `url` (a server the
    /// test made itself).
    pub async fn start_on_url(url: &str, serve_args: &[&str]) -> System {
        System::start_on(url, None, &binary("res-functions"), serve_args, LOOPBACK).await
    }

    async fn start_on(
        url: &str,
        database: Option<TestDatabase>,
        functions: &std::path::Path,
        serve_args: &[&str],
        host: std::net::IpAddr,
    ) -> System {
        res_tests::functions::install_tls();
        functions_cli(url, &["migrate"]);
        let pool = PgPoolOptions::new()
            .max_connections(5)
            .connect(url)
            .await
            .expect("connect");
        let dir = std::env::temp_dir().join(format!("res-e2e-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let functions =
            FunctionsServer::start_at(functions, url, &dir.join("functions.log"), serve_args, host)
                .await;
        let seed = Seed::new(&pool);
        let branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
        let token = functions_cli(
            url,
            &[
                "create-api-key",
                "--name",
                "e2e",
                "--role",
                "runner",
                "--branch",
                &branch.to_string(),
            ],
        );
        let operator = functions_cli(
            url,
            &[
                "create-api-key",
                "--name",
                "alice",
                "--role",
                "operator",
                "--branch",
                &branch.to_string(),
            ],
        );
        System {
            pool,
            functions,
            branch,
            token,
            operator,
            dir,
            database_url: url.to_owned(),
            _database: database,
        }
    }

    /// `resctl <args>` with `token` against these functions (no config file of the
    /// machine's), on a blocking thread.
    pub async fn resctl(&self, token: &str, args: &[&str]) -> std::process::Output {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let (url, token) = (self.functions.url(), token.to_owned());
        tokio::task::spawn_blocking(move || {
            Command::new(binary("resctl"))
                .args(&args)
                .env("RES_URL", url)
                .env("RES_TOKEN", token)
                .env("XDG_CONFIG_HOME", "/nonexistent")
                .output()
                .expect("resctl runs")
        })
        .await
        .expect("joined")
    }

    /// The database's URL (for `res-functions` admin commands).
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// A runner named `name`; `extra` overrides settings (`("WORKERS", "2")`).
    pub fn runner(&self, name: &str, extra: &[(&str, &str)]) -> Runner {
        self.runner_of(&binary("res-runner"), name, extra)
    }

    /// A runner named `name` inside `netns` (the functions must listen on its host end).
    pub fn runner_in(
        &self,
        netns: &res_tests::netns::Netns,
        name: &str,
        extra: &[(&str, &str)],
    ) -> Runner {
        Runner::start_in(
            netns,
            RunnerSpec {
                binary: &binary("res-runner"),
                dir: &self.dir,
                name,
                functions_url: &self.functions.url(),
                token: &self.token,
            },
            extra,
        )
    }

    /// [`System::runner`] of the `res-runner` at `path` (another release's).
    pub fn runner_of(&self, path: &std::path::Path, name: &str, extra: &[(&str, &str)]) -> Runner {
        Runner::start(
            RunnerSpec {
                binary: path,
                dir: &self.dir,
                name,
                functions_url: &self.functions.url(),
                token: &self.token,
            },
            extra,
            &[],
        )
    }

    /// A rule's executions in the order they started (claimed, for one never started).
    pub async fn runs_in_order(&self, rule: Uuid) -> Vec<RunSpan> {
        sqlx::query_as(
            "SELECT id, status, started_at, scheduled_at, finished_at FROM executions \
             WHERE branch_rule_id = $1 ORDER BY COALESCE(started_at, scheduled_at)",
        )
        .bind(rule)
        .fetch_all(&self.pool)
        .await
        .expect("executions")
    }

    /// Waits until `count` rules have run and none is running.
    pub async fn all_ran(&self, count: i64) {
        eventually(&format!("all {count} rules ran"), Duration::from_secs(40), || async {
            let runs: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM branch_rules WHERE run_count > 0 AND NOT is_currently_running",
            )
            .fetch_one(&self.pool)
            .await
            .expect("count");
            runs == count
        })
        .await;
    }

    /// A rule whose workflow runs `script` (sh) as a `command` detector, then records a
    /// violation when the result says `violations > 0`.
    pub async fn rule(&self, spec: RuleSpec<'_>, script: &str) -> Uuid {
        Seed::new(&self.pool)
            .command_rule(self.branch, spec, script)
            .await
    }

    /// A rule due tomorrow (only a run-now runs it today) whose detector takes `seconds`.
    pub async fn tomorrows_rule(&self, seconds: f64) -> Uuid {
        self.rule(due_tomorrow(), &detector(seconds, 0)).await
    }

    /// An operator's Run now of `rule` (`reason` said), answered 200, then its run completed.
    pub async fn run_now(&self, rule: Uuid, reason: &str) {
        let answer = reqwest::Client::new()
            .post(format!("{}/rules_run_now", self.functions.url()))
            .bearer_auth(&self.operator)
            .json(&serde_json::json!({"branch_rule_id": rule, "reason": reason}))
            .send()
            .await
            .expect("run now answered");
        let status = answer.status().as_u16();
        assert_eq!(status, 200, "{:?}", answer.text().await);
        self.completes(rule, "the Run now reached the site").await;
    }

    /// Pauses `rules` and waits (up to `wait`) until none is scheduled or running and
    /// `runner`'s outbox is empty: what they ran is all recorded.
    pub async fn pause_and_settle(&self, rules: &[Uuid], runner: &Runner, wait: Duration) {
        sqlx::query("UPDATE branch_rules SET paused_at = now() WHERE id = ANY($1)")
            .bind(rules)
            .execute(&self.pool)
            .await
            .expect("pause");
        eventually("the last runs are in", wait, || async {
            // No job left either: a report still being sent (slowly, over a bad link) is
            // in no outbox, and its run may meanwhile have been crashed by the sweeper.
            let mut settled = runner
                .status()
                .await
                .is_some_and(|s| s["outbox_depth"] == 0 && s["active_jobs"] == 0);
            for rule in rules {
                settled &= self
                    .statuses(*rule)
                    .await
                    .iter()
                    .all(|s| s != "scheduled" && s != "running");
            }
            settled
        })
        .await;
    }

    /// Waits (up to 40 s) until a run of `rule` completed; `what` names it if none does.
    pub async fn completes(&self, rule: Uuid, what: &str) {
        eventually(what, Duration::from_secs(40), || async {
            self.executions(rule)
                .await
                .iter()
                .any(|e| e.1 == "completed")
        })
        .await;
    }

    /// Executions of a rule, oldest first: (id, status, retry_of, offline, runner_id).
    pub async fn executions(&self, rule: Uuid) -> Vec<(Uuid, String, Option<Uuid>, bool, String)> {
        sqlx::query_as(
            "SELECT id, status, retry_of, offline, runner_id FROM executions \
             WHERE branch_rule_id = $1 ORDER BY scheduled_at",
        )
        .bind(rule)
        .fetch_all(&self.pool)
        .await
        .expect("executions")
    }

    /// Violations recorded for a rule.
    pub async fn violations(&self, rule: Uuid) -> usize {
        let count: i64 =
            sqlx::query_scalar("SELECT count(*) FROM violations WHERE branch_rule_id = $1")
                .bind(rule)
                .fetch_one(&self.pool)
                .await
                .expect("violations");
        usize::try_from(count).unwrap_or(0)
    }

    /// Violations recorded for a rule, counted by the execution that recorded them (`None`:
    /// by none).
    pub async fn violations_by_execution(
        &self,
        rule: Uuid,
    ) -> std::collections::HashMap<Option<Uuid>, usize> {
        let rows: Vec<(Option<Uuid>, i64)> = sqlx::query_as(
            "SELECT execution_id, count(*) FROM violations \
             WHERE branch_rule_id = $1 GROUP BY execution_id",
        )
        .bind(rule)
        .fetch_all(&self.pool)
        .await
        .expect("violations by execution");
        rows.into_iter()
            .map(|(id, n)| (id, usize::try_from(n).unwrap_or(0)))
            .collect()
    }

    /// Reports stored as superseded (late, after a retry took their rule).
    pub async fn superseded(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM executions WHERE report->>'superseded' = 'true'")
            .fetch_one(&self.pool)
            .await
            .expect("superseded")
    }

    /// `(next_run_time, last_run_time, run_count, is_currently_running)`.
    /// The statuses of a rule's executions, oldest first.
    pub async fn statuses(&self, rule: Uuid) -> Vec<String> {
        self.executions(rule)
            .await
            .into_iter()
            .map(|e| e.1)
            .collect()
    }

    pub async fn rule_row(
        &self,
        rule: Uuid,
    ) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>, i64, bool) {
        res_tests::functions::rule_row(&self.pool, rule).await
    }
}

/// A rule's schedule that is due tomorrow: only a Run now runs it today. After a run its
/// schedule fires at 03:00 on 29 February only: a daily 03:00 in the brand's Riyadh is
/// 00:00 UTC, and a test running across it saw the rule come due again.
pub fn due_tomorrow() -> RuleSpec<'static> {
    RuleSpec {
        cron: Some("0 3 29 2 *"),
        next_run_time: Some(Utc::now() + chrono::TimeDelta::days(1)),
        ..RuleSpec::default()
    }
}

/// A detector that prints a result after `sleep` seconds.
pub fn detector(sleep: f64, violations: u32) -> String {
    format!(
        "cat >/dev/null; sleep {sleep}; echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": {violations}}}'"
    )
}

/// The functions' metrics, in the text format.
pub async fn metrics_text(metrics_url: &str) -> String {
    reqwest::get(metrics_url)
        .await
        .expect("the metrics answer")
        .text()
        .await
        .expect("metrics text")
}

/// Requests the functions answered, from their metrics, whose labels contain `labels`.
pub async fn answered(metrics_url: &str, labels: &str) -> u64 {
    metrics_text(metrics_url)
        .await
        .lines()
        .filter(|l| l.starts_with("res_functions_requests_total") && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

/// An execution's place in time: (id, status, started_at, scheduled_at, finished_at).
pub type RunSpan = (
    Uuid,
    String,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
);

/// Asserts that no run of `runs` (as [`System::runs_in_order`] gives them) starts before the
/// one before it ended; a run without an end ends when it was claimed. `what` names them.
pub fn assert_no_overlap(what: &str, runs: &[RunSpan]) {
    for pair in runs.windows(2) {
        let end = pair[0].4.unwrap_or(pair[0].3);
        let next_start = pair[1].2.unwrap_or(pair[1].3);
        assert!(
            next_start >= end - chrono::TimeDelta::milliseconds(1),
            "{what}: {:?} overlaps {:?} in {runs:?}",
            pair[0],
            pair[1]
        );
    }
}
