//! A brand's secrets through the functions over real PostgreSQL: set, listed and deleted by
//! its admins without a value ever coming back; sealed in the database; sent in a plan only
//! to a runner whose rules refer to them, for its branches; walls as everywhere; bad input
//! refused with the field named and nothing written; references checked by apply.

use res_functions::auth::Role;
use res_shared::wire::{
    Call, ConfigApplyRequest, PlanRequest, SecretDeleteRequest, SecretListRequest, SecretSetRequest,
};
use res_tests::functions::{Reply, RuleSpec, Seed, TestApp};
use serde_json::{Value, json};
use uuid::Uuid;

const TOKEN_VALUE: &str = "tok_9f8e7d6c5b4a";
const CAMERA_VALUE: &str = "Cam-p@ss/17";

struct Brands {
    app: TestApp,
    brand: Uuid,
    /// `[0]` runs a rule whose template refers to `analytics-token` and whose details refer
    /// to `cam-17`; `[1]` runs a rule referring to nothing.
    branches: [Uuid; 2],
    admin: String,
    other_admin: String,
    other_brand: Uuid,
}

async fn brands() -> Brands {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branches = [
        seed.branch(brand, None).await,
        seed.branch(brand, None).await,
    ];
    let template = seed
        .template(
            "Secret detector",
            "detection",
            &json!({"executor": "http", "url": "http://127.0.0.1:9/detect",
                    "headers": {"Authorization": "Bearer ${secret:analytics-token}"}}),
        )
        .await;
    let workflow = json!({"start_node": "d", "nodes": {"d": {"type": "detection", "action_template_id": template}}});
    let referring = seed
        .branch_rule_with(branches[0], RuleSpec::default(), &workflow)
        .await;
    sqlx::query(
        "INSERT INTO action_details (branch_rule_id, action_template_id, config) VALUES ($1, $2, $3)",
    )
    .bind(referring)
    .bind(template)
    .bind(json!({"stream_urls": ["rtsp://viewer:${secret:cam-17}@10.0.0.7/s"]}))
    .execute(&app.pool)
    .await
    .expect("details");
    seed.branch_rule(branches[1], RuleSpec::default()).await;
    let other_brand = seed.brand("UTC").await;
    Brands {
        admin: app.brand_token("brand admin", Role::Admin, brand).await,
        other_admin: app
            .brand_token("other admin", Role::Admin, other_brand)
            .await,
        app,
        brand,
        branches,
        other_brand,
    }
}

impl Brands {
    async fn set(&self, token: &str, body: Value) -> Reply {
        self.app.call(SecretSetRequest::NAME, token, body).await
    }

    async fn set_both(&self) {
        for (name, value) in [("analytics-token", TOKEN_VALUE), ("cam-17", CAMERA_VALUE)] {
            let reply = self
                .set(
                    &self.admin,
                    json!({"brand_id": self.brand, "name": name, "value": value}),
                )
                .await;
            assert_eq!(reply.status, 200, "{}", reply.body);
        }
    }

    async fn plan(&self, token: &str, since: Option<&str>) -> Reply {
        let mut body = json!({"runner_id": "site"});
        if let Some(cursor) = since {
            body["since"] = json!(cursor);
        }
        let reply = self.app.call(PlanRequest::NAME, token, body).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply
    }

    async fn stored_rows(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM secrets")
            .fetch_one(&self.app.pool)
            .await
            .expect("count")
    }
}

fn secrets_of(plan: &Reply) -> Vec<(String, i64, String)> {
    let mut found: Vec<(String, i64, String)> = plan.body["secrets"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_owned(),
                s["version"].as_i64().unwrap_or_default(),
                s["value"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn an_admin_sets_lists_and_deletes_secrets_that_are_sealed_and_never_shown_back() {
    let b = brands().await;
    b.set_both().await;
    let again = b
        .set(
            &b.admin,
            json!({"brand_id": b.brand, "name": "cam-17", "value": "Cam-p@ss/18"}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["created"], false);
    assert_eq!(again.body["secret"]["version"], 2);
    let listed = b
        .app
        .call(SecretListRequest::NAME, &b.admin, json!({}))
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let names: Vec<(&str, i64, &str)> = listed.body["secrets"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or_default(),
                        s["version"].as_i64().unwrap_or_default(),
                        s["updated_by"].as_str().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        [
            ("analytics-token", 1, "brand admin"),
            ("cam-17", 2, "brand admin")
        ]
    );
    for reply in [&again, &listed] {
        let text = reply.body.to_string();
        for value in [TOKEN_VALUE, CAMERA_VALUE, "Cam-p@ss/18"] {
            assert!(!text.contains(value), "{text}");
        }
    }
    // Sealed: no column of any row holds a value, in any encoding a dump would show.
    let dump: String = sqlx::query_scalar(
        "SELECT string_agg(s::text || encode(s.sealed_value, 'escape') || encode(s.wrapped_key, 'escape'), ' ') FROM secrets s",
    )
    .fetch_one(&b.app.pool)
    .await
    .expect("rows");
    for value in [TOKEN_VALUE, CAMERA_VALUE, "Cam-p@ss/18"] {
        assert!(!dump.contains(value));
    }
    // The audit trail: who did what, by version.
    let changes: Vec<(String, String, Option<i32>, String)> =
        sqlx::query_as("SELECT name, action, version, key_name FROM secret_changes ORDER BY id")
            .fetch_all(&b.app.pool)
            .await
            .expect("changes");
    // Deleted once; a second time it is unknown.
    for status in [200, 404] {
        let reply = b
            .app
            .call(
                SecretDeleteRequest::NAME,
                &b.admin,
                json!({"brand_id": b.brand, "name": "cam-17"}),
            )
            .await;
        assert_eq!(reply.status, status, "{}", reply.body);
    }
    // Its history outlives it; another brand's admin gets the unknown brand's answer.
    let history = b
        .app
        .call(
            SecretListRequest::NAME,
            &b.admin,
            json!({"brand_id": b.brand, "name": "cam-17"}),
        )
        .await;
    assert_eq!(history.status, 200, "{}", history.body);
    assert_eq!(history.body["secrets"], json!([]));
    let trail: Vec<(String, Value, String)> = history.body["changes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["action"].as_str().unwrap_or_default().to_owned(),
                c["version"].clone(),
                c["by"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        trail,
        [
            ("deleted".into(), Value::Null, "brand admin".into()),
            ("set".into(), json!(2), "brand admin".into()),
            ("created".into(), json!(1), "brand admin".into()),
        ]
    );
    let foreign = b
        .app
        .call(
            SecretListRequest::NAME,
            &b.other_admin,
            json!({"brand_id": b.brand, "name": "cam-17"}),
        )
        .await;
    assert_eq!(foreign.status, 404, "{}", foreign.body);
    let nameless = b
        .app
        .call(SecretListRequest::NAME, &b.admin, json!({"name": "cam-17"}))
        .await;
    assert_eq!(nameless.status, 422, "{}", nameless.body);
    assert_eq!(
        changes,
        [
            (
                "analytics-token".into(),
                "created".into(),
                Some(1),
                "brand admin".into()
            ),
            (
                "cam-17".into(),
                "created".into(),
                Some(1),
                "brand admin".into()
            ),
            ("cam-17".into(), "set".into(), Some(2), "brand admin".into()),
        ]
    );
}

#[tokio::test]
async fn another_brand_viewers_operators_and_runners_cannot_read_set_or_delete_them() {
    let b = brands().await;
    b.set_both().await;
    let unknown = b.app.call(
        SecretSetRequest::NAME,
        &b.other_admin,
        json!({"brand_id": Uuid::new_v4(), "name": "cam-17", "value": "abcdefgh"}),
    );
    let unknown = unknown.await;
    let foreign = b
        .set(
            &b.other_admin,
            json!({"brand_id": b.brand, "name": "cam-17", "value": "abcdefgh"}),
        )
        .await;
    assert_eq!(foreign.status, 404);
    assert_eq!(unknown.status, 404);
    assert_eq!(
        foreign.body["error"]["message"]
            .as_str()
            .map(|m| m.replace(&b.brand.to_string(), "ID")),
        unknown.body["error"]["message"]
            .as_str()
            .map(|m| m.replace(&unknown_brand(&unknown), "ID")),
        "another brand answers as an unknown one"
    );
    for (function, body) in [
        (SecretListRequest::NAME, json!({"brand_id": b.brand})),
        (
            SecretDeleteRequest::NAME,
            json!({"brand_id": b.brand, "name": "cam-17"}),
        ),
    ] {
        let reply = b.app.call(function, &b.other_admin, body).await;
        assert_eq!(reply.status, 404, "{function}: {}", reply.body);
    }
    let theirs = b
        .app
        .call(SecretListRequest::NAME, &b.other_admin, json!({}))
        .await;
    assert_eq!(theirs.body["secrets"], json!([]), "{}", theirs.body);
    let viewer = b.app.brand_token("viewer", Role::Viewer, b.brand).await;
    let operator = b.app.brand_token("operator", Role::Operator, b.brand).await;
    let runner = b.app.runner_token(&b.branches).await;
    for token in [&viewer, &operator, &runner] {
        for (function, body) in [
            (SecretListRequest::NAME, json!({})),
            (
                SecretSetRequest::NAME,
                json!({"brand_id": b.brand, "name": "x1", "value": "abcdefgh"}),
            ),
            (
                SecretDeleteRequest::NAME,
                json!({"brand_id": b.brand, "name": "cam-17"}),
            ),
        ] {
            let reply = b.app.call(function, token, body).await;
            assert_eq!(reply.status, 403, "{function}: {}", reply.body);
        }
    }
    assert_eq!(b.stored_rows().await, 2, "nothing written or deleted");
    let _ = b.other_brand;
}

fn unknown_brand(reply: &Reply) -> String {
    reply.body["error"]["message"]
        .as_str()
        .and_then(|m| m.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn bad_names_values_and_branches_are_refused_naming_the_field_and_nothing_is_written() {
    let b = brands().await;
    let other_branch = Seed::new(&b.app.pool).branch(b.other_brand, None).await;
    let cases = [
        (
            json!({"name": "ok-name", "value": ""}),
            422,
            "value: the value is shorter",
        ),
        (
            json!({"name": "ok-name", "value": "a\u{0}bcdef"}),
            422,
            "value: text in the request body must not contain the NUL",
        ),
        (
            json!({"name": "with space", "value": "abcdefgh"}),
            422,
            "name: 'with space' is not a secret name",
        ),
        (
            json!({"name": "ok-name", "value": "x".repeat(100_000)}),
            422,
            "value: the value is longer than 65536 bytes",
        ),
        (
            json!({"name": "ok-name", "value": "x".repeat(1_048_576)}),
            422,
            "value: the value is longer than 65536 bytes",
        ),
        (
            json!({"name": "ok-name", "value": "abcdefgh", "branch_ids": [other_branch]}),
            422,
            "branch_ids: branch",
        ),
        (
            json!({"name": "ok-name", "value": "abcdefgh", "branch_ids": []}),
            422,
            "branch_ids: give 1 to",
        ),
        (json!({"name": "ok-name", "value": 12345678}), 400, "value"),
        (
            json!({"name": "ok-name", "value": "abcdefgh", "colour": "red"}),
            400,
            "colour",
        ),
    ];
    for (mut body, status, message) in cases {
        body["brand_id"] = json!(b.brand);
        let reply = b.set(&b.admin, body).await;
        assert_eq!(reply.status, status, "{message}: {}", reply.body);
        let said = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(said.contains(message), "{said} lacks {message}");
        assert!(!said.contains("abcdefgh"), "{said}");
    }
    assert_eq!(b.stored_rows().await, 0);
}

#[tokio::test]
async fn a_runner_gets_only_the_secrets_its_rules_use_for_its_branch_and_a_new_value_at_once() {
    let b = brands().await;
    b.set_both().await;
    let referring = b.app.runner_token(&b.branches[..1]).await;
    let plain = b.app.runner_token(&b.branches[1..]).await;
    let first = b.plan(&referring, None).await;
    assert_eq!(
        secrets_of(&first),
        [
            ("analytics-token".into(), 1, TOKEN_VALUE.into()),
            ("cam-17".into(), 1, CAMERA_VALUE.into())
        ]
    );
    assert_eq!(secrets_of(&b.plan(&plain, None).await), []);
    // People never get values, even with a key that sees every branch.
    let service = b.app.all_brands_token("platform", Role::Service).await;
    let seen = b
        .app
        .call(PlanRequest::NAME, &service, json!({"runner_id": "ops"}))
        .await;
    assert_eq!(seen.status, 200);
    assert!(seen.body.get("secrets").is_none(), "{}", seen.body);
    // A new value reaches the waiting site's next delta.
    let cursor = first.body["cursor"].as_str().unwrap_or_default().to_owned();
    let set = b
        .set(
            &b.admin,
            json!({"brand_id": b.brand, "name": "analytics-token", "value": "tok_rotated_2"}),
        )
        .await;
    assert_eq!(set.status, 200);
    let delta = b.plan(&referring, Some(&cursor)).await;
    assert_eq!(delta.body["full"], false);
    assert!(
        secrets_of(&delta).contains(&("analytics-token".into(), 2, "tok_rotated_2".into())),
        "{:?}",
        secrets_of(&delta)
    );
    // Another brand's rule using the same template gets nothing of this brand's, only its
    // own secret of that name once it has one.
    let seed = Seed::new(&b.app.pool);
    let their_branch = seed.branch(b.other_brand, None).await;
    let template: Uuid =
        sqlx::query_scalar("SELECT id FROM action_templates WHERE name = 'Secret detector'")
            .fetch_one(&b.app.pool)
            .await
            .expect("the shared template");
    seed.branch_rule_with(
        their_branch,
        RuleSpec::default(),
        &json!({"start_node": "d", "nodes": {"d": {"type": "detection", "action_template_id": template}}}),
    )
    .await;
    let theirs = b.app.runner_token(&[their_branch]).await;
    assert_eq!(secrets_of(&b.plan(&theirs, None).await), []);
    let own = b
        .set(
            &b.other_admin,
            json!({"brand_id": b.other_brand, "name": "analytics-token", "value": "their-own-token"}),
        )
        .await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(
        secrets_of(&b.plan(&theirs, None).await),
        [("analytics-token".into(), 1, "their-own-token".into())]
    );
    // Limited to the other branch: the referring site no longer receives it.
    let cursor = delta.body["cursor"].as_str().unwrap_or_default().to_owned();
    let scoped = b
        .set(
            &b.admin,
            json!({"brand_id": b.brand, "name": "cam-17", "value": CAMERA_VALUE, "branch_ids": [b.branches[1]]}),
        )
        .await;
    assert_eq!(scoped.status, 200, "{}", scoped.body);
    let delta = b.plan(&referring, Some(&cursor)).await;
    let names: Vec<String> = secrets_of(&delta).into_iter().map(|s| s.0).collect();
    assert_eq!(names, ["analytics-token"]);
}

#[tokio::test]
async fn apply_refuses_a_reference_to_an_unknown_secret_and_warns_of_an_inline_password() {
    let app = TestApp::start().await;
    let platform = app.all_brands_token("platform", Role::Admin).await;
    let catalogue = "catalogue:\n  action_templates:\n    - name: Cam\n      kind: detection\n      config: {executor: http, url: \"http://127.0.0.1:9/d\", headers: {Authorization: \"Bearer ${secret:analytics-token}\"}}\n  rules:\n    - name: Watch\n      schedule: \"*/5 * * * *\"\n      workflow: {start_node: d, nodes: {d: {type: detection, template: Cam}}}\n";
    let apply = |token: String, document: String, dry_run: bool| {
        let app = &app;
        async move {
            app.call(
                ConfigApplyRequest::NAME,
                &token,
                json!({"document": document, "message": "m", "dry_run": dry_run}),
            )
            .await
        }
    };
    let applied = apply(platform.clone(), catalogue.to_owned(), false).await;
    assert_eq!(applied.status, 200, "{}", applied.body);
    let created = apply(
        platform.clone(),
        "brand: {name: Secretive, zone: UTC}\n".to_owned(),
        false,
    )
    .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let brand: Uuid = sqlx::query_scalar("SELECT id FROM brands WHERE name = 'Secretive'")
        .fetch_one(&app.pool)
        .await
        .expect("the brand");
    let admin = app.brand_token("brand admin", Role::Admin, brand).await;
    let document = format!(
        "brand:\n  id: {brand}\n  name: Secretive\n  zone: UTC\n  rules: {{Watch: {{}}}}\n  branches:\n    - name: Inline\n      rules:\n        Watch:\n          actions: {{Cam: {{stream_urls: [\"rtsp://admin:hunter22@10.0.0.7/s\"], backup: \"${{secret:missing-one}}\"}}}}\n"
    );
    let refused = apply(admin.clone(), document.clone(), true).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    let text = refused.body.to_string();
    for expected in [
        "secret 'missing-one', which the brand does not have",
        "its template 'Cam' refers to secret 'analytics-token'",
        "brand.branches[0].rules[\\\"Watch\\\"].actions[\\\"Cam\\\"].backup",
        "a URL with a password written inline",
        "brand.branches[0].rules[\\\"Watch\\\"].actions[\\\"Cam\\\"].stream_urls[0]",
    ] {
        assert!(text.contains(expected), "{expected} not in {text}");
    }
    assert!(!text.contains("hunter22"), "{text}");
    for name in ["analytics-token", "cam-17"] {
        let set = app
            .call(
                SecretSetRequest::NAME,
                &admin,
                json!({"brand_id": brand, "name": name, "value": "abcdefgh"}),
            )
            .await;
        assert_eq!(set.status, 200, "{}", set.body);
    }
    let fixed = document.replace("${secret:missing-one}", "${secret:cam-17}");
    let checked = apply(admin, fixed, true).await;
    assert_eq!(checked.status, 200, "{}", checked.body);
    assert!(
        checked.body["warnings"]
            .to_string()
            .contains("written inline"),
        "{}",
        checked.body
    );
}

/// `res-functions secrets <args>` on the app's database with `keys` as the sealing keys.
fn secrets_cli(app: &TestApp, keys: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_res-functions"));
    command
        .arg("secrets")
        .args(args)
        .env("DATABASE_URL", &app.database.url);
    match keys {
        Some(keys) => command.env("RES_SECRETS_KEYS", keys),
        None => command.env_remove("RES_SECRETS_KEYS"),
    };
    command.output().expect("res-functions runs")
}

#[tokio::test]
async fn the_sealing_key_rotates_without_a_value_changing_and_a_bad_key_is_explained() {
    let b = brands().await;
    b.set_both().await;
    let made = secrets_cli(&b.app, None, &["new-key", "--id", "second"]);
    assert!(made.status.success(), "{made:?}");
    let second = String::from_utf8_lossy(&made.stdout).trim().to_owned();
    assert!(second.starts_with("second:"), "{second}");
    // Both keys held, the new one first: rewrap everything under it.
    let both = format!("{second},{}", res_tests::secrets_keys());
    let rewrapped = secrets_cli(&b.app, Some(&both), &["rewrap"]);
    let said = String::from_utf8_lossy(&rewrapped.stdout);
    assert!(rewrapped.status.success(), "{rewrapped:?}");
    assert!(
        said.contains("2 secrets rewrapped under key 'second'"),
        "{said}"
    );
    let noted: i64 =
        sqlx::query_scalar("SELECT count(*) FROM secret_changes WHERE action = 'rewrapped'")
            .fetch_one(&b.app.pool)
            .await
            .expect("changes");
    assert_eq!(noted, 2, "each rewrap is in the audit trail");
    let again = secrets_cli(&b.app, Some(&both), &["rewrap"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 secrets rewrapped"));
    // The old key can go: the new one alone opens every value, unchanged.
    let keyring = res_functions::secrets::Keyring::parse(&second).expect("the new key");
    #[derive(sqlx::FromRow)]
    struct Row {
        name: String,
        key_id: String,
        wrapped_key: Vec<u8>,
        sealed_value: Vec<u8>,
        version: i32,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT name, key_id, wrapped_key, sealed_value, version FROM secrets ORDER BY name",
    )
    .fetch_all(&b.app.pool)
    .await
    .expect("rows");
    let opened: Vec<(String, String, i32)> = rows
        .into_iter()
        .map(|row| {
            let sealed = res_functions::secrets::Sealed {
                key_id: row.key_id,
                wrapped_key: row.wrapped_key,
                sealed_value: row.sealed_value,
            };
            let value = keyring.open(b.brand, &row.name, &sealed).expect("opens");
            (row.name, value, row.version)
        })
        .collect();
    assert_eq!(
        opened,
        [
            ("analytics-token".into(), TOKEN_VALUE.into(), 1),
            ("cam-17".into(), CAMERA_VALUE.into(), 1)
        ]
    );
    // No keys, or a malformed one: said plainly, and no key material printed.
    let none = secrets_cli(&b.app, None, &["rewrap"]);
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("no sealing keys given"));
    let bad = secrets_cli(&b.app, Some("k1:c2hvcnQ="), &["rewrap"]);
    assert!(!bad.status.success());
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(said.contains("key 'k1' is not 32 bytes"), "{said}");
    assert!(
        said.contains("in RES_SECRETS_KEYS"),
        "where the keys came from: {said}"
    );
    assert!(!said.contains("c2hvcnQ="), "{said}");
    // From a file: its path is named.
    let file = std::env::temp_dir().join(format!("res-keys-{}", Uuid::new_v4()));
    std::fs::write(&file, "k1 bad\n").expect("written");
    let bad_file = secrets_cli(
        &b.app,
        None,
        &["rewrap", "--secrets-key-file", &file.display().to_string()],
    );
    let _ = std::fs::remove_file(&file);
    let said = String::from_utf8_lossy(&bad_file.stderr);
    assert!(!bad_file.status.success());
    assert!(
        said.contains(&format!("the file {}", file.display())) && said.contains("not ID:BASE64"),
        "{said}"
    );
    // Keys are not taken on a command line, and the refusal does not repeat them.
    let typed = secrets_cli(&b.app, None, &["rewrap", "--secrets-keys", "k1:c2hvcnQ="]);
    let said = String::from_utf8_lossy(&typed.stderr);
    assert!(!typed.status.success());
    assert!(!said.contains("c2hvcnQ="), "{said}");
}
