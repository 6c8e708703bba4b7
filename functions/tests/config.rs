//! `config_export`: the stored configuration as a document that validates, for an admin of
//! the whole brand (a brand) or a platform-wide key (the catalogue). Another brand answers
//! exactly as an unknown one, other roles are refused, and nothing is written.

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_tests::functions::TestApp;
use serde_json::{Value, json};
use uuid::Uuid;

struct Fleet {
    app: TestApp,
    brand_a: Uuid,
    branch_a: Uuid,
    brand_b: Uuid,
    admin_a: String,
    platform: String,
}

/// Brand A (two branches, one rule at both) and brand B (one branch), as SQL wrote them
/// before documents existed.
async fn fleet() -> Fleet {
    let app = TestApp::start().await;
    let ids: (Uuid, Uuid, Uuid) = sqlx::query_as(
        "WITH t AS (INSERT INTO action_templates (name, kind, config) VALUES \
              ('Queue detector', 'detection', '{\"executor\": \"http\", \"url\": \"http://127.0.0.1:9/q\"}'), \
              ('Record violation', 'business', '{}') RETURNING id, name), \
         r AS (INSERT INTO rules (name, status, cron_expression) \
               VALUES ('Queue length', 'active', '*/30 * * * *') RETURNING id), \
         c AS (INSERT INTO action_template_connections (rule_id, workflow_config) \
               SELECT r.id, jsonb_build_object( \
                 'start_node', 'detect', \
                 'nodes', jsonb_build_object( \
                   'detect', jsonb_build_object('type', 'detection', 'action_template_id', \
                        (SELECT id FROM t WHERE name = 'Queue detector')), \
                   'violation', jsonb_build_object('type', 'business', 'action', 'create_violation', \
                        'action_template_id', (SELECT id FROM t WHERE name = 'Record violation'))), \
                 'edges', jsonb_build_array(jsonb_build_object('from', 'detect', 'to', 'violation', \
                        'condition', 'violations > 0'))) FROM r RETURNING rule_id), \
         a AS (INSERT INTO brands (name, timezone) VALUES ('Acme', 'Asia/Riyadh') RETURNING id), \
         b AS (INSERT INTO brands (name, timezone) VALUES ('Other', 'Europe/Berlin') RETURNING id), \
         br AS (INSERT INTO brand_rules (brand_id, rule_id, cron_expression, jitter_seconds) \
                SELECT a.id, r.id, '*/15 * * * *', 30 FROM a, r RETURNING id) \
         SELECT a.id, b.id, r.id FROM a, b, r",
    )
    .fetch_one(&app.pool)
    .await
    .expect("catalogue and brands");
    let (brand_a, brand_b, rule) = ids;
    let branch_a: Uuid = sqlx::query_scalar(
        "WITH x AS (INSERT INTO branches (brand_id, name) VALUES ($1, 'Olaya'), ($1, 'Malqa') RETURNING id, name), \
              y AS (INSERT INTO branches (brand_id, name, timezone) VALUES ($2, 'Mitte', 'Europe/Berlin') RETURNING id), \
              z AS (INSERT INTO branch_rules (branch_id, rule_id, brand_rule_id, operation_time_from, operation_time_to) \
                    SELECT x.id, $3, (SELECT id FROM brand_rules), '08:00', CASE WHEN x.name = 'Olaya' THEN '24:00'::time ELSE '22:30'::time END \
                    FROM x RETURNING id, branch_id) \
         INSERT INTO action_details (branch_rule_id, action_template_id, config) \
         SELECT z.id, (SELECT id FROM action_templates WHERE name = 'Queue detector'), '{\"camera_ids\": [\"cam-1\"]}' \
         FROM z JOIN x ON x.id = z.branch_id WHERE x.name = 'Olaya' RETURNING (SELECT id FROM x WHERE name = 'Olaya')",
    )
    .bind(brand_a)
    .bind(brand_b)
    .bind(rule)
    .fetch_one(&app.pool)
    .await
    .expect("branches");
    let admin_a = app
        .token(
            "A admin",
            Role::Admin,
            &KeyScope {
                brand_ids: vec![brand_a],
                ..KeyScope::default()
            },
        )
        .await;
    let platform = app
        .token(
            "platform",
            Role::Admin,
            &KeyScope {
                all_brands: true,
                ..KeyScope::default()
            },
        )
        .await;
    Fleet {
        app,
        brand_a,
        branch_a,
        brand_b,
        admin_a,
        platform,
    }
}

fn document(reply: &Value) -> res_config::Document {
    serde_json::from_value(reply["document"].clone()).expect("a document")
}

#[tokio::test]
async fn a_brand_admin_exports_its_brand_as_a_document_that_validates() {
    let f = fleet().await;
    let before = f.app.fingerprint().await;
    let reply = f
        .app
        .call("config_export", &f.admin_a, json!({"brand_id": f.brand_a}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["revision"], 0);
    let doc = document(&reply.body);
    assert_eq!(doc.base_revision, Some(0));
    assert!(doc.catalogue.is_none());
    let brand = doc.brand.clone().expect("the brand");
    assert_eq!(
        (brand.name.as_str(), brand.zone.as_str(), brand.id),
        ("Acme", "Asia/Riyadh", Some(f.brand_a))
    );
    let rule = &brand.rules["Queue length"];
    assert_eq!(
        (rule.schedule.as_deref(), rule.jitter_seconds),
        (Some("*/15 * * * *"), Some(30))
    );
    let names: Vec<&str> = brand.branches.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["Malqa", "Olaya"]);
    let olaya = &brand.branches[1];
    assert_eq!(olaya.id, Some(f.branch_a));
    let at_olaya = &olaya.rules["Queue length"];
    let window = at_olaya.window.as_ref().expect("a window");
    // A window ending at midnight reads as the document writes it.
    assert_eq!(
        (window.from.as_str(), window.to.as_str()),
        ("08:00", "24:00")
    );
    assert_eq!(
        at_olaya.actions["Queue detector"],
        json!({"camera_ids": ["cam-1"]})
    );
    assert_eq!(
        brand.branches[0].rules["Queue length"]
            .window
            .as_ref()
            .map(|w| w.to.as_str()),
        Some("22:30")
    );

    // It validates against the exported catalogue, and says nothing changed when compared
    // with itself: export is a faithful picture.
    let catalogue = f
        .app
        .call("config_export", &f.platform, json!({"catalogue": true}))
        .await;
    assert_eq!(catalogue.status, 200, "{}", catalogue.body);
    let catalogue = document(&catalogue.body).catalogue.expect("the catalogue");
    assert_eq!(
        catalogue.rules[0].workflow.nodes["detect"]
            .template
            .as_deref(),
        Some("Queue detector")
    );
    let report = res_config::validate(&doc, Some(&catalogue));
    assert!(report.is_valid(), "{:?}", report.errors);
    assert!(
        res_config::diff(&doc, &doc, Some(&catalogue), chrono::Utc::now(), false)
            .changes
            .is_empty()
    );
    assert_eq!(f.app.fingerprint().await, before, "export writes nothing");
}

#[tokio::test]
async fn another_brand_answers_as_an_unknown_one_and_the_catalogue_needs_a_platform_key() {
    let f = fleet().await;
    let unknown = Uuid::new_v4();
    let foreign = f
        .app
        .call("config_export", &f.admin_a, json!({"brand_id": f.brand_b}))
        .await;
    let missing = f
        .app
        .call("config_export", &f.admin_a, json!({"brand_id": unknown}))
        .await;
    assert_eq!((foreign.status, missing.status), (404, 404));
    assert_eq!(
        foreign
            .body
            .to_string()
            .replace(&f.brand_b.to_string(), "ID"),
        missing.body.to_string().replace(&unknown.to_string(), "ID"),
    );
    let catalogue = f
        .app
        .call("config_export", &f.admin_a, json!({"catalogue": true}))
        .await;
    assert_eq!(catalogue.status, 403, "{}", catalogue.body);

    // A branch-scoped admin never sees brand-wide objects, even of its own brand.
    let branch_admin = f
        .app
        .token(
            "Olaya admin",
            Role::Admin,
            &KeyScope {
                branch_ids: vec![f.branch_a],
                ..KeyScope::default()
            },
        )
        .await;
    let own = f
        .app
        .call(
            "config_export",
            &branch_admin,
            json!({"brand_id": f.brand_a}),
        )
        .await;
    assert_eq!(own.status, 404, "{}", own.body);

    let scope = KeyScope {
        brand_ids: vec![f.brand_a],
        ..KeyScope::default()
    };
    for role in [Role::Operator, Role::Viewer] {
        let token = f.app.token(role.as_str(), role, &scope).await;
        let reply = f
            .app
            .call("config_export", &token, json!({"brand_id": f.brand_a}))
            .await;
        assert_eq!(reply.status, 403, "{role:?}: {}", reply.body);
        assert_eq!(reply.body["error"]["code"], "forbidden", "{}", reply.body);
    }
    let runner = f.app.runner_token(&[f.branch_a]).await;
    let reply = f
        .app
        .call("config_export", &runner, json!({"brand_id": f.brand_a}))
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);

    for body in [json!({}), json!({"brand_id": f.brand_a, "catalogue": true})] {
        let reply = f.app.call("config_export", &f.platform, body).await;
        assert_eq!(reply.status, 422, "{}", reply.body);
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("brand_id"))
        );
    }
}

#[tokio::test]
async fn names_a_document_cannot_tell_apart_are_refused_with_what_to_rename() {
    let f = fleet().await;
    sqlx::query(
        "WITH r AS (INSERT INTO rules (name, status, cron_expression) VALUES ('Queue length', 'active', '0 * * * *') RETURNING id) \
         INSERT INTO branch_rules (branch_id, rule_id) SELECT $1, r.id FROM r",
    )
    .bind(f.branch_a)
    .execute(&f.app.pool)
    .await
    .expect("a second rule of the same name");
    let reply = f
        .app
        .call("config_export", &f.admin_a, json!({"brand_id": f.brand_a}))
        .await;
    assert_eq!(reply.status, 409, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], "ambiguous_names");
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("branch 'Olaya' runs two rules called 'Queue length'")),
        "{}",
        reply.body
    );
}
