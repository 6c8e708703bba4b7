//! Admin keys manage the keys inside their scope through the functions: create (the secret
//! shown once), rotate, revoke. Another brand's keys, brands and branches answer exactly as
//! unknown ones; operators, viewers and runners are refused; nothing changes on a refusal.

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::Call;
use res_shared::wire::{
    ExecutionListRequest, KeyCreateRequest, KeyListRequest, KeyRevokeRequest, KeyRotateRequest,
};
use res_tests::functions::{Reply, Seed, TestApp};
use serde_json::{Value, json};
use uuid::Uuid;

struct Brands {
    app: TestApp,
    brand_a: Uuid,
    branch_a: Uuid,
    brand_b: Uuid,
    branch_b: Uuid,
    admin_a: String,
    /// Brand B's viewer key.
    viewer_b: Uuid,
}

async fn brands() -> Brands {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand_a = seed.brand("Asia/Riyadh").await;
    let branch_a = seed.branch(brand_a, None).await;
    let brand_b = seed.brand("Europe/Berlin").await;
    let branch_b = seed.branch(brand_b, None).await;
    let scope = |brand| KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    let admin_a = app.token("A admin", Role::Admin, &scope(brand_a)).await;
    app.token("B viewer", Role::Viewer, &scope(brand_b)).await;
    let viewer_b = sqlx::query_scalar("SELECT id FROM api_keys WHERE name = 'B viewer'")
        .fetch_one(&app.pool)
        .await
        .expect("B's viewer key");
    Brands {
        app,
        brand_a,
        branch_a,
        brand_b,
        branch_b,
        admin_a,
        viewer_b,
    }
}

async fn keys_fingerprint(app: &TestApp) -> String {
    sqlx::query_scalar(
        "SELECT md5(string_agg(t::text, ',' ORDER BY t.id)) FROM \
         (SELECT id, name, role, brand_ids, branch_ids, all_brands, revoked_at, rotated_to \
          FROM api_keys) t",
    )
    .fetch_one(&app.pool)
    .await
    .expect("keys")
}

fn message(reply: &Reply) -> String {
    reply.body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_brand_admin_creates_rotates_and_revokes_keys_of_its_brand_the_secret_shown_once() {
    let b = brands().await;
    let app = &b.app;
    let created = app
        .call(
            KeyCreateRequest::NAME,
            &b.admin_a,
            json!({"name": "wall screen", "role": "viewer", "branch_ids": [b.branch_a]}),
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let token = created.body["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(token.starts_with("res_"), "{}", created.body);
    assert_eq!(created.body["key"]["role"], "viewer");
    assert_eq!(created.body["key"]["branch_ids"], json!([b.branch_a]));
    let id: Uuid = created.body["key"]["id"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("an id");
    // The new key reads; nothing lists its secret.
    let read = app
        .call(ExecutionListRequest::NAME, &token, json!({}))
        .await;
    assert_eq!(read.status, 200, "{}", read.body);
    let listed = app.call(KeyListRequest::NAME, &b.admin_a, json!({})).await;
    assert!(!listed.body.to_string().contains(&token));
    assert!(listed.body.to_string().contains("wall screen"));

    // Rotate: a successor with its own secret; the old key works until revoked.
    let rotated = app
        .call(KeyRotateRequest::NAME, &b.admin_a, json!({"key_id": id}))
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let successor = rotated.body["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_ne!(successor, token);
    assert_eq!(rotated.body["key"]["name"], "wall screen");
    let again = app
        .call(KeyRotateRequest::NAME, &b.admin_a, json!({"key_id": id}))
        .await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(
        app.call(ExecutionListRequest::NAME, &token, json!({}))
            .await
            .status,
        200
    );
    let revoked = app
        .call(KeyRevokeRequest::NAME, &b.admin_a, json!({"key_id": id}))
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert!(
        revoked.body["key"]["revoked_at"].is_string(),
        "{}",
        revoked.body
    );
    assert_eq!(
        app.call(ExecutionListRequest::NAME, &token, json!({}))
            .await
            .status,
        401,
        "a revoked key stops at once"
    );
    assert_eq!(
        app.call(ExecutionListRequest::NAME, &successor, json!({}))
            .await
            .status,
        200
    );
    let twice = app
        .call(KeyRevokeRequest::NAME, &b.admin_a, json!({"key_id": id}))
        .await;
    assert_eq!(twice.status, 409, "{}", twice.body);
}

#[tokio::test]
async fn another_brands_keys_brands_and_branches_answer_as_unknown_ones_and_change_nothing() {
    let b = brands().await;
    let app = &b.app;
    let before = keys_fingerprint(app).await;
    let unknown = Uuid::new_v4();
    // Rotating or revoking B's key reads exactly as a key nobody has.
    for function in ["keys_rotate", "keys_revoke"] {
        let theirs = app
            .call(function, &b.admin_a, json!({"key_id": b.viewer_b}))
            .await;
        let nobodys = app
            .call(function, &b.admin_a, json!({"key_id": unknown}))
            .await;
        assert_eq!((theirs.status, nobodys.status), (404, 404), "{function}");
        assert_eq!(
            message(&theirs).replace(&b.viewer_b.to_string(), "ID"),
            message(&nobodys).replace(&unknown.to_string(), "ID"),
            "{function}"
        );
    }
    // A key for B's brand or branch: as a brand or branch that does not exist.
    for (field, theirs) in [("brand_ids", b.brand_b), ("branch_ids", b.branch_b)] {
        let create = |id: Uuid| {
            let mut body = json!({"name": "sneaky", "role": "operator"});
            body[field] = json!([id]);
            app.call(KeyCreateRequest::NAME, &b.admin_a, body)
        };
        let (a, z) = (create(theirs).await, create(unknown).await);
        assert_eq!((a.status, z.status), (404, 404), "{field}: {}", a.body);
        assert_eq!(
            message(&a).replace(&theirs.to_string(), "ID"),
            message(&z).replace(&unknown.to_string(), "ID"),
            "{field}"
        );
    }
    // Every brand takes an all-brands admin; a service key is not made here.
    let everywhere = app
        .call(
            KeyCreateRequest::NAME,
            &b.admin_a,
            json!({"name": "everyone", "role": "viewer", "all_brands": true}),
        )
        .await;
    assert_eq!(everywhere.status, 403, "{}", everywhere.body);
    for (body, field) in [
        (json!({"name": "svc", "role": "service"}), "role"),
        (
            json!({"name": "x", "role": "boss", "brand_ids": [b.brand_a]}),
            "role",
        ),
        (
            json!({"name": " ", "role": "viewer", "brand_ids": [b.brand_a]}),
            "name",
        ),
        (
            json!({"name": "site", "role": "runner", "brand_ids": [b.brand_a]}),
            "runner",
        ),
        (json!({"name": "nothing", "role": "viewer"}), "scope"),
    ] {
        let reply = app
            .call(KeyCreateRequest::NAME, &b.admin_a, body.clone())
            .await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.body);
        assert!(message(&reply).contains(field), "{body}: {}", reply.body);
    }
    assert_eq!(keys_fingerprint(app).await, before, "nothing was written");
}

#[tokio::test]
async fn only_admin_and_service_keys_manage_keys() {
    let b = brands().await;
    let app = &b.app;
    let scope = KeyScope {
        brand_ids: vec![b.brand_a],
        ..KeyScope::default()
    };
    let operator = app.token("A operator", Role::Operator, &scope).await;
    let viewer = app.token("A viewer", Role::Viewer, &scope).await;
    let runner = app.runner_token(&[b.branch_a]).await;
    let before = keys_fingerprint(app).await;
    let bodies: [(&str, Value); 3] = [
        (
            "keys_create",
            json!({"name": "n", "role": "viewer", "brand_ids": [b.brand_a]}),
        ),
        ("keys_rotate", json!({"key_id": b.viewer_b})),
        ("keys_revoke", json!({"key_id": b.viewer_b})),
    ];
    for token in [&operator, &viewer, &runner] {
        for (function, body) in &bodies {
            let reply = app.call(function, token, body.clone()).await;
            assert_eq!(reply.status, 403, "{function}: {}", reply.body);
        }
    }
    assert_eq!(keys_fingerprint(app).await, before);
    // The platform (all brands) admin makes a key for every brand; the service key too.
    let platform = app.all_brands_token("platform", Role::Admin).await;
    for token in [&platform, &app.service] {
        let reply = app
            .call(
                KeyCreateRequest::NAME,
                token,
                json!({"name": "auditor", "role": "viewer", "all_brands": true}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
}
