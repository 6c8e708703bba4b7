//! A database failover (docs/faults.md): a streaming replica made with `pg_basebackup -R`,
//! promoted with `pg_ctl promote` after the primary is stopped, while runners work. The
//! functions connect through an endpoint that follows the primary, as an RDS or Aurora
//! endpoint or Patroni's HAProxy does; it is re-pointed at the new primary.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use res_tests::forwarder::Forwarder;
use res_tests::postgres::{PgServer, start_with};
use res_tests::processes::{Runner, eventually, free_port};
use uuid::Uuid;

use crate::restarts::{
    counted_detector, counted_rules, lines, nothing_lost_or_doubled, total_runs,
};
use crate::system::{System, due_tomorrow, metrics_text};

const WAIT: Duration = Duration::from_secs(60);

/// How long the primary is gone before the replica is promoted.
const DETECTION: Duration = Duration::from_secs(5);

/// The longest outage (`outage_seconds`) any runner's log reports.
fn longest_outage(runners: &[Runner]) -> Option<u64> {
    runners
        .iter()
        .flat_map(|r| {
            r.log()
                .lines()
                .filter_map(|l| {
                    let (_, rest) = l.split_once("outage_seconds=")?;
                    rest.split_whitespace().next()?.parse::<u64>().ok()
                })
                .collect::<Vec<_>>()
        })
        .max()
}

/// A primary, its streaming replica, and the endpoint the functions use.
struct Cluster {
    primary: PgServer,
    replica: PgServer,
    /// What the functions connect to: the primary, then the promoted replica.
    endpoint: Forwarder,
    /// The replica's replication connection, frozen to hold back what the primary commits.
    replication: Forwarder,
}

impl Cluster {
    /// Starts both servers; with `synchronous`, a commit is acknowledged only once the
    /// replica has it (RDS Multi-AZ, Patroni's `synchronous_mode`), else asynchronously.
    async fn start(synchronous: bool) -> Cluster {
        let dir = std::env::temp_dir().join(format!("res-failover-{}", Uuid::new_v4()));
        let options = if synchronous {
            "-c synchronous_commit=on -c synchronous_standby_names='*'"
        } else {
            ""
        };
        let primary = blocking(dir.join("primary"), options, None).await;
        let replication = Forwarder::start(&socket(&primary)).await;
        let conninfo = format!(
            "host=127.0.0.1 port={} user=postgres application_name=replica",
            replication.port()
        );
        let replica = blocking(dir.join("replica"), "", Some(conninfo)).await;
        let endpoint = Forwarder::start(&socket(&primary)).await;
        Cluster {
            primary,
            replica,
            endpoint,
            replication,
        }
    }

    fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            self.endpoint.port()
        )
    }

    /// Waits until the replica has replayed everything the primary wrote.
    async fn caught_up(&self, system: &System) {
        // The test servers commit asynchronously: what is committed may not be written out
        // yet, and the replica is only sent what is. One synchronous commit writes
        // everything before it; the replica must then replay past where it ended. (Comparing
        // against the write position alone passed while the seeded rule sat unwritten.)
        let mut tx = system.pool.begin().await.expect("a transaction");
        sqlx::query("SET LOCAL synchronous_commit = on")
            .execute(&mut *tx)
            .await
            .expect("synchronous");
        sqlx::query("SELECT txid_current()")
            .execute(&mut *tx)
            .await
            .expect("an xid to commit");
        tx.commit().await.expect("committed");
        let target: String = sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
            .fetch_one(&system.pool)
            .await
            .expect("the insert position");
        eventually("the replica caught up", WAIT, || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT COALESCE(bool_and(replay_lsn >= $1::pg_lsn), false) \
                 FROM pg_stat_replication",
            )
            .bind(&target)
            .fetch_one(&system.pool)
            .await
            .unwrap_or(false)
        })
        .await;
    }

    /// Stops the primary at once (`-m immediate`, as a crashed host) and points the
    /// endpoint at the replica, still a standby (a DNS name or proxy that moved before the
    /// promotion).
    async fn lose_primary(&self) {
        pg_ctl(&self.primary, &["-m", "immediate", "-w", "stop"]).await;
        self.endpoint.point_at(&socket(&self.replica));
    }

    /// Promotes the replica.
    async fn promote(&self) {
        pg_ctl(&self.replica, &["-w", "-t", "60", "promote"]).await;
    }
}

/// `pg_ctl <args>` on `server`, off the async threads; it must succeed.
async fn pg_ctl(server: &PgServer, args: &'static [&'static str]) {
    let server = server.clone();
    tokio::task::spawn_blocking(move || server.pg_ctl(args))
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("{e}"));
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for server in [&self.primary, &self.replica] {
            let _ = server.pg_ctl(&["-m", "immediate", "-w", "stop"]);
        }
    }
}

fn socket(server: &PgServer) -> PathBuf {
    server.socket_path().expect("a throwaway server")
}

async fn blocking(dir: PathBuf, options: &'static str, replica_of: Option<String>) -> PgServer {
    tokio::task::spawn_blocking(move || start_with(&dir, options, replica_of.as_deref()))
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("cannot start a server of the cluster: {e}"))
}

/// Plan requests the functions hold waiting (their LISTEN connection is up).
async fn waiting(metrics_url: &str) -> u64 {
    metrics_text(metrics_url)
        .await
        .lines()
        .find(|l| l.starts_with("res_functions_plan_requests_waiting "))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map_or(0, |n| n as u64)
}

/// The functions' health answers 200 again.
async fn serving_again(functions: &str, since: Instant) -> Duration {
    let client = reqwest::Client::new();
    eventually("the functions reach the new primary", WAIT, || async {
        client
            .get(format!("{functions}/health"))
            .send()
            .await
            .is_ok_and(|a| a.status() == 200)
    })
    .await;
    since.elapsed()
}

/// Three runners on a branch with long plan waits, rules every 3 s; the primary dies and
/// the synchronous replica is promoted while detectors run. Nothing acknowledged is lost,
/// so nothing is run twice or lost; the functions serve again, their plan waits come back,
/// and the runners go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_synchronous_replica_promoted_while_three_runners_work_loses_and_doubles_nothing() {
    let cluster = Cluster::start(true).await;
    let metrics_port = free_port();
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let system = System::start_on_url(
        &cluster.url(),
        &["--metrics-bind", &format!("127.0.0.1:{metrics_port}")],
    )
    .await;
    let rules = counted_rules(&system, 4, "*/3 * * * * *", 1.0).await;
    let run_now = system.tomorrows_rule(0.1).await;
    // The tests' 3 s lease is shorter than the failover: a run that ends while the database
    // is away has its report in its runner's outbox when the functions answer again, and
    // the other runners leave its rule alone until it arrives (outage_hold).
    let settings = [("PLAN_WAIT_SECONDS", "240")];
    let mut runners: Vec<Runner> = (1..=3)
        .map(|n| system.runner(&format!("site-{n}"), &settings))
        .collect();
    eventually("the runners work", WAIT, || async {
        total_runs(&system, &rules).await >= 8 && waiting(&metrics_url).await >= 3
    })
    .await;
    cluster.caught_up(&system).await;

    let switch = Instant::now();
    cluster.lose_primary().await;
    // The standby answers the endpoint, but cannot write: the functions say so.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let health = reqwest::get(format!("{}/health", system.functions.url()))
        .await
        .expect("health answers");
    assert_eq!(health.status(), 503);
    let body = health.text().await.expect("a body");
    assert!(body.contains("read-only"), "{body}");
    tokio::time::sleep(DETECTION.saturating_sub(switch.elapsed())).await;
    cluster.promote().await;
    let away = switch.elapsed();
    let serving = serving_again(&system.functions.url(), switch).await;
    let before = total_runs(&system, &rules).await;
    eventually("runs go on on the new primary", WAIT, || async {
        total_runs(&system, &rules).await >= before + rules.len()
    })
    .await;
    let working = switch.elapsed();
    eventually(
        "plan requests wait again (LISTEN on the new primary)",
        WAIT,
        || async { waiting(&metrics_url).await >= 3 },
    )
    .await;
    let listening = switch.elapsed();
    let asked = Instant::now();
    system.run_now(run_now, "after the failover").await;
    let run_now_in = asked.elapsed();

    let ids: Vec<Uuid> = rules.iter().map(|(r, _)| *r).collect();
    for runner in &runners {
        system.pause_and_settle(&ids, runner, WAIT).await;
    }
    for runner in &mut runners {
        assert!(runner.stop(), "a runner exits 0");
    }
    nothing_lost_or_doubled(&system, &rules).await;
    assert_eq!(
        system.superseded().await,
        0,
        "no report arrived after a retry"
    );
    let forgotten: Vec<String> = runners
        .iter()
        .flat_map(|r| r.log().lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.contains("no record of this run's claim") || l.contains(" ERROR "))
        .collect();
    assert!(forgotten.is_empty(), "nothing was lost: {forgotten:?}");
    let outage = longest_outage(&runners).expect("the runners saw the database go");
    assert!(
        serving < away + Duration::from_secs(3)
            && working < away + Duration::from_secs(15)
            && outage <= away.as_secs() + 15,
        "stated bounds (docs/faults.md): serving after {serving:?}, runs after {working:?}, \
         a runner's outage {outage} s, for a database away {away:?}"
    );
    eprintln!(
        "failover: database away {away:?}; functions serving after {serving:?}; runs again \
         after {working:?}; plan waits again after {listening:?}; longest outage a runner \
         logged {outage} s; a Run now then took {run_now_in:?}"
    );
}

/// Asynchronous replication, held back: a Run now and its claim are committed on the
/// primary only, the primary dies mid-run and the replica is promoted without them. The
/// run goes on (its heartbeats find no claim), its violation and report are refused as
/// naming an unknown execution, and the runner records it as a run without a claim under
/// the same id: recorded once, with its violation, and not run again.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_lost_in_an_asynchronous_failover_is_recorded_once_as_an_offline_run() {
    let cluster = Cluster::start(false).await;
    let system = System::start_on_url(&cluster.url(), &[]).await;
    let starts = system.dir.join("starts");
    let rule = system
        .rule(due_tomorrow(), &counted_detector(&starts, 6.0))
        .await;
    let mut runner = system.runner("site-1", &[]);
    eventually("the runner has its plan", WAIT, || async {
        runner.reaches_functions().await
    })
    .await;
    cluster.caught_up(&system).await;

    cluster.replication.freeze(true);
    let answer = reqwest::Client::new()
        .post(format!("{}/rules_run_now", system.functions.url()))
        .bearer_auth(&system.operator)
        .json(&serde_json::json!({"branch_rule_id": rule, "reason": "before the failover"}))
        .send()
        .await
        .expect("run now answered");
    assert_eq!(answer.status(), 200);
    eventually("the detector started", WAIT, || async {
        lines(&starts) == 1
    })
    .await;
    let claimed = system.executions(rule).await;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let execution = claimed[0].0;

    cluster.lose_primary().await;
    cluster.promote().await;
    eventually("the run is recorded on the new primary", WAIT, || async {
        system.statuses(rule).await == ["completed"]
    })
    .await;
    // Long enough for a second run, had the rule been left due.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let recorded = system.executions(rule).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let (id, status, _, offline, runner_id) = &recorded[0];
    assert_eq!(
        (*id, status.as_str(), *offline, runner_id.as_str()),
        (execution, "completed", true, "site-1"),
        "the claimed run, under its own id, recorded as a run without a claim"
    );
    assert_eq!(system.violations(rule).await, 1, "its violation, once");
    assert_eq!(lines(&starts), 1, "the detector ran once");
    let (next_run, _, _, running) = system.rule_row(rule).await;
    assert!(!running);
    assert!(
        next_run.is_some_and(|t| t > chrono::Utc::now() + chrono::TimeDelta::hours(1)),
        "the rule waits for tomorrow: {next_run:?}"
    );
    let log = runner.log();
    assert!(log.contains("no record of this run's claim"), "{log}");
    let (_, metrics) = runner.get("/metrics").await.expect("metrics");
    assert!(
        metrics.contains("res_runner_claims_forgotten_total 1"),
        "{metrics}"
    );
    assert!(runner.stop());
}
