//! Offline by default, never twice: two runners serve one branch; while the functions are
//! away only the branch's offline owner runs its rules, a restart of the owner changes
//! nothing, and when the functions are back every offline run is recorded once and the
//! other runner does not claim what the owner already ran. The owner's offline next runs
//! are the cloud's answers to the same reports, for interval and buffer_one rules too.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use res_tests::functions::RuleSpec;
use res_tests::processes::{Runner, eventually};
use uuid::Uuid;

use super::due;
use crate::system::{System, assert_no_overlap, detector};

const LONG_WAIT: Duration = Duration::from_secs(90);
/// The rules' period: `*/3 * * * * *`.
const PERIOD_SECONDS: i64 = 3;

pub(super) fn offline_runs(runner: &Runner) -> usize {
    runner
        .log()
        .lines()
        .filter(|l| l.contains("job finished") && l.contains("offline=true"))
        .count()
}

/// The rules the runner has run offline at least once (by the `job{branch_rule_id=…}` span
/// of each finished offline job).
pub(super) fn rules_run_offline(runner: &Runner) -> std::collections::BTreeSet<String> {
    runner
        .log()
        .lines()
        .filter(|l| l.contains("job finished") && l.contains("offline=true"))
        .filter_map(|l| {
            let (_, rest) = l.split_once("job{branch_rule_id=")?;
            rest.split_once('}').map(|(id, _)| id.to_owned())
        })
        .collect()
}

/// The runner's `/status` row for `branch`: (owner, held).
pub(super) async fn owner_seen_by(runner: &Runner, branch: Uuid) -> Option<(String, bool)> {
    let status = runner.status().await?;
    status["offline_owners"].as_array()?.iter().find_map(|o| {
        (o["branch_id"] == serde_json::json!(branch)).then(|| {
            (
                o["owner"].as_str().unwrap_or_default().to_owned(),
                o["held"] == true,
            )
        })
    })
}

/// An execution as the assertions read it.
#[derive(Debug, sqlx::FromRow)]
struct Run {
    id: Uuid,
    retry_of: Option<Uuid>,
    status: String,
    offline: bool,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    runner_id: String,
    /// Its report arrived after a retry had taken the rule.
    superseded: bool,
}

/// The next `*/<period>` second after `t`, strictly after when `t` is on the grid.
pub(super) fn next_due_after(t: DateTime<Utc>, period_seconds: i64) -> DateTime<Utc> {
    let millis = t.timestamp_millis();
    let period = period_seconds * 1000;
    let next = (millis.div_euclid(period) + 1) * period;
    DateTime::<Utc>::from_timestamp_millis(next).unwrap_or(t)
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_functions_away_only_the_branchs_owner_runs_its_rules_and_nothing_runs_twice() {
    let mut system = System::start().await;
    let cron = "*/3 * * * * *";
    let mut rules = Vec::new();
    for _ in 0..3 {
        rules.push(system.rule(due(cron), &detector(0.2, 1)).await);
    }
    let mut owner = system.runner("site-a", &[]);
    eventually(
        "site-a is the branch's offline owner",
        LONG_WAIT,
        || async { owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;
    let mut other = system.runner("site-b", &[]);
    eventually(
        "site-b knows the owner and, having seen it since its start, holds nothing",
        LONG_WAIT,
        || async { owner_seen_by(&other, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;

    // The functions go away: the owner goes on offline, the other runner holds.
    assert!(system.functions.stop(), "the functions stop cleanly");
    eventually("the owner runs every rule offline", LONG_WAIT, || async {
        offline_runs(&owner) >= 2 * rules.len()
    })
    .await;
    assert_eq!(
        owner_seen_by(&other, system.branch).await,
        Some(("site-a".into(), true)),
        "site-b holds the branch's rules during the outage"
    );
    // A crash of the owner while the functions are still away: it restarts from its plan
    // and outbox, still the owner, and goes on without running an occurrence again.
    owner.kill();
    let before_restart = offline_runs(&owner);
    owner.restart();
    eventually("the restarted owner goes on offline", LONG_WAIT, || async {
        offline_runs(&owner) >= before_restart + rules.len()
    })
    .await;

    system.functions.restart().await;
    for runner in [&owner, &other] {
        eventually(
            "both runners are back, outboxes delivered, nothing held",
            LONG_WAIT,
            || async {
                let back = runner.delivered_everything().await;
                back && owner_seen_by(runner, system.branch)
                    .await
                    .is_some_and(|(_, held)| !held)
            },
        )
        .await;
    }
    // Runs go on online for a few periods.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(owner.stop() && other.stop());

    assert_eq!(offline_runs(&other), 0, "only the owner ran offline");
    let mut recorded_offline = 0;
    for rule in &rules {
        let runs: Vec<Run> = sqlx::query_as(
            "SELECT id, status, offline, started_at, finished_at, runner_id, retry_of, \
                    coalesce(report->>'superseded' = 'true', false) AS superseded \
             FROM executions WHERE branch_rule_id = $1 ORDER BY started_at",
        )
        .bind(rule)
        .fetch_all(&system.pool)
        .await
        .expect("executions");
        // The owner's kill may cut an offline run off: it is recorded crashed, and the next
        // run retries it. Nothing else ends otherwise.
        for (i, run) in runs.iter().enumerate() {
            // site-b's run that finished as the functions went away has its report caught
            // in the outbox; its lease runs out, the owner runs the rule's next occurrence
            // offline, and that report may arrive first and take the rule as a retry. The
            // late report then keeps its run's own status, without rescheduling.
            if run.superseded {
                assert!(
                    run.status == "completed" && !run.offline && run.runner_id == "site-b",
                    "only site-b's online run can be overtaken, and it completed: {runs:?}"
                );
                assert_eq!(
                    runs.get(i + 1).and_then(|next| next.retry_of),
                    Some(run.id),
                    "a superseded run was retried by the run after it: {runs:?}"
                );
            }
            match run.status.as_str() {
                "completed" => {}
                "crashed" if run.offline => assert_eq!(
                    runs.get(i + 1).and_then(|next| next.retry_of),
                    Some(run.id),
                    "the run after a crashed one retries it: {runs:?}"
                ),
                _ => panic!("rule {rule}: {run:?} in {runs:?}"),
            }
        }
        for run in runs.iter().filter(|r| r.offline) {
            assert_eq!(
                run.runner_id, "site-a",
                "offline runs are the owner's: {runs:?}"
            );
            recorded_offline += usize::from(run.status == "completed");
        }
        // Every run starts at or after the first due time after the previous run ended:
        // a second run of one occurrence (a claim over an offline run not yet reported)
        // would start before it. A crashed run's retry starts at once, after it.
        for pair in runs.windows(2) {
            let (Some(finished), Some(started)) = (pair[0].finished_at, pair[1].started_at) else {
                panic!("a run without times: {runs:?}");
            };
            let earliest = if pair[0].status == "crashed" {
                finished
            } else {
                next_due_after(finished, PERIOD_SECONDS) - TimeDelta::milliseconds(100)
            };
            assert!(
                started >= earliest,
                "rule {rule}: {:?} started {started} before {earliest}: {runs:?}",
                pair[1]
            );
        }
        // A run cut off after its violation was found keeps it.
        let completed = runs.iter().filter(|r| r.status == "completed").count();
        let violations = system.violations(*rule).await;
        assert!(
            (completed..=runs.len()).contains(&violations),
            "one violation per completed run, at most one per crashed run: {violations} for {runs:?}"
        );
    }
    assert_eq!(
        recorded_offline,
        offline_runs(&owner),
        "every offline run the owner finished is recorded, once"
    );
    for runner in [&owner, &other] {
        let rejected = runner.state_dir.join("outbox").join("rejected");
        assert_eq!(std::fs::read_dir(&rejected).map_or(0, |d| d.count()), 0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn when_the_owner_dies_the_other_runner_takes_the_branch_over_once_it_is_stale() {
    let system = System::start_with(&["--runner-stale-after", "3"]).await;
    system.rule(due("*/2 * * * * *"), &detector(0.0, 0)).await;
    let mut owner = system.runner("site-a", &[]);
    eventually("site-a owns the branch", LONG_WAIT, || async {
        owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false))
    })
    .await;
    let mut other = system.runner("site-b", &[]);
    eventually("site-b sees site-a as the owner", LONG_WAIT, || async {
        owner_seen_by(&other, system.branch)
            .await
            .is_some_and(|(owner, _)| owner == "site-a")
    })
    .await;
    owner.kill();
    eventually("site-b took the branch over", LONG_WAIT, || async {
        owner_seen_by(&other, system.branch).await == Some(("site-b".into(), false))
    })
    .await;
    let runs_before: i64 =
        sqlx::query_scalar("SELECT count(*) FROM executions WHERE runner_id = 'site-b'")
            .fetch_one(&system.pool)
            .await
            .expect("count");
    eventually("site-b runs the branch's rule", LONG_WAIT, || async {
        let runs: i64 =
            sqlx::query_scalar("SELECT count(*) FROM executions WHERE runner_id = 'site-b'")
                .fetch_one(&system.pool)
                .await
                .expect("count");
        runs > runs_before
    })
    .await;
    assert!(other.stop());
}

/// `(execution id, next run)` from each of `runner`'s log lines with `message` and,
/// when given, `marker`.
fn next_runs(runner: &Runner, message: &str, marker: &str) -> Vec<(Uuid, DateTime<Utc>)> {
    // `name=value` up to the next ` key=` (a time may hold a space: `06:00:03.1 UTC`).
    let field = |line: &str, name: &str| -> Option<String> {
        let start = line.find(&format!(" {name}="))? + name.len() + 2;
        let rest = &line[start..];
        let end = rest
            .match_indices(' ')
            .map(|(i, _)| i)
            .find(|&i| {
                let key = rest[i + 1..].split('=').next().unwrap_or_default();
                rest[i + 1..].contains('=')
                    && !key.is_empty()
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
            .unwrap_or(rest.len());
        let value = &rest[..end];
        Some(
            value
                .strip_prefix("Some(")
                .and_then(|v| v.strip_suffix(')'))
                .unwrap_or(value)
                .to_owned(),
        )
    };
    let instant = |text: &str| {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .or_else(|_| {
                chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f UTC")
                    .map(|t| t.and_utc())
            })
            .unwrap_or_else(|e| panic!("a time in the log, {text}: {e}"))
    };
    runner
        .log()
        .lines()
        .filter(|l| l.contains(message) && l.contains(marker))
        .filter_map(|line| {
            let id = field(line, "execution_id")?.parse().ok()?;
            Some((id, instant(&field(line, "next_run_time")?)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_owners_offline_next_runs_equal_the_clouds_for_intervals_and_buffer_one() {
    let mut system = System::start().await;
    // Every run happens offline, so each report's answer depends only on the run: the
    // rules first come due once the owner is known and the functions are away (a claimed
    // run reported late is scheduled from when its report arrives, and the cloud never
    // moves a rule earlier).
    let first_due = Utc::now() + TimeDelta::seconds(20);
    let spec = |cron| RuleSpec {
        cron: Some(cron),
        next_run_time: Some(first_due),
        ..RuleSpec::default()
    };
    // An interval in a two-hour window around now (Asia/Riyadh), a cron rule and an
    // interval whose detectors outlast their periods under buffer_one.
    let riyadh = chrono::FixedOffset::east_opt(3 * 3600).expect("offset");
    let wall = |t: DateTime<Utc>| t.with_timezone(&riyadh).format("%H:%M:%S").to_string();
    let (from, to) = (
        wall(Utc::now() - TimeDelta::hours(1)),
        wall(Utc::now() + TimeDelta::hours(1)),
    );
    let interval = system
        .rule(
            RuleSpec {
                window: Some((&from, &to)),
                ..spec("@every 2s")
            },
            &detector(0.2, 0),
        )
        .await;
    let cron_buffered = system.rule(spec("*/3 * * * * *"), &detector(4.0, 0)).await;
    let interval_buffered = system.rule(spec("@every 2s"), &detector(3.0, 0)).await;
    for rule in [cron_buffered, interval_buffered] {
        sqlx::query("UPDATE branch_rules SET overlap_policy = 'buffer_one' WHERE id = $1")
            .bind(rule)
            .execute(&system.pool)
            .await
            .expect("policy");
    }
    let mut owner = system.runner("site-a", &[("WORKERS", "4")]);
    eventually(
        "site-a is the branch's offline owner",
        LONG_WAIT,
        || async { owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false)) },
    )
    .await;
    assert!(system.functions.stop(), "the functions stop cleanly");
    assert!(
        Utc::now() < first_due,
        "the owner was known only after the rules came due; the runs would not all be offline"
    );
    eventually(
        "each rule runs offline at least three times",
        LONG_WAIT,
        || async { offline_runs(&owner) >= 12 },
    )
    .await;
    system.functions.restart().await;
    eventually("the outbox is delivered", LONG_WAIT, || async {
        owner.delivered_everything().await
    })
    .await;
    assert!(owner.stop());

    // Each offline run's next run as the owner computed it, and as the cloud answered its
    // report when the outbox was delivered: the same instant.
    let local = next_runs(&owner, "job finished", "offline=true");
    let cloud: std::collections::HashMap<Uuid, DateTime<Utc>> =
        next_runs(&owner, "outbox: report delivered", "")
            .into_iter()
            .collect();
    let mut compared = std::collections::HashMap::<Uuid, usize>::new();
    for (execution, computed_here) in &local {
        let Some(answered) = cloud.get(execution) else {
            continue;
        };
        assert_eq!(
            computed_here, answered,
            "offline execution {execution}: the owner's next run and the cloud's"
        );
        let rule: Uuid = sqlx::query_scalar("SELECT branch_rule_id FROM executions WHERE id = $1")
            .bind(execution)
            .fetch_one(&system.pool)
            .await
            .expect("the offline run is recorded");
        *compared.entry(rule).or_default() += 1;
    }
    for (rule, what) in [
        (interval, "the windowed interval"),
        (cron_buffered, "the buffer_one cron"),
        (interval_buffered, "the buffer_one interval"),
    ] {
        assert!(
            compared.get(&rule).copied().unwrap_or(0) >= 2,
            "{what}: {compared:?} of {local:?}"
        );
    }
    // The buffered rules ran back to back offline too: their local next runs were the
    // finish itself, not the next grid time.
    let back_to_back: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM executions e JOIN executions f \
           ON f.branch_rule_id = e.branch_rule_id AND f.offline AND e.offline \
          AND f.started_at > e.finished_at \
          AND f.started_at < e.finished_at + interval '500 milliseconds' \
         WHERE e.branch_rule_id = ANY($1)",
    )
    .bind(vec![cron_buffered, interval_buffered])
    .fetch_one(&system.pool)
    .await
    .expect("count");
    assert!(back_to_back >= 2, "{back_to_back} buffered offline runs");
}

/// The offline runs in progress a runner has on disk.
pub(super) fn journal_entries(runner: &Runner) -> Vec<serde_json::Value> {
    std::fs::read_dir(runner.state_dir.join("offline-runs"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .filter_map(|e| std::fs::read(e.path()).ok())
                .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, sqlx::FromRow)]
struct Attempt {
    id: Uuid,
    status: String,
    offline: bool,
    attempt: i32,
    retry_of: Option<Uuid>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
}

#[tokio::test(flavor = "multi_thread")]
async fn an_offline_run_killed_mid_run_is_recorded_crashed_and_retried_when_the_functions_return() {
    let mut system = System::start().await;
    // The detector takes 6 s: a kill lands inside a run.
    let rule = system.rule(due("*/3 * * * * *"), &detector(6.0, 1)).await;
    let mut owner = system.runner("site-a", &[]);
    eventually("site-a owns the branch", LONG_WAIT, || async {
        owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false))
    })
    .await;
    // Whatever ran online finishes before the outage.
    eventually("nothing runs online", LONG_WAIT, || async {
        owner
            .status()
            .await
            .is_some_and(|s| s["running"].as_array().is_some_and(Vec::is_empty))
    })
    .await;
    assert!(system.functions.stop(), "the functions stop cleanly");
    eventually("an offline run is under way", LONG_WAIT, || async {
        !journal_entries(&owner).is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    owner.kill();
    let entries = journal_entries(&owner);
    assert_eq!(entries.len(), 1, "one run was cut off: {entries:?}");
    let cut_off: Uuid = serde_json::from_value(entries[0]["execution_id"].clone()).expect("id");
    let started: DateTime<Utc> =
        serde_json::from_value(entries[0]["started_at"].clone()).expect("start");

    system.functions.restart().await;
    owner.restart();
    let attempts = || async {
        sqlx::query_as::<_, Attempt>(
            "SELECT id, status, offline, attempt, retry_of, started_at, finished_at \
             FROM executions WHERE branch_rule_id = $1 ORDER BY scheduled_at",
        )
        .bind(rule)
        .fetch_all(&system.pool)
        .await
        .expect("executions")
    };
    eventually(
        "the cut-off run is recorded and its retry finished",
        LONG_WAIT,
        || async {
            attempts()
                .await
                .iter()
                .any(|a| a.retry_of == Some(cut_off) && a.status == "completed")
        },
    )
    .await;
    let runs = attempts().await;
    let crashed = runs
        .iter()
        .find(|a| a.id == cut_off)
        .unwrap_or_else(|| panic!("the cut-off run has a record: {runs:?}"));
    assert_eq!(crashed.status, "crashed", "{runs:?}");
    assert!(crashed.offline);
    assert_eq!(
        crashed.started_at.map(|t| t.timestamp_micros()),
        Some(started.timestamp_micros()),
        "its own start (PostgreSQL keeps microseconds)"
    );
    // Its end is when it was last seen alive (refreshed every 5 s): not before its start.
    assert!(
        crashed
            .finished_at
            .is_some_and(|f| f.timestamp_micros() >= started.timestamp_micros()),
        "{crashed:?}"
    );
    let retry = runs
        .iter()
        .find(|a| a.retry_of == Some(cut_off))
        .expect("a retry");
    assert_eq!(retry.attempt, crashed.attempt + 1, "{runs:?}");
    assert!(
        retry.started_at >= crashed.finished_at,
        "the retry starts after the crash: {runs:?}"
    );
    assert!(
        journal_entries(&owner).is_empty(),
        "nothing left in progress"
    );
    assert!(owner.stop());
    let rejected = owner.state_dir.join("outbox").join("rejected");
    assert_eq!(std::fs::read_dir(&rejected).map_or(0, |d| d.count()), 0);
}

/// An offline run still going when the functions come back: the owner asks for its plan
/// only once it is reported, so the other runner, which holds the branch until then, never
/// claims the occurrence the owner is running.
#[tokio::test(flavor = "multi_thread")]
async fn an_offline_run_still_going_when_the_functions_return_is_not_claimed_by_the_other_runner() {
    let mut system = System::start().await;
    let starts = system.dir.join("starts");
    // Every 20 s; the detector notes each start, then works for 5 s.
    let script = format!(
        "cat > /dev/null; date +%s >> {}; sleep 5; \
         echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 0}}'",
        starts.display()
    );
    let rule = system.rule(due("*/20 * * * * *"), &script).await;
    let owner = system.runner("site-a", &[]);
    eventually("site-a owns the branch", LONG_WAIT, || async {
        owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false))
    })
    .await;
    let other = system.runner("site-b", &[]);
    eventually("site-b sees site-a as the owner", LONG_WAIT, || async {
        owner_seen_by(&other, system.branch).await == Some(("site-a".into(), false))
    })
    .await;
    // The functions go away before an occurrence, and come back while its offline run works.
    let started = || std::fs::read_to_string(&starts).map_or(0, |s| s.lines().count());
    eventually("the rule ran once online", LONG_WAIT, || async {
        started() >= 1
    })
    .await;
    eventually("between two runs", LONG_WAIT, || async {
        !system
            .executions(rule)
            .await
            .iter()
            .any(|e| e.1 == "running")
    })
    .await;
    // Stop them just before the next occurrence, so the outage is short and the other
    // runner, retrying every second or two, is back while the offline run still works.
    let now = Utc::now();
    let next = next_due_after(now, 20);
    let until = (next - now - TimeDelta::milliseconds(1_500))
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(until).await;
    let before = started();
    assert!(system.functions.stop(), "the functions stop cleanly");
    eventually("the owner starts an offline run", LONG_WAIT, || async {
        started() > before
    })
    .await;
    system.functions.restart().await;
    eventually("the offline run is recorded", LONG_WAIT, || async {
        system
            .executions(rule)
            .await
            .iter()
            .any(|e| e.3 && e.1 == "completed")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let runs = system.runs_in_order(rule).await;
    assert_no_overlap("the rule", &runs);
}
