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
//! `cargo bench -p res-functions --bench fleet -- --sites 20000 --minutes 10 [--wait 240]`
//! (defaults: 2,000 sites, 2 minutes, plan polled every 20 s; `--wait S`: each site keeps a
//! plan request open waiting S seconds, as res-runner does). Results go to docs/benchmarks.md and docs/scaling.md.

mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveTime, Timelike, Utc};
use res_functions::db;
use res_shared::schedule::{Schedule, jitter_offset};
use res_tests::postgres::server;
use sqlx::PgPool;
use uuid::Uuid;

use support::sites::{Behaviour, Fleet, Site, cpu_split, report_calls, report_timeline, run_site};

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
const WARM_UP: Duration = Duration::from_secs(120);
/// Seeding takes about this long at 20,000 sites.
const SEEDING: Duration = Duration::from_secs(30);

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
    let sites = arg("--sites", 2_000) as usize;
    let minutes = arg("--minutes", 2);
    let in_flight = arg("--in-flight", 1_024) as usize;
    // `--batch 0`: one request per rule, as older runners; batches by default, as res-runner.
    let batch = arg("--batch", 1) != 0;
    // `--wait S`: plan requests wait S seconds for a change, as res-runner's do; 0 (the
    // default) polls a delta every 20 s, the server's worst case.
    let wait = u32::try_from(arg("--wait", 0)).expect("--wait takes seconds");
    println!(
        "== {sites} sites × {} rules, {minutes} min measured after {} s warm-up, plan {} ==",
        CRONS.len(),
        WARM_UP.as_secs(),
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
    let sites = seed(&pool, sites).await;
    println!("seeded in {:.1?}", seeding.elapsed());
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let metrics_bind = format!("127.0.0.1:{metrics_port}");
    let metrics_url = format!("http://{metrics_bind}/metrics");
    let (service, base) = support::serve(
        &database.url,
        &[
            "--plan-wait-max-seconds",
            "300",
            "--metrics-bind",
            &metrics_bind,
        ],
    );
    support::wait_until_up(&reqwest::Client::new(), &base).await;

    let fleet = Fleet::new(&base, in_flight);
    let behaviour = Behaviour {
        workers: 4,
        poll: Duration::from_secs(20),
        run_time: Duration::from_secs(5),
        beat_every: Duration::from_secs(20),
        once: false,
        start_within: Duration::from_secs(60),
        batch,
        wait,
    };
    let measured = Duration::from_secs(minutes * 60);
    let until = Instant::now() + WARM_UP + measured;
    let mut tasks = tokio::task::JoinSet::new();
    for site in sites {
        tasks.spawn(run_site(fleet.clone(), site, behaviour, until));
    }
    tokio::time::sleep(WARM_UP).await;
    let cpu_before = cpu_split(service.pid());
    let size_before = database_size(&pool).await;
    let window_start = fleet.calls().len();
    support::statements::reset(&pool).await;
    let inside_before = support::server_metrics::scrape(&metrics_url).await;
    let sampling = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn(support::statements::sample_activity(
        pool.clone(),
        sampling.clone(),
    ));
    tokio::time::sleep(measured).await;
    let cpu_after = cpu_split(service.pid());
    let inside_after = support::server_metrics::scrape(&metrics_url).await;
    sampling.cancel();
    let calls: Vec<_> = fleet.calls().split_off(window_start);
    tasks.abort_all();

    let seconds = measured.as_secs_f64();
    let worst_p99 = report_calls(&calls, seconds);
    report_timeline(&calls, Duration::from_secs(10));
    support::server_metrics::report(&inside_before, &inside_after);
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
    drop(service);
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
async fn seed(pool: &PgPool, sites: usize) -> Vec<Site> {
    let brands = sites.div_ceil(BRAND_SIZE) as i32;
    let measuring_from = Utc::now() + SEEDING + WARM_UP;
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
