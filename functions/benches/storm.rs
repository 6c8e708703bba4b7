//! The top-of-the-hour storm: 10,000 rules over 1,000 sites due in the same second, first
//! without jitter, then with 60 s of jitter, side by side in one run. Each site has its own
//! runner key, registers, fetches its plan, and claims → heartbeats → runs (1 s) → reports
//! each rule when due, a worker per rule. Reports how long the last claim took after its due
//! time, the peak claims per second and every error. Run with
//! `cargo bench -p res-functions --bench storm`; results go to docs/benchmarks.md.

mod support;

use std::time::{Duration, Instant, UNIX_EPOCH};

use chrono::{DateTime, Timelike, Utc};
use res_functions::db;
use res_shared::schedule::jitter_offset;
use res_tests::postgres::server;
use sqlx::PgPool;
use uuid::Uuid;

use support::sites::{Behaviour, Fleet, Site, cpu_split, report_calls, run_site};

const SITES: usize = 1_000;
const RULES_PER_SITE: usize = 10;
const JITTER_SECONDS: u32 = 60;
/// Time for every site to register and fetch its plan before the storm.
const LEAD: Duration = Duration::from_secs(25);

fn main() {
    support::main_when_benchmarking(run);
}

async fn run() {
    res_tests::functions::install_tls();
    // Side by side: older runners' one claim per rule, then batches, then batches with jitter.
    let single = storm(0, false).await;
    let plain = storm(0, true).await;
    let jittered = storm(JITTER_SECONDS, true).await;
    println!();
    println!(
        "all claimed after: {:.2} s one claim per rule, {:.2} s in batches",
        single.last_s, plain.last_s
    );
    println!(
        "peak claims/s in batches: {} without jitter, {} with {JITTER_SECONDS} s (ratio {:.3})",
        plain.peak,
        jittered.peak,
        jittered.peak as f64 / plain.peak as f64
    );
}

struct Outcome {
    peak: usize,
    /// The last claim, seconds after the storm second.
    last_s: f64,
}

async fn storm(jitter: u32, batch: bool) -> Outcome {
    let how = if batch {
        "in batches"
    } else {
        "one claim per rule"
    };
    println!(
        "\n== {SITES} sites × {RULES_PER_SITE} rules due at once, jitter {jitter} s, {how} =="
    );
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    let storm_at = whole_second(Utc::now() + LEAD);
    let sites = seed(&pool, storm_at, jitter).await;
    let (service, base) = support::serve(&database.url, &[]);
    let probe = reqwest::Client::new();
    support::wait_until_up(&probe, &base).await;

    let fleet = Fleet::new(&base, 512);
    // A worker per rule: a site's own worker count (4 by default) decides when its later
    // rules start, which is the site's business; the storm measures the cloud.
    let behaviour = Behaviour {
        workers: RULES_PER_SITE,
        poll: Duration::from_secs(20),
        run_time: Duration::from_secs(1),
        beat_every: Duration::from_secs(20),
        once: true,
        start_within: Duration::ZERO,
        batch,
        wait: 0,
        // The worst case: every site in the same millisecond (runners before 0.3.0, or
        // spreads set to zero).
        start_spread: Duration::ZERO,
    };
    let lead = (storm_at - Utc::now()).to_std().unwrap_or_default();
    let until = Instant::now() + lead + Duration::from_secs(u64::from(jitter) + 120);
    let cpu_before = cpu_split(&[], &[service.pid()]);
    let mut tasks = tokio::task::JoinSet::new();
    for site in sites {
        tasks.spawn(run_site(fleet.clone(), site, behaviour, until));
    }
    tasks.join_all().await;
    let cpu_after = cpu_split(&[], &[service.pid()]);

    let claims = fleet.claims();
    let calls = fleet.calls();
    let seconds = calls
        .iter()
        .map(|c| (c.at + c.took).as_secs_f64())
        .fold(0.0, f64::max);
    let _ = report_calls(&calls, seconds);
    let errors = calls
        .iter()
        .filter(|c| c.status == 0 || c.status >= 500)
        .count();
    let refused = calls.iter().filter(|c| c.status == 409).count();
    let storm_ms = storm_at.timestamp_millis();
    let after_storm = |t: std::time::SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
            - storm_ms
    };
    let mut per_second = std::collections::BTreeMap::<i64, usize>::new();
    let mut worst_lag_ms = 0;
    for (_, due, at) in &claims {
        *per_second
            .entry(after_storm(*at).div_euclid(1000))
            .or_default() += 1;
        worst_lag_ms = worst_lag_ms.max(after_storm(*at) - (due.timestamp_millis() - storm_ms));
    }
    let last_ms = claims
        .iter()
        .map(|(_, _, at)| after_storm(*at))
        .max()
        .unwrap_or(0);
    let peak = per_second.values().copied().max().unwrap_or(0);
    let (own, functions, postgres) = (
        cpu_after.0 - cpu_before.0,
        cpu_after.1 - cpu_before.1,
        cpu_after.2 - cpu_before.2,
    );
    println!(
        "claimed {} of {} rules; last claim {:.2} s after the storm second; worst lag after a rule's own due time {:.2} s",
        claims.len(),
        SITES * RULES_PER_SITE,
        last_ms as f64 / 1000.0,
        worst_lag_ms as f64 / 1000.0
    );
    println!(
        "peak {peak} claims in one second; {errors} errors (no answer or 5xx), {refused} refusals (409)"
    );
    println!(
        "CPU seconds: PostgreSQL {postgres:.1}, res-functions {functions:.1}, the sites {own:.1}"
    );
    let busiest: Vec<String> = per_second
        .iter()
        .filter(|(_, n)| **n * 10 >= peak)
        .map(|(s, n)| format!("{s:+}s:{n}"))
        .collect();
    println!(
        "claims per second after the storm second: {}",
        busiest.join(" ")
    );
    // A storm that did not run through is a broken measurement, not a slow one.
    assert_eq!(
        claims.len(),
        SITES * RULES_PER_SITE,
        "not every rule was claimed"
    );
    drop(service);
    Outcome {
        peak,
        last_s: last_ms as f64 / 1000.0,
    }
}

fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_nanosecond(0).unwrap_or(t)
}

/// One brand (UTC), `SITES` branches with a runner key each, `RULES_PER_SITE` rules whose
/// cron fires daily at `at`, all due then (moved by their jitter offset when `jitter` > 0,
/// as a reschedule would have moved them).
async fn seed(pool: &PgPool, at: DateTime<Utc>, jitter: u32) -> Vec<Site> {
    let cron = format!("{} {} {} * * *", at.second(), at.minute(), at.hour());
    let run = |statement: &'static str| sqlx::query(statement);
    for query in [
        run("INSERT INTO brands (name, timezone) VALUES ('Storm brand', 'UTC')"),
        run(
            "INSERT INTO branches (brand_id, name) SELECT b.id, 'Site ' || lpad(g::text, 6, '0') \
             FROM brands b, generate_series(1, $1::int) g",
        )
        .bind(SITES as i32),
        run("INSERT INTO rules (name, status, cron_expression) \
             SELECT 'Rule ' || g, 'active', $2 FROM generate_series(1, $1::int) g")
        .bind(RULES_PER_SITE as i32)
        .bind(&cron),
        run(
            "INSERT INTO brand_rules (brand_id, rule_id, jitter_seconds) \
             SELECT b.id, r.id, $1 FROM brands b, rules r",
        )
        .bind(jitter as i32),
        run(
            "INSERT INTO branch_rules (branch_id, rule_id, brand_rule_id, next_run_time) \
             SELECT b.id, r.id, brr.id, $1 FROM branches b CROSS JOIN rules r \
             JOIN brand_rules brr ON brr.rule_id = r.id",
        )
        .bind(at),
    ] {
        query.execute(pool).await.expect("seed");
    }
    if jitter > 0 {
        let ids: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branch_rules")
            .fetch_all(pool)
            .await
            .expect("ids");
        let due: Vec<DateTime<Utc>> = ids
            .iter()
            .map(|id| at + jitter_offset(*id, jitter))
            .collect();
        sqlx::query(
            "UPDATE branch_rules br SET next_run_time = d.due \
             FROM UNNEST($1::uuid[], $2::timestamptz[]) AS d(id, due) WHERE br.id = d.id",
        )
        .bind(&ids)
        .bind(&due)
        .execute(pool)
        .await
        .expect("jittered due times");
    }
    let branches: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branches ORDER BY name")
        .fetch_all(pool)
        .await
        .expect("branches");
    let sites = Site::for_branches(pool, &branches).await;
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
    sites
}
