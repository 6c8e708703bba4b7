//! The verified-key cache: a key is looked up once, not on every request, and still a
//! revocation or a change of scope takes effect within moments where the process listens
//! for key changes, and within the cache's time where it does not (Lambda).

use std::time::{Duration, Instant};

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_functions::state::Settings;
use res_shared::wire::{Call, DescribeRuleRequest, PlanRequest};
use res_tests::functions::{RuleSpec, Seed, TestApp};
use serde_json::json;
use uuid::Uuid;

/// How long a notified change may take to reach the cache: a behaviour bound (the
/// notification arrives in milliseconds), not a benchmark.
const NOTIFIED_WITHIN: Duration = Duration::from_secs(2);

fn cached_for(ttl: Duration) -> Settings {
    Settings {
        key_cache: ttl,
        ..Settings::default()
    }
}

async fn plan_status(app: &TestApp, token: &str) -> u16 {
    app.call(PlanRequest::NAME, token, json!({"runner_id": "site-1"}))
        .await
        .status
}

/// Polls `check` until it holds or `within` passes; how long it took.
async fn eventually<F, Fut>(within: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while started.elapsed() < within {
        if check().await {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

async fn revoke(app: &TestApp, token: &str) {
    sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1")
        .bind(res_functions::auth::hash_token(token))
        .execute(&app.pool)
        .await
        .expect("revoke");
}

#[tokio::test]
async fn a_listening_process_looks_a_key_up_once_and_hears_its_revocation_at_once() {
    let app = TestApp::start_with(cached_for(Duration::from_secs(600)), true).await;
    app.wait_until_listening().await;
    let (quiet, loud) = (app.runner_token(&[]).await, app.runner_token(&[]).await);
    assert_eq!(plan_status(&app, &quiet).await, 200);
    assert_eq!(plan_status(&app, &loud).await, 200);

    // Revoked without telling anyone: the key is answered from memory, not looked up.
    app.exec("ALTER TABLE api_keys DISABLE TRIGGER api_keys_notify", &[])
        .await;
    revoke(&app, &quiet).await;
    app.exec("ALTER TABLE api_keys ENABLE TRIGGER api_keys_notify", &[])
        .await;
    assert_eq!(plan_status(&app, &quiet).await, 200, "answered from memory");

    // Revoked as anything revokes a key: heard at once.
    revoke(&app, &loud).await;
    for token in [&loud, &quiet] {
        let took = eventually(NOTIFIED_WITHIN, || async {
            plan_status(&app, token).await == 401
        })
        .await;
        assert!(
            took.is_some(),
            "a revoked key still worked {NOTIFIED_WITHIN:?} later"
        );
    }
}

#[tokio::test]
async fn a_branch_joining_a_brand_reaches_a_cached_brand_key_at_once() {
    let app = TestApp::start_with(cached_for(Duration::from_secs(600)), true).await;
    app.wait_until_listening().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let first = seed.branch(brand, None).await;
    let known = seed.branch_rule(first, RuleSpec::default()).await;
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    let operator = app.token("alice", Role::Operator, &scope).await;
    let describe = |rule: Uuid| {
        let (app, operator) = (&app, &operator);
        async move {
            app.call(
                DescribeRuleRequest::NAME,
                operator,
                json!({"branch_rule_id": rule}),
            )
            .await
            .status
        }
    };
    assert_eq!(describe(known).await, 200);
    assert_eq!(describe(known).await, 200);

    let second = seed.branch(brand, None).await;
    let added = seed.branch_rule(second, RuleSpec::default()).await;
    assert!(
        eventually(NOTIFIED_WITHIN, || async { describe(added).await == 200 })
            .await
            .is_some(),
        "the new branch's rule stayed outside the cached key's scope"
    );
}

#[tokio::test]
async fn without_a_listener_a_revocation_waits_at_most_the_cache_time() {
    let ttl = Duration::from_secs(1);
    let app = TestApp::start_with(cached_for(ttl), false).await;
    let token = app.runner_token(&[]).await;
    assert_eq!(plan_status(&app, &token).await, 200);
    revoke(&app, &token).await;
    let revoked_at = Instant::now();
    // The documented delay: the remembered key still works until its time is up …
    assert_eq!(plan_status(&app, &token).await, 200);
    // … and not after.
    let took = eventually(ttl + NOTIFIED_WITHIN, || async {
        plan_status(&app, &token).await == 401
    })
    .await;
    assert!(took.is_some(), "the revoked key outlived the cache time");
    assert!(
        revoked_at.elapsed() >= ttl - Duration::from_millis(100),
        "refused before the cache time ran out, so the first answer was not from memory"
    );
}

#[tokio::test]
async fn with_the_cache_off_every_request_looks_the_key_up() {
    let app = TestApp::start_with(cached_for(Duration::ZERO), true).await;
    let token = app.runner_token(&[]).await;
    assert_eq!(plan_status(&app, &token).await, 200);
    revoke(&app, &token).await;
    assert_eq!(plan_status(&app, &token).await, 401);
}
