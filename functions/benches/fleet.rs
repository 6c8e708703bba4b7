//! The fleet load generator: N simulated sites against one `res-functions serve` and one
//! PostgreSQL on this machine. Each site has its own runner key and 20 rules (every 15
//! minutes to daily, half of them in a 14-hour window that measuring falls 4 hours into, a
//! share at the top of the hour; 15 minutes of jitter on every brand rule), registers,
//! fetches its full plan at start, a delta every 20 s, and claims → runs (5 s, less than
//! the 20 s before a first heartbeat, so none) → reports every due rule through 4 workers. The sites start within a minute; after two
//! minutes of warm-up it measures for the given time: per-function latency percentiles,
//! errors, requests per second, p99 per 10 s, and the CPU split between PostgreSQL, the
//! functions and the generator itself.
//!
//! `cargo bench -p res-functions --bench fleet -- --sites 20000 --minutes 10 [--wait 240]
//! [--serves S] [--generators G] [--warm-up S]` (defaults: 2,000 sites, 2 minutes, 120 s of
//! warm-up, plan polled every 20 s;
//! `--wait S`: each site keeps a plan request open waiting S seconds, as res-runner does).
//! A process may hold 20,000 open files here, so the sites run in G generator processes (one
//! per 10,000 sites unless told) against S `serve` processes sharing one port (one per
//! 15,000), each generator connecting from its own loopback address. Results go to
//! docs/benchmarks.md and docs/scaling.md.

mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveTime, Timelike, Utc};
use res_functions::db;
use res_shared::schedule::{Schedule, jitter_offset};
use res_tests::postgres::server;
use sqlx::PgPool;
use uuid::Uuid;

use support::generators::{self, Assignment, Generator};
use support::sites::{Behaviour, Site, cpu_split, report_calls, report_timeline};

/// The window of every other branch rule when measuring starts at noon in Riyadh (14
/// hours; other starts shift it, see `window_around`).
const WINDOW: (u32, u32) = (8, 22);

/// The window shifted by whole hours so that measuring starts as far into it as at noon in
/// Riyadh (10:00 in Berlin): the figures then do not depend on the hour the bench runs at.
fn window_around(measuring_from: DateTime<Utc>) -> (NaiveTime, NaiveTime) {
    let hour = measuring_from
        .with_timezone(&chrono_tz::Asia::Riyadh)
        .hour();
    let at = |h: u32| NaiveTime::from_hms_opt((h + hour + 12) % 24, 0, 0).expect("an hour");
    (at(WINDOW.0), at(WINDOW.1))
}

/// Sites per brand.
const BRAND_SIZE: usize = 100;
/// The rule definitions every site has: cron expressions from every 15 minutes to daily.
const CRONS: [&str; 20] = [
    "*/15 * * * *",
    "*/15 * * * *",
    "*/15 * * * *",
    "*/15 * * * *",
    "*/30 * * * *",
    "*/30 * * * *",
    "*/30 * * * *",
    "*/30 * * * *",
    "0 * * * *",
    "0 * * * *",
    "0 * * * *",
    "0 * * * *",
    "7 * * * *",
    "23 * * * *",
    "41 * * * *",
    "52 * * * *",
    "0 */2 * * *",
    "30 */2 * * *",
    "0 9 * * *",
    "30 13 * * *",
];
const JITTER_SECONDS: u32 = 900;
/// The warm-up unless `--warm-up S` says otherwise: long enough at 12,000 sites; 30,000
/// sites' first full plans take longer.
const WARM_UP_SECONDS: u64 = 120;
/// res-runner's `start_spread_ms` default.
const START_SPREAD_MS: u64 = 1_000;
/// The warm-up's tables are analyzed this long before measuring starts.
const ANALYZE_BEFORE_MEASURING: Duration = Duration::from_secs(20);
/// Seeding takes about this long a site (30 s at 20,000 sites, 49 s at 30,000).
const SEEDING_A_SITE: Duration = Duration::from_micros(1_700);

/// `cron` with its minutes moved on by `shift`: the rules' "top of the hour" then falls when
/// the measurement starts, whatever the time of day — every run measures the same phase,
/// the busiest (the hourly rules and the quarter-hourly ones at once, spread by jitter).
fn shifted(cron: &str, shift: u32) -> String {
    let (minute, rest) = cron.split_once(' ').expect("a cron with fields");
    let minutes: Vec<u32> = match minute.strip_prefix("*/") {
        Some(step) => {
            let step: u32 = step.parse().expect("a step");
            (0..60).step_by(step as usize).collect()
        }
        None => vec![minute.parse().expect("a minute")],
    };
    let mut moved: Vec<u32> = minutes.iter().map(|m| (m + shift) % 60).collect();
    moved.sort_unstable();
    let list: Vec<String> = moved.iter().map(u32::to_string).collect();
    format!("{} {rest}", list.join(","))
}

fn main() {
    support::main_when_benchmarking(run);
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, not {v}"))
        })
        .unwrap_or(default)
}

async fn run() {
    res_tests::functions::install_tls();
    if let Some(assignment) = generators::assignment_path() {
        return generators::run(&assignment).await;
    }
    let sites = arg("--sites", 2_000) as usize;
    let minutes = arg("--minutes", 2);
    let in_flight = arg("--in-flight", 1_024) as usize;
    // `--batch 0`: one request per rule, as older runners; batches by default, as res-runner.
    let batch = arg("--batch", 1) != 0;
    // `--wait S`: plan requests wait S seconds for a change, as res-runner's do; 0 (the
    // default) polls a delta every 20 s, the server's worst case.
    let wait = u32::try_from(arg("--wait", 0)).expect("--wait takes seconds");
    let warm_up = Duration::from_secs(arg("--warm-up", WARM_UP_SECONDS));
    // `--start-spread-ms M`: each site starts its due runs at its moment within M ms of the
    // due second, as res-runner does (its default); 0: all at the second itself.
    let start_spread = Duration::from_millis(arg("--start-spread-ms", START_SPREAD_MS));
    println!(
        "== {sites} sites × {} rules, {minutes} min measured after {} s warm-up, plan {} ==",
        CRONS.len(),
        warm_up.as_secs(),
        if wait == 0 {
            "polled every 20 s".to_owned()
        } else {
            format!("requests waiting {wait} s")
        }
    );
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    let seeding = Instant::now();
    let site_count = sites;
    let sites = seed(&pool, sites, warm_up).await;
    println!("seeded in {:.1?}", seeding.elapsed());
    // Each process may hold 20,000 open files here and each waiting site holds a
    // connection at both ends: the sites are split across generator processes, and across
    // `serve` processes sharing one port.
    let serves = arg("--serves", site_count.div_ceil(15_000) as u64).max(1) as usize;
    let generators = arg("--generators", site_count.div_ceil(10_000) as u64).max(1) as usize;
    println!("{serves} serve process(es) on one port, {generators} generator process(es)");
    let port = res_tests::processes::free_port();
    let base = format!("http://127.0.0.1:{port}/functions/v1");
    let mut services = Vec::new();
    let mut metrics_urls = Vec::new();
    for _ in 0..serves {
        let metrics_bind = format!("127.0.0.1:{}", res_tests::processes::free_port());
        let mut args = vec![
            "--plan-wait-max-seconds",
            "300",
            "--metrics-bind",
            &metrics_bind,
        ];
        if serves > 1 {
            args.push("--reuse-port");
        }
        services.push(support::serve_at(port, &database.url, &args));
        metrics_urls.push(format!("http://{metrics_bind}/metrics"));
        // One at a time: a second process bound to the port before the first is up would
        // take the health check's connections instead.
        support::wait_until_up(&reqwest::Client::new(), &base).await;
    }

    let behaviour = Behaviour {
        workers: 4,
        poll: Duration::from_secs(20),
        run_time: Duration::from_secs(5),
        beat_every: Duration::from_secs(20),
        once: false,
        start_within: Duration::from_secs(60),
        batch,
        wait,
        start_spread,
    };
    let measured = Duration::from_secs(minutes * 60);
    // The generators stop a little after the measured window, so they are all still
    // running when their CPU time is read at its end.
    let run_for = warm_up + measured + Duration::from_secs(5);
    let scratch = tempfile_dir();
    let start_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as u64;
    let started = Instant::now();
    let share = site_count.div_ceil(generators);
    let assignments: Vec<Assignment> = sites
        .chunks(share.max(1))
        .enumerate()
        .map(|(n, sites)| Assignment {
            base: base.clone(),
            in_flight: in_flight.div_ceil(generators),
            behaviour,
            start_unix_ms,
            run_for,
            sites: sites.to_vec(),
            source: (generators > 1)
                .then(|| std::net::Ipv4Addr::new(127, 0, 1, 1 + n as u8).into()),
            calls: scratch.join(format!("generator-{n}.calls")),
        })
        .collect();
    // `--backlog 0` keeps the machine's own (see `RaisedBacklog`).
    let _backlog = support::kernel::RaisedBacklog::to(arg("--backlog", 16_384) as u32);
    let kernel_before = support::kernel::read();
    let running = generators::spawn(&assignments);
    let pids = || -> (Vec<u32>, Vec<u32>) {
        (
            running.iter().map(Generator::pid).collect(),
            services.iter().map(support::Service::pid).collect(),
        )
    };
    // A fleet's tables are analyzed as they are. The seeding leaves `executions`,
    // `plan_changes` and `runners` empty, and each connection's cached generic plans made
    // against them scanned them whole — the wait's first look at a branch read all of
    // `executions` once per rule (up to 0.5 ms a probe, 20 a look, by the end of the
    // warm-up at 3,000 sites) — until autovacuum came round, which it had not within the
    // run. Analyzing invalidates those plans before measuring.
    tokio::time::sleep_until((started + warm_up - ANALYZE_BEFORE_MEASURING).into()).await;
    sqlx::query("ANALYZE executions, plan_changes, runners, branch_offline_owners")
        .execute(&pool)
        .await
        .expect("analyze what the warm-up wrote");
    tokio::time::sleep_until((started + warm_up).into()).await;
    let cpu_before = cpu_split(&pids().0, &pids().1);
    let size_before = database_size(&pool).await;
    support::statements::reset(&pool).await;
    let inside_before = support::server_metrics::scrape_all(&metrics_urls).await;
    let sampling = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn(support::statements::sample_activity(
        pool.clone(),
        sampling.clone(),
    ));
    tokio::time::sleep_until((started + warm_up + measured).into()).await;
    let cpu_after = cpu_split(&pids().0, &pids().1);
    let inside_after = support::server_metrics::scrape_all(&metrics_urls).await;
    sampling.cancel();
    // The calls answered within the measured window, as one process recorded them before.
    let window = warm_up..warm_up + measured;
    let (starts, calls): (Vec<_>, Vec<_>) = running
        .into_iter()
        .flat_map(Generator::finish)
        .filter(|c| window.contains(&(c.at + c.took)))
        .partition(|c| c.function == support::sites::START);
    let _ = std::fs::remove_dir_all(&scratch);
    let kernel_after = support::kernel::read();

    let seconds = measured.as_secs_f64();
    let worst_p99 = report_calls(&calls, seconds);
    report_timeline(&calls, Duration::from_secs(10));
    report_starts(&starts, start_spread);
    support::server_metrics::report(&inside_before, &inside_after);
    support::kernel::report(kernel_before, kernel_after);
    let errors = calls
        .iter()
        .filter(|c| c.status == 0 || c.status >= 500)
        .count();
    let (own, functions, postgres) = (
        cpu_after.0 - cpu_before.0,
        cpu_after.1 - cpu_before.1,
        cpu_after.2 - cpu_before.2,
    );
    println!(
        "{} requests in {seconds:.0} s = {:.0}/s; {errors} errors; worst p99 {worst_p99:.1?}",
        calls.len(),
        calls.len() as f64 / seconds
    );
    println!(
        "CPU (cores busy): PostgreSQL {:.2}, res-functions {:.2}, generator {:.2} of 2",
        postgres / seconds,
        functions / seconds,
        own / seconds
    );
    let per_site_hour = 3_600.0 / site_count as f64 / seconds;
    println!(
        "per site per hour: {:.0} requests, {:.0} CPU-ms (PostgreSQL + functions)",
        calls.len() as f64 * per_site_hour,
        (postgres + functions) * 1_000.0 * per_site_hour
    );
    let _ = sampler.await;
    support::statements::report(&pool, 15).await;
    let size = database_size(&pool).await;
    let executions: i64 = sqlx::query_scalar("SELECT count(*) FROM executions")
        .fetch_one(&pool)
        .await
        .expect("count");
    println!(
        "database: {} MB after the run, {} MB of it written while measuring; {executions} executions in all",
        size / 1_000_000,
        (size - size_before) / 1_000_000
    );
    drop(services);
}

/// How long after their due second the runs started (their claims answered).
fn report_starts(starts: &[support::sites::CallRecord], spread: Duration) {
    let mut late: Vec<Duration> = starts.iter().map(|c| c.took).collect();
    if late.is_empty() {
        println!("no run started while measuring");
        return;
    }
    support::report(
        &format!("runs started after their due second (spread {spread:?})"),
        &mut late,
    );
}

/// A fresh directory for the generators' files.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("res-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

async fn database_size(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(pool)
        .await
        .expect("size")
}

/// Brands of `BRAND_SIZE` branches (alternately Riyadh and Berlin), a runner key per
/// branch, the 20 rules on every branch through brand rules with 15 minutes of jitter, every
/// other branch rule in a 14-hour window (`window_around`), each due at its real next run.
async fn seed(pool: &PgPool, sites: usize, warm_up: Duration) -> Vec<Site> {
    let brands = sites.div_ceil(BRAND_SIZE) as i32;
    let measuring_from = Utc::now() + SEEDING_A_SITE * sites as u32 + warm_up;
    let shift = measuring_from.minute();
    let crons: Vec<String> = CRONS.iter().map(|c| shifted(c, shift)).collect();
    println!(
        "the rules' top of the hour: minute {shift} (measuring starts about {} UTC)",
        measuring_from.format("%H:%M")
    );
    let window = window_around(measuring_from);
    println!(
        "windows {}–{} local: measuring at {} in Riyadh, {} in Berlin",
        window.0.format("%H:%M"),
        window.1.format("%H:%M"),
        measuring_from
            .with_timezone(&chrono_tz::Asia::Riyadh)
            .format("%H:%M"),
        measuring_from
            .with_timezone(&chrono_tz::Europe::Berlin)
            .format("%H:%M"),
    );
    let run = |statement: &'static str| sqlx::query(statement);
    for query in [
        run("INSERT INTO brands (name, timezone) SELECT 'Brand ' || g, \
             CASE WHEN g % 2 = 0 THEN 'Europe/Berlin' ELSE 'Asia/Riyadh' END \
             FROM generate_series(1, $1::int) g")
        .bind(brands),
        run("INSERT INTO branches (brand_id, name) \
             SELECT b.id, b.name || ' / site ' || g FROM brands b, generate_series(1, $1::int) g")
        .bind(BRAND_SIZE as i32),
        run("INSERT INTO rules (name, status, cron_expression) \
             SELECT 'Rule ' || n, 'active', c FROM UNNEST($1::text[]) WITH ORDINALITY AS u(c, n)")
        .bind(crons.clone()),
        run(
            "INSERT INTO brand_rules (brand_id, rule_id, jitter_seconds) \
             SELECT b.id, r.id, $1 FROM brands b, rules r",
        )
        .bind(JITTER_SECONDS as i32),
        run(
            "INSERT INTO branch_rules (branch_id, rule_id, brand_rule_id, operation_time_from, \
                                       operation_time_to) \
             SELECT b.id, r.id, brr.id, \
                    CASE WHEN row_number() OVER () % 2 = 0 THEN $1::time END, \
                    CASE WHEN row_number() OVER () % 2 = 0 THEN $2::time END \
             FROM branches b JOIN brand_rules brr ON brr.brand_id = b.brand_id \
             JOIN rules r ON r.id = brr.rule_id",
        )
        .bind(window.0)
        .bind(window.1),
    ] {
        query.execute(pool).await.expect("seed");
    }
    set_next_runs(pool).await;
    // Every seeded rule's next run is set above, and every site starts from a full plan:
    // the sweeper need not walk the rules the seeding inserted (a walk that ran into the
    // measured window, 4-8 % of the database's statement time, a cost a mass import pays
    // once), nor deltas read the seeding's changes.
    for statement in ["DELETE FROM schedule_changes", "DELETE FROM plan_changes"] {
        sqlx::query(statement)
            .execute(pool)
            .await
            .expect("seeded changes need no walk");
    }
    let branches: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branches ORDER BY id LIMIT $1")
        .bind(sites as i64)
        .fetch_all(pool)
        .await
        .expect("branches");
    let sites = Site::for_branches(pool, &branches).await;
    sqlx::query("VACUUM ANALYZE")
        .execute(pool)
        .await
        .expect("analyze");
    sites
}

/// Each branch rule's real next run (jitter included), computed as a report would.
async fn set_next_runs(pool: &PgPool) {
    type Row = (Uuid, String, Option<NaiveTime>, Option<NaiveTime>, String);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT br.id, r.cron_expression, br.operation_time_from, br.operation_time_to, bd.timezone \
         FROM branch_rules br JOIN rules r ON r.id = br.rule_id \
         JOIN branches b ON b.id = br.branch_id JOIN brands bd ON bd.id = b.brand_id",
    )
    .fetch_all(pool)
    .await
    .expect("rules");
    let now = Utc::now();
    let (ids, due): (Vec<Uuid>, Vec<DateTime<Utc>>) = rows
        .iter()
        .map(|(id, cron, from, to, tz)| {
            let text = |t: &Option<NaiveTime>| t.map(|t| t.format("%H:%M").to_string());
            let next = Schedule::parse(cron, text(from).as_deref(), text(to).as_deref(), Some(tz))
                .expect("a valid schedule")
                .with_offset(jitter_offset(*id, JITTER_SECONDS))
                .next_run(now, false)
                .expect("a next run")
                .next_run_time;
            (*id, next)
        })
        .unzip();
    for (ids, due) in ids.chunks(50_000).zip(due.chunks(50_000)) {
        sqlx::query(
            "UPDATE branch_rules br SET next_run_time = d.due \
             FROM UNNEST($1::uuid[], $2::timestamptz[]) AS d(id, due) WHERE br.id = d.id",
        )
        .bind(ids)
        .bind(due)
        .execute(pool)
        .await
        .expect("next runs");
    }
}
