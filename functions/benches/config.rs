//! Configuration at the acceptance's size through `config_apply` over HTTP: a brand of
//! 2,000 branches × 20 rules (40,000 branch rules) created from a document, then the
//! common edit (one window) and the widest (the brand's zone: every branch rule moves),
//! each shown (dry run) and applied. `cargo bench -p res-functions --bench config`.

mod support;

use std::time::Instant;

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
    let call = |function: &'static str, body: Value| {
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
            // A refused call must stop the bench, not pass as a fast one.
            assert_eq!(status, 200, "{function}: {body}");
            (started.elapsed(), body)
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
    for (label, text, changes) in [
        ("one window", &one_window, 1),
        ("the zone", &zone, 1 + BRANCHES * RULES),
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
        let (applied, body) = call("config_apply", json!({"document": text, "force": true})).await;
        assert_eq!(body["applied"], true, "{label}");
        println!("apply, {label}: {applied:?}");
    }
}

fn edit(document: &res_config::Document, change: impl FnOnce(&mut res_config::Document)) -> String {
    let mut edited = document.clone();
    change(&mut edited);
    res_config::to_yaml(&edited, "bench").expect("yaml")
}

/// The catalogue (by SQL, as catalogue documents cannot be applied yet), an empty brand and
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
