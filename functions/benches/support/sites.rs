//! Simulated sites over real HTTP: each with its own runner key, a full plan at start, a
//! delta every poll interval, and claim → run (beating while it runs past a third of the
//! lease) → report for every due rule through a few workers, as `res-runner` does. Every call's latency and status is kept.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use res_shared::wire::{
    Call, ClaimBatchRequest, ClaimRequest, HeartbeatBatchRequest, HeartbeatRequest, PlanRequest,
    RegisterRequest, SetNextRunTimeBatchRequest, SetNextRunTimeRequest,
};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use uuid::Uuid;

/// One site: its token and runner id.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Site {
    pub token: String,
    pub runner_id: String,
}

impl Site {
    /// A runner key for each branch (one site each), stored in one statement.
    pub async fn for_branches(pool: &sqlx::PgPool, branches: &[Uuid]) -> Vec<Site> {
        let tokens: Vec<String> = branches
            .iter()
            .map(|_| res_functions::auth::generate_token())
            .collect();
        let hashes: Vec<String> = tokens
            .iter()
            .map(|t| res_functions::auth::hash_token(t))
            .collect();
        sqlx::query(
            "INSERT INTO api_keys (name, key_hash, role, branch_ids) \
             SELECT 'site ' || k.branch, k.hash, 'runner', ARRAY[k.branch] \
             FROM UNNEST($1::text[], $2::uuid[]) AS k(hash, branch)",
        )
        .bind(&hashes)
        .bind(branches)
        .execute(pool)
        .await
        .expect("keys");
        tokens
            .into_iter()
            .enumerate()
            .map(|(n, token)| Site {
                token,
                runner_id: format!("site-{n}"),
            })
            .collect()
    }
}

/// How the sites behave.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Behaviour {
    /// Rules a site runs at the same time.
    pub workers: usize,
    /// Between plan fetches.
    pub poll: Duration,
    /// How long a detection takes (the same for all; sites differ by their rules).
    pub run_time: Duration,
    /// A run's first heartbeat goes this long after its claim and the next ones as often,
    /// as res-runner's (a third of the lease): a shorter run sends none.
    pub beat_every: Duration,
    /// Stop a site once each of its rules has run once (the storm).
    pub once: bool,
    /// Sites start at random moments within this (a fleet does not boot in one second).
    pub start_within: Duration,
    /// Claim, beat and report the rules due together in one request each (the batch
    /// functions) and a rule due alone in single calls, as `res-runner` does; false: one
    /// request per rule, as older runners did.
    pub batch: bool,
    /// Plan requests wait this many seconds for a change, as `res-runner`'s do (each site
    /// always has one open); 0: a delta every `poll` instead.
    pub wait: u32,
    /// Each site starts its due runs at its moment within this after the due second, as
    /// `res-runner` does (`start_spread_ms`); zero: every site at the second itself.
    pub start_spread: Duration,
}

/// The label a waiting plan request is recorded under: its time is mostly the wait, so it
/// is reported apart and left out of the worst p99.
const WAITING_PLAN: &str = "get-execution-plan-v2 (waiting)";

/// The label of a run's start: not a request, but the time from its due second to its
/// granted claim's answer (the site's start moment, then the claim's latency).
pub const START: &str = "start (due → claim answered)";

/// One call.
#[derive(Debug, Clone, Copy)]
pub struct CallRecord {
    pub function: &'static str,
    /// When it started, from the fleet's start.
    pub at: Duration,
    pub took: Duration,
    /// 0: no answer at all.
    pub status: u16,
}

/// The simulated fleet's shared parts: one HTTP client (the sites' connections through
/// one pool), a bound on requests in flight (a load balancer's connection limit), and
/// what happened.
pub struct Fleet {
    client: reqwest::Client,
    /// For waiting plan requests: no bound on them (each site holds one) and a timeout
    /// past the longest wait.
    waiting_client: reqwest::Client,
    base: String,
    in_flight: Semaphore,
    started: Instant,
    calls: Mutex<Vec<CallRecord>>,
    /// Granted claims: the rule, when it was due and when the claim was answered.
    claims: Mutex<Vec<(Uuid, DateTime<Utc>, SystemTime)>>,
}

impl Fleet {
    pub fn new(base: &str, max_in_flight: usize) -> Arc<Fleet> {
        Fleet::starting_at(base, max_in_flight, Instant::now(), None)
    }

    /// A fleet whose calls' times count from `started` (shared by generator processes),
    /// connecting from `source` when given: one source address has only the ephemeral
    /// ports (28,232 here) for all its connections to one port.
    pub fn starting_at(
        base: &str,
        max_in_flight: usize,
        started: Instant,
        source: Option<std::net::IpAddr>,
    ) -> Arc<Fleet> {
        let client = res_client::with_keepalive(reqwest::Client::builder())
            .local_address(source)
            .no_gzip()
            .pool_max_idle_per_host(max_in_flight)
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        // Not pooled: with thousands of connections open at once, one shared pool cost the
        // generator most of a core. A site opens a connection per wait (one per minutes).
        let waiting_client = res_client::with_keepalive(reqwest::Client::builder())
            .local_address(source)
            .no_gzip()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(360))
            .build()
            .expect("client");
        Arc::new(Fleet {
            client,
            waiting_client,
            base: base.to_owned(),
            in_flight: Semaphore::new(max_in_flight),
            started,
            calls: Mutex::new(Vec::new()),
            claims: Mutex::new(Vec::new()),
        })
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.calls.lock().expect("calls").clone()
    }

    /// Every granted claim so far.
    pub fn claims(&self) -> Vec<(Uuid, DateTime<Utc>, SystemTime)> {
        self.claims.lock().expect("claims").clone()
    }

    /// A granted claim: kept, and its start recorded as a [`START`] call.
    fn started_run(&self, rule: Uuid, due: DateTime<Utc>) {
        let now = SystemTime::now();
        self.claims.lock().expect("claims").push((rule, due, now));
        let late = now
            .duration_since(SystemTime::from(due))
            .unwrap_or(Duration::ZERO);
        self.calls.lock().expect("calls").push(CallRecord {
            function: START,
            at: self.started.elapsed().saturating_sub(late),
            took: late,
            status: 200,
        });
    }

    async fn post(&self, function: &'static str, token: &str, body: Value) -> (u16, Value) {
        // Timed from before the wait for a connection: a queue in front of the service
        // is part of what a site experiences.
        let started = Instant::now();
        let waiting = function == WAITING_PLAN;
        let _slot = match waiting {
            true => None,
            false => Some(self.in_flight.acquire().await.expect("open")),
        };
        let (client, name) = match waiting {
            true => (&self.waiting_client, PlanRequest::NAME),
            false => (&self.client, function),
        };
        let sent = client
            .post(format!("{}/{name}", self.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await;
        let (status, body) = match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(error) => {
                // The first few failures say why (a refused or reset connection, a timeout).
                static TOLD: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                if TOLD.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 5 {
                    eprintln!("{function}: no answer: {error:?}");
                }
                (0, Value::Null)
            }
        };
        self.calls.lock().expect("calls").push(CallRecord {
            function,
            at: started - self.started,
            took: started.elapsed(),
            status,
        });
        (status, body)
    }

    /// The site's plan (full without a cursor): its cursor and each rule's due time.
    async fn plan(
        &self,
        site: &Site,
        since: Option<&str>,
        wait: u32,
    ) -> Option<(String, Vec<(Uuid, Option<DateTime<Utc>>)>)> {
        let (status, body) = self
            .post(
                if wait > 0 {
                    WAITING_PLAN
                } else {
                    PlanRequest::NAME
                },
                &site.token,
                // The account res-runner gives with every fetch (its offline ownership too).
                json!({"runner_id": site.runner_id, "since": since, "wait_seconds": wait,
                       "health": {"version": "bench", "outbox_depth": 0, "runs_offline": true}}),
            )
            .await;
        if status != 200 {
            return None;
        }
        let rules = body["workflows"]
            .as_array()?
            .iter()
            .filter_map(|w| {
                let id = w["id"].as_str()?.parse().ok()?;
                let next = w["next_run_time"].as_str().and_then(|t| t.parse().ok());
                Some((id, next))
            })
            .collect();
        Some((body["cursor"].as_str()?.to_owned(), rules))
    }

    /// Claim → heartbeat → run → report; the next run the report answered.
    async fn run_rule(
        &self,
        site: &Site,
        rule: Uuid,
        due: DateTime<Utc>,
        timing: (Duration, Duration),
    ) -> Option<DateTime<Utc>> {
        let (status, claim) = self
            .post(
                ClaimRequest::NAME,
                &site.token,
                json!({"branch_rule_id": rule, "runner_id": site.runner_id}),
            )
            .await;
        if status != 200 {
            return None;
        }
        self.started_run(rule, due);
        let (execution, token) = (claim["execution_id"].clone(), claim["claim_token"].clone());
        let beat = json!({"execution_id": execution, "claim_token": token});
        if !self
            .run_beating(HeartbeatRequest::NAME, &site.token, beat, timing)
            .await
        {
            return None;
        }
        let (status, report) = self
            .post(
                SetNextRunTimeRequest::NAME,
                &site.token,
                json!({"branch_rule_id": rule, "is_last_run_failed": false,
                       "execution_id": execution, "claim_token": token}),
            )
            .await;
        (status == 200)
            .then(|| report["next_run_time"].as_str()?.parse().ok())
            .flatten()
    }
}

impl Fleet {
    /// Runs for `run_time`, beating with `beat` every `beat_every` meanwhile (none for a
    /// shorter run); false when a beat is refused.
    async fn run_beating(
        &self,
        function: &'static str,
        token: &str,
        beat: Value,
        (run_time, beat_every): (Duration, Duration),
    ) -> bool {
        let ends = Instant::now() + run_time;
        let mut next_beat = Instant::now() + beat_every;
        while next_beat < ends {
            tokio::time::sleep_until(next_beat.into()).await;
            if self.post(function, token, beat.clone()).await.0 != 200 {
                return false;
            }
            next_beat += beat_every;
        }
        tokio::time::sleep_until(ends.into()).await;
        true
    }

    /// The batch form of [`Fleet::run_rule`] for rules due together: one claim request,
    /// one heartbeat request, one report request. Each rule's next run (none: refused).
    async fn run_rules(
        &self,
        site: &Site,
        rules: &[(Uuid, DateTime<Utc>)],
        timing: (Duration, Duration),
    ) -> Vec<(Uuid, Option<DateTime<Utc>>)> {
        let mut next: Vec<(Uuid, Option<DateTime<Utc>>)> =
            rules.iter().map(|(rule, _)| (*rule, None)).collect();
        let ids: Vec<Uuid> = rules.iter().map(|(rule, _)| *rule).collect();
        let (status, claims) = self
            .post(
                ClaimBatchRequest::NAME,
                &site.token,
                json!({"branch_rule_ids": ids, "runner_id": site.runner_id}),
            )
            .await;
        let items = |body: &Value| body["items"].as_array().cloned().unwrap_or_default();
        if status != 200 {
            return next;
        }
        let mut claimed = Vec::new();
        for ((rule, due), item) in rules.iter().zip(items(&claims)) {
            if item["status"] == 200 {
                self.started_run(*rule, *due);
                claimed.push((
                    *rule,
                    item["body"]["execution_id"].clone(),
                    item["body"]["claim_token"].clone(),
                ));
            }
        }
        if claimed.is_empty() {
            return next;
        }
        let beats: Vec<Value> = claimed
            .iter()
            .map(|(_, execution, token)| json!({"execution_id": execution, "claim_token": token}))
            .collect();
        if !self
            .run_beating(
                HeartbeatBatchRequest::NAME,
                &site.token,
                json!({"beats": beats}),
                timing,
            )
            .await
        {
            return next;
        }
        let reports: Vec<Value> = claimed
            .iter()
            .map(|(rule, execution, token)| {
                json!({"branch_rule_id": rule, "is_last_run_failed": false,
                       "execution_id": execution, "claim_token": token})
            })
            .collect();
        let (status, answers) = self
            .post(
                SetNextRunTimeBatchRequest::NAME,
                &site.token,
                json!({"reports": reports}),
            )
            .await;
        if status != 200 {
            return next;
        }
        for ((rule, _, _), item) in claimed.iter().zip(items(&answers)) {
            let at = item["body"]["next_run_time"]
                .as_str()
                .and_then(|t| t.parse().ok());
            if let Some(entry) = next.iter_mut().find(|(r, _)| r == rule) {
                entry.1 = at.filter(|_| item["status"] == 200);
            }
        }
        next
    }
}

/// Runs one site until `until` (or, with `once`, until each rule ran once).
pub async fn run_site(fleet: Arc<Fleet>, site: Site, behaviour: Behaviour, until: Instant) {
    tokio::time::sleep(behaviour.start_within.mul_f64(rand::random::<f64>())).await;
    let _ = fleet
        .post(
            RegisterRequest::NAME,
            &site.token,
            json!({"runner_id": site.runner_id, "boot_id": Uuid::new_v4().to_string()}),
        )
        .await;
    let Some((mut cursor, rules)) = fleet.plan(&site, None, 0).await else {
        return;
    };
    // Waiting: one request always open, its answers (the changed rules) handed over here.
    let (changes_tx, mut changes) = mpsc::unbounded_channel::<Vec<(Uuid, Option<DateTime<Utc>>)>>();
    if behaviour.wait > 0 {
        let (fleet, site, mut cursor) = (fleet.clone(), site.clone(), cursor.clone());
        tokio::spawn(async move {
            // A fleet's waits end spread over the wait, as its sites started at different times.
            let mut wait = rand::random_range(1..=behaviour.wait);
            while Instant::now() < until {
                match fleet.plan(&site, Some(&cursor), wait).await {
                    Some((next, changed)) => {
                        cursor = next;
                        if changes_tx.send(changed).is_err() {
                            return;
                        }
                    }
                    None => tokio::time::sleep(Duration::from_secs(1)).await,
                }
                wait = behaviour.wait;
            }
        });
    }
    let mut due: HashMap<Uuid, DateTime<Utc>> = rules
        .into_iter()
        .map(|(id, next)| (id, next.unwrap_or_else(Utc::now)))
        .collect();
    let mut ran: HashSet<Uuid> = HashSet::new();
    let mut running: HashSet<Uuid> = HashSet::new();
    let workers = Arc::new(Semaphore::new(behaviour.workers));
    let (done_tx, mut done) = mpsc::unbounded_channel::<(Uuid, Option<DateTime<Utc>>)>();
    // Sites start at different moments in a real fleet; their polls are spread the same way.
    let mut next_poll = Instant::now() + behaviour.poll.mul_f64(rand::random::<f64>());
    // The site's moment in the second: it sees a rule due that much after its due second,
    // as res-runner's scheduler does.
    let offset = res_shared::schedule::start_offset(&site.runner_id, behaviour.start_spread);
    loop {
        let now = Utc::now() - offset;
        if behaviour.batch {
            let starting: Vec<(Uuid, DateTime<Utc>)> = due
                .iter()
                .filter(|(rule, at)| **at <= now && running.insert(**rule))
                .map(|(rule, at)| (*rule, *at))
                .collect();
            // Claim only what the workers can start: a claimed rule waiting for a worker
            // would hold its lease without running.
            for chunk in starting.chunks(behaviour.workers.max(1)) {
                let (fleet, site, workers, done_tx) = (
                    fleet.clone(),
                    site.clone(),
                    workers.clone(),
                    done_tx.clone(),
                );
                let chunk = chunk.to_vec();
                tokio::spawn(async move {
                    let _workers = workers
                        .acquire_many(u32::try_from(chunk.len()).unwrap_or(u32::MAX))
                        .await
                        .expect("open");
                    // A rule due alone goes as the single calls, as res-runner sends it
                    // (a batch of one costs the database more than the single call).
                    let dones = match chunk[..] {
                        [(rule, at)] => vec![(
                            rule,
                            fleet
                                .run_rule(
                                    &site,
                                    rule,
                                    at,
                                    (behaviour.run_time, behaviour.beat_every),
                                )
                                .await,
                        )],
                        _ => {
                            fleet
                                .run_rules(
                                    &site,
                                    &chunk,
                                    (behaviour.run_time, behaviour.beat_every),
                                )
                                .await
                        }
                    };
                    for done in dones {
                        let _ = done_tx.send(done);
                    }
                });
            }
        }
        for (&rule, &at) in due.iter().filter(|_| !behaviour.batch) {
            if at <= now && running.insert(rule) {
                let (fleet, site, workers, done_tx) = (
                    fleet.clone(),
                    site.clone(),
                    workers.clone(),
                    done_tx.clone(),
                );
                tokio::spawn(async move {
                    let _worker = workers.acquire().await.expect("open");
                    let next = fleet
                        .run_rule(&site, rule, at, (behaviour.run_time, behaviour.beat_every))
                        .await;
                    let _ = done_tx.send((rule, next));
                });
            }
        }
        if behaviour.once && ran.len() == due.len() {
            return;
        }
        let next_due = due
            .iter()
            .filter(|(rule, _)| !running.contains(rule))
            .map(|(_, at)| *at)
            .min()
            .and_then(|at| (at - (Utc::now() - offset)).to_std().ok())
            .unwrap_or(Duration::ZERO);
        // A waiting site's plan answers come through `changes`: no poll to wake for.
        let poll = if behaviour.wait > 0 { until } else { next_poll };
        let wake = (Instant::now() + next_due).min(poll).min(until);
        tokio::select! {
            Some((rule, next)) = done.recv() => {
                running.remove(&rule);
                // Refused or failed: look again in five seconds, as the runner's tick would.
                let next = match next {
                    Some(next) => {
                        ran.insert(rule);
                        next
                    }
                    None => Utc::now() + Duration::from_secs(5),
                };
                due.insert(rule, next);
            }
            Some(changed) = changes.recv() => {
                for (rule, next) in changed {
                    if let (false, Some(next)) = (running.contains(&rule), next) {
                        due.insert(rule, next);
                    }
                }
            }
            () = tokio::time::sleep_until(wake.into()) => {}
        }
        if Instant::now() >= until {
            return;
        }
        if behaviour.wait == 0 && Instant::now() >= next_poll {
            next_poll += behaviour.poll;
            if let Some((new_cursor, changed)) = fleet.plan(&site, Some(&cursor), 0).await {
                cursor = new_cursor;
                for (rule, next) in changed {
                    if let (false, Some(next)) = (running.contains(&rule), next) {
                        due.insert(rule, next);
                    }
                }
            }
        }
    }
}

/// Latency percentiles, errors and rate per function; the worst p99 among them.
pub fn report_calls(calls: &[CallRecord], seconds: f64) -> Duration {
    let mut worst = Duration::ZERO;
    let mut functions: Vec<&str> = calls.iter().map(|c| c.function).collect();
    functions.sort_unstable();
    functions.dedup();
    println!(
        "{:<32} {:>8} {:>8} {:>9} {:>9} {:>9} {:>8}",
        "function", "calls", "per s", "p50", "p90", "p99", "errors"
    );
    for function in functions {
        let mine: Vec<&CallRecord> = calls.iter().filter(|c| c.function == function).collect();
        let mut took: Vec<Duration> = mine.iter().map(|c| c.took).collect();
        took.sort();
        let at = |p: f64| took[((took.len() - 1) as f64 * p).round() as usize];
        let errors = mine
            .iter()
            .filter(|c| c.status == 0 || c.status >= 500)
            .count();
        println!(
            "{:<32} {:>8} {:>8.1} {:>9.2?} {:>9.2?} {:>9.2?} {:>8}",
            function,
            mine.len(),
            mine.len() as f64 / seconds,
            at(0.5),
            at(0.9),
            at(0.99),
            errors
        );
        if function != WAITING_PLAN {
            worst = worst.max(at(0.99));
        }
    }
    worst
}

/// Requests and the p99 latency per `window` of the run, to show stalls and drift.
pub fn report_timeline(calls: &[CallRecord], window: Duration) {
    let mut windows = std::collections::BTreeMap::<u64, Vec<Duration>>::new();
    for call in calls.iter().filter(|c| c.function != WAITING_PLAN) {
        windows
            .entry(call.at.as_secs() / window.as_secs().max(1))
            .or_default()
            .push(call.took);
    }
    let line: Vec<String> = windows
        .into_iter()
        .map(|(n, mut took)| {
            took.sort();
            let p99 = took[((took.len() - 1) as f64 * 0.99).round() as usize];
            format!("{}s:{}/{:.0?}", n * window.as_secs(), took.len(), p99)
        })
        .collect();
    println!(
        "requests/p99 per {} s: {}",
        window.as_secs(),
        line.join(" ")
    );
}

/// CPU seconds used so far by the generator (this process and the `generators`), by
/// `res-functions` (the `functions` processes) and by every PostgreSQL process (live ones
/// plus the exited ones the postmaster reaped).
pub fn cpu_split(generators: &[u32], functions: &[u32]) -> (f64, f64, f64) {
    let ticks = |fields: &[&str], from: usize, count: usize| -> f64 {
        fields[from..from + count]
            .iter()
            .filter_map(|f| f.parse::<f64>().ok())
            .sum::<f64>()
            / 100.0
    };
    let stat = |path: &std::path::Path| -> Option<(String, Vec<String>)> {
        let text = std::fs::read_to_string(path).ok()?;
        let (head, rest) = text.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_owned();
        Some((comm, rest.split_whitespace().map(str::to_owned).collect()))
    };
    // After the comm: field 3 is index 0, so utime (14) and stime (15) are 11 and 12,
    // cutime and cstime (16, 17) are 13 and 14, and ppid (4) is 1.
    let own_time = |path: std::path::PathBuf| {
        stat(&path)
            .map(|(_, f)| ticks(&f.iter().map(String::as_str).collect::<Vec<_>>(), 11, 2))
            .unwrap_or(0.0)
    };
    let of = |pid: &u32| own_time(std::path::PathBuf::from(format!("/proc/{pid}/stat")));
    let own = own_time("/proc/self/stat".into()) + generators.iter().map(of).sum::<f64>();
    let functions = functions.iter().map(of).sum::<f64>();
    let mut postgres = 0.0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some((comm, fields)) = stat(&entry.path().join("stat")) else {
            continue;
        };
        if comm != "postgres" {
            continue;
        }
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        postgres += ticks(&fields, 11, 2);
        // The postmaster (whose parent is not postgres) also carries its reaped children.
        let parent_is_postgres = fields
            .get(1)
            .and_then(|ppid| stat(&std::path::PathBuf::from(format!("/proc/{ppid}/stat"))))
            .is_some_and(|(comm, _)| comm == "postgres");
        if !parent_is_postgres {
            postgres += ticks(&fields, 13, 2);
        }
    }
    (own, functions, postgres)
}
