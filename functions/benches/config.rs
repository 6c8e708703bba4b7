//! Configuration at the acceptance's size through `config_apply` over HTTP: a brand of
//! 2,000 branches × 20 rules (40,000 branch rules) created from a document, then the
//! common edit (one window) and the widest (the brand's zone: every branch rule moves),
//! each shown (dry run) and applied while 100 sites of the brand wait on their plan's long
//! poll and 8 clients claim the brand's rules without pause: how long after the apply's
//! answer each waiting site has the change, and the claims' latency while the apply runs;
//! then how soon the first export, edited, is refused as stale.
//! `cargo bench -p res-functions --bench config`.

mod support;

use std::time::{Duration, Instant};

use res_config::generate::{brand_text, catalogue_text};
use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db;
use res_tests::postgres::server;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

const BRANCHES: usize = 2_000;
const RULES: usize = 20;
const DRY_RUNS: usize = 5;
const WAITING_SITES: usize = 100;
const CLAIMERS: usize = 8;
/// The paced claimers' gap between claims: 8 × 40/s = 320 claims/s, four times the brand's
/// own steady rate (40,000 branch rules every 5–14 minutes: about 78 claims/s).
const PACED_GAP: Duration = Duration::from_millis(25);

/// What runs beside an apply.
#[derive(Clone, Copy)]
enum Load {
    Quiet,
    /// The claimers claim without pause: both cores busy.
    Saturating,
    /// The claimers claim every `PACED_GAP`.
    Paced,
}

fn main() {
    support::main_when_benchmarking(run);
}

async fn run() {
    res_tests::functions::install_tls();
    let database = server().create_database().await;
    let pool = PgPool::connect(&database.url).await.expect("connect");
    db::migrate(&pool).await.expect("migrate");
    let (brand, token) = seed(&pool).await;
    let (_service, base) = support::serve(&database.url, &[]);
    let client = reqwest::Client::new();
    support::wait_until_up(&client, &base).await;
    let answer = |function: &'static str, body: Value| {
        let (client, base, token) = (client.clone(), base.clone(), token.clone());
        async move {
            let started = Instant::now();
            let reply = client
                .post(format!("{base}/{function}"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .expect("answers");
            let status = reply.status().as_u16();
            let body: Value = reply.json().await.expect("json");
            (started.elapsed(), status, body)
        }
    };
    let call = |function: &'static str, body: Value| {
        let answer = answer(function, body);
        async move {
            let (took, status, body) = answer.await;
            // A refused call must stop the bench, not pass as a fast one.
            assert_eq!(status, 200, "{function}: {body}");
            (took, body)
        }
    };
    let text = brand_text("Fleet", "Asia/Riyadh", BRANCHES, RULES).replacen(
        "brand:\n",
        &format!("brand:\n  id: {brand}\n"),
        1,
    );
    println!(
        "document: {} bytes, {} branch rules",
        text.len(),
        BRANCHES * RULES
    );

    let (shown, body) = call("config_apply", json!({"document": text, "dry_run": true})).await;
    assert_eq!(body["applied"], false);
    println!("diff, creating everything: {shown:?}");
    let (created, body) = call(
        "config_apply",
        json!({"document": text, "message": "create"}),
    )
    .await;
    assert_eq!(body["applied"], true, "{body}");
    println!("apply, creating everything: {created:?}");

    let (exported, body) = call("config_export", json!({"brand_id": brand})).await;
    println!("export: {exported:?}");
    let document: res_config::Document =
        serde_json::from_value(body["document"].clone()).expect("a document");
    let one_window = edit(&document, |d| {
        if let Some(window) = d
            .brand
            .as_mut()
            .and_then(|b| b.branches.first_mut())
            .and_then(|b| b.rules.values_mut().next())
            .and_then(|r| r.window.as_mut())
        {
            window.from = "09:00".into();
        }
    });
    let zone = edit(&document, |d| {
        if let Some(b) = d.brand.as_mut() {
            b.zone = "Asia/Dubai".into();
        }
    });
    let zone_back = edit(&document, |_| {});
    // (what, the document, how many changes its diff holds, what runs beside it)
    for (label, text, changes, load) in [
        ("one window", &one_window, 1, Load::Quiet),
        ("the zone", &zone, 1 + BRANCHES * RULES, Load::Saturating),
        (
            "the zone back, quiet",
            &zone_back,
            1 + BRANCHES * RULES,
            Load::Quiet,
        ),
        (
            "the zone, beside paced claims",
            &zone,
            1 + BRANCHES * RULES,
            Load::Paced,
        ),
    ] {
        let mut samples = Vec::new();
        for _ in 0..DRY_RUNS {
            let (took, body) = call(
                "config_apply",
                json!({"document": text, "dry_run": true, "force": true}),
            )
            .await;
            assert_eq!(
                body["diff"]["changes"].as_array().map(Vec::len),
                Some(changes),
                "{label}"
            );
            samples.push(took);
        }
        support::report(&format!("diff, {label}"), &mut samples);
        // Every site of the brand has a change when the zone moves.
        let sites = match load {
            Load::Quiet => None,
            Load::Saturating => Some(Sites::start(&pool, &base, brand, None).await),
            Load::Paced => Some(Sites::start(&pool, &base, brand, Some(PACED_GAP)).await),
        };
        let (applied, body) = call("config_apply", json!({"document": text, "force": true})).await;
        let answered = Instant::now();
        assert_eq!(body["applied"], true, "{label}");
        println!("apply, {label}: {applied:?}");
        if let Some(sites) = sites {
            sites.report(label, answered - applied, answered).await;
        }
    }
    // The first export again, one window edited: later applies moved the brand's zone (and
    // so all 40,000 branch rules), which it would undo. Refused as stale: how soon.
    let mut samples = Vec::new();
    for _ in 0..DRY_RUNS {
        let (took, status, body) = answer(
            "config_apply",
            json!({"document": one_window, "message": "from a stale export"}),
        )
        .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("stale_revision")),
            "{body}"
        );
        samples.push(took);
    }
    support::report("a stale export refused", &mut samples);
}

/// Sites of the brand during an apply: each waiting on its plan's long poll from the plan
/// it has, and clients claiming the brand's rules in a loop, every `gap` or without pause.
struct Sites {
    waiters: Vec<tokio::task::JoinHandle<Instant>>,
    claimers: Vec<tokio::task::JoinHandle<Vec<(Instant, Duration)>>>,
    stop: tokio_util::sync::CancellationToken,
}

impl Sites {
    async fn start(pool: &PgPool, base: &str, brand: Uuid, gap: Option<Duration>) -> Sites {
        let branches: Vec<Uuid> = sqlx::query_scalar(
            "SELECT id FROM branches WHERE brand_id = $1 AND NOT is_archived ORDER BY id LIMIT $2",
        )
        .bind(brand)
        .bind(i64::try_from(WAITING_SITES + CLAIMERS).unwrap_or(108))
        .fetch_all(pool)
        .await
        .expect("branches");
        let rules: Vec<Vec<Uuid>> = {
            let mut rules = Vec::new();
            for branch in &branches {
                let ids: Vec<Uuid> =
                    sqlx::query_scalar("SELECT id FROM branch_rules WHERE branch_id = $1")
                        .bind(branch)
                        .fetch_all(pool)
                        .await
                        .expect("rules");
                rules.push(ids);
            }
            rules
        };
        let sites = support::sites::Site::for_branches(pool, &branches).await;
        let client = reqwest::Client::new();
        let plan = |site: &support::sites::Site, since: Option<String>| {
            let (client, base, site) = (client.clone(), base.to_owned(), site.clone());
            async move {
                let reply = client
                    .post(format!("{base}/get-execution-plan-v2"))
                    .bearer_auth(&site.token)
                    .json(
                        &json!({"runner_id": site.runner_id, "since": since, "wait_seconds": 120}),
                    )
                    .send()
                    .await
                    .expect("answers");
                assert_eq!(reply.status(), 200, "the plan");
                let body: Value = reply.json().await.expect("json");
                (body["cursor"].as_str().unwrap_or_default().to_owned(), body)
            }
        };
        let mut waiters = Vec::new();
        // The claimers' branches are not the waiters': a claim wakes its own branch's wait.
        for site in &sites[..WAITING_SITES] {
            let (cursor, _) = plan(site, None).await;
            let wait = plan(site, Some(cursor));
            waiters.push(tokio::spawn(async move {
                let (_, body) = wait.await;
                // A long poll that timed out empty would be a miss, not a fast answer.
                assert!(
                    body["workflows"].as_array().is_some_and(|w| !w.is_empty()),
                    "the waiting site got the change: {body}"
                );
                Instant::now()
            }));
        }
        let stop = tokio_util::sync::CancellationToken::new();
        let claimers = (0..CLAIMERS)
            .map(|n| {
                let (client, base, stop) = (client.clone(), base.to_owned(), stop.clone());
                let site = sites[WAITING_SITES + n].clone();
                let rules = rules[WAITING_SITES + n].clone();
                tokio::spawn(async move {
                    let mut samples = Vec::new();
                    let mut pace = gap.map(|gap| {
                        let mut pace = tokio::time::interval(gap);
                        // A claim held up by the apply's row locks is not made up for in a burst.
                        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        pace
                    });
                    for rule in rules.iter().cycle() {
                        if stop.is_cancelled() {
                            break;
                        }
                        if let Some(pace) = pace.as_mut() {
                            pace.tick().await;
                        }
                        let started = Instant::now();
                        let reply = client
                            .post(format!("{base}/branch_rules_claim"))
                            .bearer_auth(&site.token)
                            .json(&json!({"branch_rule_id": rule, "runner_id": site.runner_id}))
                            .send()
                            .await
                            .expect("answers");
                        // Claimed, or refused as not due or running: an answer, not an error.
                        let status = reply.status().as_u16();
                        assert!(matches!(status, 200 | 409), "claim answered {status}");
                        samples.push((started, started.elapsed()));
                    }
                    samples
                })
            })
            .collect();
        // The waits are in place before the apply starts.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Sites {
            waiters,
            claimers,
            stop,
        }
    }

    async fn report(self, label: &str, apply_started: Instant, answered: Instant) {
        let mut after = Vec::new();
        for waiter in self.waiters {
            let got = waiter.await.expect("a waiting site");
            after.push(got.saturating_duration_since(answered));
        }
        support::report(
            &format!("{label}: plans at {WAITING_SITES} waiting sites, after the apply's answer"),
            &mut after,
        );
        self.stop.cancel();
        let mut during = Vec::new();
        for claimer in self.claimers {
            for (at, took) in claimer.await.expect("a claimer") {
                if at >= apply_started && at <= answered {
                    during.push(took);
                }
            }
        }
        assert!(!during.is_empty(), "claims were made during the apply");
        support::report(&format!("{label}: claims during the apply"), &mut during);
    }
}

fn edit(document: &res_config::Document, change: impl FnOnce(&mut res_config::Document)) -> String {
    let mut edited = document.clone();
    change(&mut edited);
    res_config::to_yaml(&edited, "bench").expect("yaml")
}

/// The catalogue (by SQL: what is measured is the brand), an empty brand and
/// an admin key of it.
async fn seed(pool: &PgPool) -> (Uuid, String) {
    let catalogue = res_config::parse(&catalogue_text(RULES))
        .expect("catalogue")
        .catalogue
        .expect("a catalogue");
    let mut ids = std::collections::BTreeMap::new();
    for template in &catalogue.action_templates {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO action_templates (name, kind, config) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(&template.name)
        .bind(template.kind.as_str())
        .bind(&template.config)
        .fetch_one(pool)
        .await
        .expect("template");
        ids.insert(template.name.clone(), id);
    }
    for rule in &catalogue.rules {
        let workflow = res_config::stored_workflow(&rule.workflow, |name| ids.get(name).copied());
        sqlx::query(
            "WITH r AS (INSERT INTO rules (name, status, cron_expression) VALUES ($1, 'active', $2) RETURNING id) \
             INSERT INTO action_template_connections (rule_id, workflow_config) SELECT r.id, $3 FROM r",
        )
        .bind(&rule.name)
        .bind(&rule.schedule)
        .bind(&workflow)
        .execute(pool)
        .await
        .expect("rule");
    }
    let brand: Uuid = sqlx::query_scalar(
        "INSERT INTO brands (name, timezone) VALUES ('Fleet', 'Asia/Riyadh') RETURNING id",
    )
    .fetch_one(pool)
    .await
    .expect("brand");
    let token = generate_token();
    db::api_keys::insert(
        pool,
        "bench admin",
        &hash_token(&token),
        Role::Admin,
        &db::api_keys::KeyScope {
            brand_ids: vec![brand],
            ..Default::default()
        },
    )
    .await
    .expect("key");
    (brand, token)
}
