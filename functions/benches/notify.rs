//! The notification outbox against claims: `res-functions serve` (release, no sweeper) with
//! 10,000 rules and 10 webhook channels pointing at a local receiver. Each round runs the
//! claim → heartbeat → report cycle with 8 clients for 10 s twice, side by side: once with
//! the outbox empty, once with 1,000 signed messages queued at its start (100 a channel),
//! timing how long the receiver takes to have them all. Fails if any message is lost.
//!
//! `cargo bench -p res-functions --bench notify`; results go to docs/benchmarks.md.

mod support;

use std::time::{Duration, Instant};

use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_functions::db::api_keys::KeyScope;
use res_tests::postgres::server;
use res_tests::receiver::Receiver;
use sqlx::PgPool;
use uuid::Uuid;

use support::{CLIENTS, CYCLE_SECONDS, cycle_load, report, wait_until_up};

const CHANNELS: usize = 10;
const MESSAGES: usize = 1_000;
const ROUNDS: usize = 2;

fn main() {
    support::main_when_benchmarking(run);
}

/// Queues [`MESSAGES`] messages spread over `channels`, as a sweep would.
async fn queue(pool: &PgPool, channels: &[Uuid], round: usize) {
    sqlx::query(
        "INSERT INTO notification_outbox (channel_id, event, item_key, payload) \
         SELECT $1[1 + (g % cardinality($1))], 'firing', 'bench:' || $2 || ':' || g, \
                jsonb_build_object('event', 'firing', 'item', 'bench:' || $2 || ':' || g, \
                    'kind', 'needs_attention', \
                    'summary', 'Rule ' || g || ' at Branch 17 (Bench brand) needs attention: \
failed 3 times in a row (last: camera offline)') \
         FROM generate_series(1, $3) g ORDER BY g",
    )
    .bind(channels)
    .bind(round as i32)
    .bind(MESSAGES as i32)
    .execute(pool)
    .await
    .expect("queued");
}

async fn run() {
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    support::seed(&pool).await;
    let branches: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM branches")
        .fetch_all(&pool)
        .await
        .expect("branches");
    let token = generate_token();
    let scope = KeyScope {
        branch_ids: branches,
        ..KeyScope::default()
    };
    db::api_keys::insert(
        &pool,
        "bench runner",
        &hash_token(&token),
        Role::Runner,
        &scope,
    )
    .await
    .expect("key");
    let receiver = Receiver::start().await;
    let mut channels = Vec::new();
    for n in 0..CHANNELS {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO notification_channels (brand_id, name, kind, url, secret, created_by) \
             SELECT id, 'hook ' || $1, 'webhook', $2, 'whsec_bench', 'bench' FROM brands \
             RETURNING id",
        )
        .bind(n as i32)
        .bind(&receiver.url)
        .fetch_one(&pool)
        .await
        .expect("channel");
        channels.push(id);
    }
    let (_service, base) = support::serve(&database.url, &["--sweep-interval", "0"]);
    res_tests::functions::install_tls();
    let client = reqwest::Client::builder()
        .no_gzip()
        .build()
        .expect("client");
    wait_until_up(&client, &base).await;

    for round in 0..ROUNDS {
        let (quiet_cycles, mut quiet) = cycle_load(&client, &base, &token, &pool).await;
        let before = receiver.received().len();
        queue(&pool, &channels, round).await;
        let started = Instant::now();
        let load = cycle_load(&client, &base, &token, &pool);
        let drained = async {
            while receiver.received().len() < before + MESSAGES {
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "the outbox did not drain: {} of {MESSAGES} in 120 s",
                    receiver.received().len() - before
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            started.elapsed()
        };
        let ((busy_cycles, mut busy), drain) = tokio::join!(load, drained);
        let received = receiver.received();
        assert_eq!(received.len(), before + MESSAGES, "every message, once");
        let signed = received[before..]
            .iter()
            .filter(|r| res_tests::receiver::signed_by(r, "whsec_bench"))
            .count();
        assert_eq!(signed, MESSAGES, "every message signed");
        println!(
            "round {}: {MESSAGES} notifications to {CHANNELS} channels drained in {:.2} s \
             ({:.0}/min) during the cycle load",
            round + 1,
            drain.as_secs_f64(),
            MESSAGES as f64 / drain.as_secs_f64() * 60.0
        );
        let rate = |cycles: u64| cycles as f64 / CYCLE_SECONDS as f64;
        println!(
            "round {}: cycles/s, {CLIENTS} clients: {:.0} without notifications, {:.0} while draining",
            round + 1,
            rate(quiet_cycles),
            rate(busy_cycles)
        );
        report(
            &format!("round {}: cycle, outbox empty", round + 1),
            &mut quiet,
        );
        report(
            &format!("round {}: cycle, 1,000 notifications draining", round + 1),
            &mut busy,
        );
    }
}
