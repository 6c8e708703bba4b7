//! Releases side by side (docs/compatibility.md): each earlier release's runner against
//! today's functions — a site not yet upgraded — and today's runner against each earlier
//! release's functions — a functions rollback, or a runner upgraded before its cloud. The
//! binaries are the releases' own, built from their commits (`releases.txt`).
//!
//! One site's day, the same for every pairing: rules due together (claims, heartbeats and
//! reports, in batches where both sides have them), a Run now (a waiting plan request
//! answered with a delta), an outage of the functions (offline runs and the outbox), and
//! the functions back: every run recorded once, none crashed, one violation each.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_setup::releases::{self, Release};
use res_tests::functions::RuleSpec;
use res_tests::processes::{Runner, binary, eventually};

use crate::system::{LOOPBACK, System, detector};

const WAIT: Duration = Duration::from_secs(60);

/// Rules of the site's day that run on a schedule.
const SCHEDULED: usize = 4;

/// An earlier release's `binary`, built from its commit if this checkout has not yet.
pub(crate) async fn release_binary(version: &str, name: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned();
    let name = name.to_owned();
    let version = version.to_owned();
    tokio::task::spawn_blocking(move || {
        let release: Release = releases::listed(&workspace)
            .expect("releases.txt")
            .into_iter()
            .find(|r| r.version == version)
            .unwrap_or_else(|| panic!("releases.txt lists no {version}"));
        // Its own target directory: the workspace's holds binaries other tests are running.
        let target = workspace.join("target/releases/target");
        releases::build(&workspace, &release, &target).expect("the release builds");
        release.binary(&workspace, &name)
    })
    .await
    .expect("joined")
}

/// What the site's runner did, from its log: (runs finished, of them offline).
fn finished_runs(runner: &Runner) -> (usize, usize) {
    let log = runner.log();
    let finished: Vec<&str> = log.lines().filter(|l| l.contains("job finished")).collect();
    let offline = finished
        .iter()
        .filter(|l| l.contains("offline=true"))
        .count();
    (finished.len(), offline)
}

/// The site's day with `runner` (a `res-runner` binary) against `system`; `version` is the
/// version the runner should report to the registry.
async fn a_sites_day(system: &mut System, runner: &Path, version: &str) {
    let cron = "*/5 * * * * *";
    let mut scheduled = Vec::new();
    for _ in 0..SCHEDULED {
        let spec = RuleSpec {
            cron: Some(cron),
            next_run_time: Some(Utc::now() - TimeDelta::seconds(10)),
            ..RuleSpec::default()
        };
        // Longer than a heartbeat's period (a third of the 3 s lease): each run beats.
        scheduled.push(system.rule(spec, &detector(1.2, 1)).await);
    }
    let run_now = system.tomorrows_rule(0.2).await;
    let mut site = system.runner_of(runner, "site-1", &[("WORKERS", "4")]);
    eventually("two rounds online", WAIT, || async {
        let mut all = true;
        for rule in &scheduled {
            all &= system.rule_row(*rule).await.2 >= 2;
        }
        all
    })
    .await;

    system.run_now(run_now, "compat").await;

    assert!(system.functions.stop(), "the functions stop cleanly");
    eventually("runs go on offline", WAIT, || async {
        finished_runs(&site).1 >= 2 * SCHEDULED
    })
    .await;
    system.functions.restart().await;
    eventually("the outbox is delivered", WAIT, || async {
        site.delivered_everything().await
    })
    .await;

    // Pause the scheduled rules and let the runs in flight report before the stop.
    system.pause_and_settle(&scheduled, &site, WAIT).await;
    assert!(site.stop(), "the runner stops cleanly");

    let (finished, offline) = finished_runs(&site);
    let mut recorded = 0;
    let mut recorded_offline = 0;
    for rule in &scheduled {
        let executions = system.executions(*rule).await;
        assert!(
            executions.iter().all(|e| e.1 == "completed"),
            "rule {rule}: {executions:?}"
        );
        assert_eq!(
            system.violations(*rule).await,
            executions.len(),
            "rule {rule}: one violation per run, none twice"
        );
        let (_, _, runs, running) = system.rule_row(*rule).await;
        assert_eq!(runs as usize, executions.len(), "rule {rule}");
        assert!(!running);
        recorded += executions.len();
        recorded_offline += executions.iter().filter(|e| e.3).count();
    }
    assert_eq!(system.statuses(run_now).await, ["completed"]);
    assert_eq!(
        (recorded + 1, recorded_offline),
        (finished, offline),
        "every run the site finished is recorded once, offline ones as offline"
    );
    let reported: Option<String> =
        sqlx::query_scalar("SELECT version FROM runners WHERE runner_id = 'site-1'")
            .fetch_one(&system.pool)
            .await
            .expect("the runner is registered");
    assert_eq!(reported.as_deref(), Some(version), "the registry's version");
    let log = site.log();
    assert!(
        !log.contains("refused for good") && !log.contains(" ERROR "),
        "nothing refused: {}",
        log.lines()
            .filter(|l| l.contains("ERROR") || l.contains("refused"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The fleet view, as an operator reads it with `resctl fleet`, counts the site's runner
/// by the version it runs.
async fn fleet_shows_version(system: &System, version: &str) {
    let fleet = system.resctl(&system.operator, &["fleet"]).await;
    let out = String::from_utf8_lossy(&fleet.stdout);
    assert!(
        out.contains(&format!("\nrunner versions: 1 on {version}\n")),
        "{out}{}",
        String::from_utf8_lossy(&fleet.stderr)
    );
}

/// The runner of release `version` through a site's day against today's functions.
async fn an_earlier_runner(version: &str) {
    let runner = release_binary(version, "res-runner").await;
    let mut system = System::start().await;
    a_sites_day(&mut system, &runner, version).await;
    fleet_shows_version(&system, version).await;
}

/// Today's runner through a site's day against the functions of release `version`.
async fn earlier_functions(version: &str) {
    let functions = release_binary(version, "res-functions").await;
    let mut system = System::start_serving(&functions, &[], LOOPBACK).await;
    a_sites_day(
        &mut system,
        &binary("res-runner"),
        env!("CARGO_PKG_VERSION"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runner_of_0_1_0_works_against_todays_functions() {
    an_earlier_runner("0.1.0").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runner_of_0_2_0_works_against_todays_functions() {
    an_earlier_runner("0.2.0").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn todays_runner_works_against_the_functions_of_0_2_0() {
    earlier_functions("0.2.0").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn todays_runner_works_against_the_functions_of_0_1_0() {
    earlier_functions("0.1.0").await;
}
