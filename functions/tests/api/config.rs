//! `config_export`: the stored configuration as a document that validates, for an admin of
//! the whole brand (a brand) or a platform-wide key (the catalogue). Another brand answers
//! exactly as an unknown one, other roles are refused, and nothing is written.

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::Call;
use res_shared::wire::PlanRequest;
use res_shared::wire::{
    ConfigApplyRequest, ConfigExportRequest, ConfigHistoryRequest, ConfigShowRequest,
};
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
    let platform = app.all_brands_token("platform", Role::Admin).await;
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
        .call(
            ConfigExportRequest::NAME,
            &f.admin_a,
            json!({"brand_id": f.brand_a}),
        )
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
        .call(
            ConfigExportRequest::NAME,
            &f.platform,
            json!({"catalogue": true}),
        )
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
        .call(
            ConfigExportRequest::NAME,
            &f.admin_a,
            json!({"brand_id": f.brand_b}),
        )
        .await;
    let missing = f
        .app
        .call(
            ConfigExportRequest::NAME,
            &f.admin_a,
            json!({"brand_id": unknown}),
        )
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
        .call(
            ConfigExportRequest::NAME,
            &f.admin_a,
            json!({"catalogue": true}),
        )
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
            ConfigExportRequest::NAME,
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
            .call(
                ConfigExportRequest::NAME,
                &token,
                json!({"brand_id": f.brand_a}),
            )
            .await;
        assert_eq!(reply.status, 403, "{role:?}: {}", reply.body);
        assert_eq!(reply.body["error"]["code"], "forbidden", "{}", reply.body);
    }
    let runner = f.app.runner_token(&[f.branch_a]).await;
    let reply = f
        .app
        .call(
            ConfigExportRequest::NAME,
            &runner,
            json!({"brand_id": f.brand_a}),
        )
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);

    for body in [json!({}), json!({"brand_id": f.brand_a, "catalogue": true})] {
        let reply = f
            .app
            .call(ConfigExportRequest::NAME, &f.platform, body)
            .await;
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
        .call(
            ConfigExportRequest::NAME,
            &f.admin_a,
            json!({"brand_id": f.brand_a}),
        )
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

async fn export_brand(f: &Fleet, token: &str, brand: Uuid) -> res_config::Document {
    let reply = f
        .app
        .call(ConfigExportRequest::NAME, token, json!({"brand_id": brand}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    document(&reply.body)
}

fn text_of(document: &res_config::Document) -> String {
    res_config::to_yaml(document, "edited by a test").expect("yaml")
}

#[tokio::test]
async fn an_edited_export_is_shown_then_applied_in_one_revision_and_runners_see_it() {
    let f = fleet().await;
    let mut edited = export_brand(&f, &f.admin_a, f.brand_a).await;
    let brand = edited.brand.as_mut().expect("brand");
    let olaya = brand
        .branches
        .iter_mut()
        .find(|b| b.name == "Olaya")
        .expect("Olaya");
    olaya
        .rules
        .get_mut("Queue length")
        .and_then(|r| r.window.as_mut())
        .expect("a window")
        .from = "09:00".into();
    // Malqa is left out (archived); Qurtubah is new, running the rule all day.
    brand.branches.retain(|b| b.name != "Malqa");
    let mut qurtubah = brand.branches[0].clone();
    qurtubah.id = None;
    qurtubah.name = "Qurtubah".into();
    for rule in qurtubah.rules.values_mut() {
        rule.id = None;
        rule.window = None;
    }
    brand.branches.push(qurtubah);
    let body = json!({"document": text_of(&edited), "message": "open Qurtubah, close Malqa"});

    let before = f.app.fingerprint().await;
    let mut dry = body.clone();
    dry["dry_run"] = json!(true);
    let shown = f.app.call(ConfigApplyRequest::NAME, &f.admin_a, dry).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert_eq!(
        (
            shown.body["applied"].clone(),
            shown.body["revision"].clone()
        ),
        (json!(false), json!(0))
    );
    assert_eq!(
        f.app.fingerprint().await,
        before,
        "a dry run writes nothing"
    );
    let summary = shown.body["summary"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for line in [
        "~ branch rule 'Olaya / Queue length'\n    window: 08:00-24:00 → 09:00-24:00\n    next runs (Asia/Riyadh):",
        "+ branch 'Qurtubah'",
        "+ branch rule 'Qurtubah / Queue length'",
        "- branch 'Malqa' (archived: kept with its history; --prune deletes it)",
        "2 to create, 1 to change, 1 to archive or delete.",
    ] {
        assert!(summary.contains(line), "missing {line:?} in\n{summary}");
    }

    let applied = f.app.call(ConfigApplyRequest::NAME, &f.admin_a, body).await;
    assert_eq!(applied.status, 200, "{}", applied.body);
    assert_eq!(
        (
            applied.body["applied"].clone(),
            applied.body["revision"].clone()
        ),
        (json!(true), json!(1))
    );
    assert_eq!(applied.body["summary"], json!(summary));
    let (who, why): (String, String) =
        sqlx::query_as("SELECT key_name, message FROM config_revisions WHERE id = 1")
            .fetch_one(&f.app.pool)
            .await
            .expect("the revision");
    assert_eq!(
        (who.as_str(), why.as_str()),
        ("A admin", "open Qurtubah, close Malqa")
    );
    let malqa: (bool, bool, i64) = sqlx::query_as(
        "SELECT b.is_archived, b.is_active, count(*) FILTER (WHERE x.is_archived) \
         FROM branches b JOIN branch_rules x ON x.branch_id = b.id WHERE b.name = 'Malqa' \
         GROUP BY b.id",
    )
    .fetch_one(&f.app.pool)
    .await
    .expect("Malqa kept");
    assert_eq!(
        malqa,
        (true, false, 1),
        "archived with its rule, not deleted"
    );
    let new_rule: (Option<chrono::DateTime<chrono::Utc>>, Option<Uuid>) = sqlx::query_as(
        "SELECT x.next_run_time, x.brand_rule_id FROM branch_rules x JOIN branches b ON b.id = x.branch_id \
         WHERE b.name = 'Qurtubah'",
    )
    .fetch_one(&f.app.pool)
    .await
    .expect("Qurtubah's rule");
    let next = new_rule
        .0
        .expect("scheduled from its schedule, not due at once");
    assert!(
        next > chrono::Utc::now() && next <= chrono::Utc::now() + chrono::TimeDelta::minutes(16),
        "{next}"
    );
    assert!(new_rule.1.is_some());

    // The branch's runner sees the new window in its plan.
    let runner = f.app.runner_token(&[f.branch_a]).await;
    let plan = f
        .app
        .call(
            PlanRequest::NAME,
            &runner,
            json!({"runner_id": "site-olaya"}),
        )
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(
        plan.body["workflows"][0]["operation_time_from"], "09:00:00",
        "{}",
        plan.body
    );

    // Export → apply changes nothing, and the export is at the new revision.
    let again = export_brand(&f, &f.admin_a, f.brand_a).await;
    assert_eq!(again.base_revision, Some(1));
    let unchanged = f.app.fingerprint().await;
    let replay = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": text_of(&again)}),
        )
        .await;
    assert_eq!(replay.status, 200, "{}", replay.body);
    assert_eq!(replay.body["applied"], false);
    assert_eq!(
        replay.body["summary"],
        "No changes: the document says what is stored.\n"
    );
    assert_eq!(f.app.fingerprint().await, unchanged);
}

#[tokio::test]
async fn a_document_with_problems_is_refused_whole_with_every_path_and_nothing_written() {
    let f = fleet().await;
    let mut edited = export_brand(&f, &f.admin_a, f.brand_a).await;
    let brand = edited.brand.as_mut().expect("brand");
    brand.zone = "Asia/Riyad".into();
    brand.branches[0]
        .rules
        .get_mut("Queue length")
        .expect("rule")
        .window = Some(res_config::Window {
        from: "08:00".into(),
        to: "25:00".into(),
    });
    // Brand B's branch id smuggled in as one of A's.
    let foreign: Uuid = sqlx::query_scalar("SELECT id FROM branches WHERE brand_id = $1")
        .bind(f.brand_b)
        .fetch_one(&f.app.pool)
        .await
        .expect("B's branch");
    brand.branches[1].id = Some(foreign);
    let before = f.app.fingerprint().await;
    let reply = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": text_of(&edited)}),
        )
        .await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], "invalid_document");
    let paths: Vec<&str> = reply.body["problems"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p["path"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        paths,
        [
            "brand.zone",
            "brand.branches[0].rules[\"Queue length\"].window.to",
            "brand.branches[1].id"
        ],
        "{}",
        reply.body
    );
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("3 problems"))
    );
    assert_eq!(f.app.fingerprint().await, before);

    for (document, status, code) in [
        ("brand: {name: A, name: B}", 422, "invalid_document"),
        // Brand B's name is as unknown to A's admin as a name no brand has.
        ("brand: {name: Other}", 404, "not_found"),
        ("brand: {name: Nobody}", 404, "not_found"),
        ("{}", 422, "invalid_document"),
        ("catalogue: {}", 403, "forbidden"),
    ] {
        let reply = f
            .app
            .call(
                ConfigApplyRequest::NAME,
                &f.admin_a,
                json!({"document": document}),
            )
            .await;
        assert_eq!(reply.status, status, "{document}: {}", reply.body);
        assert_eq!(reply.body["error"]["code"], code, "{}", reply.body);
    }
    assert_eq!(f.app.fingerprint().await, before);
}

#[tokio::test]
async fn applying_to_another_brand_answers_as_an_unknown_one_and_only_admins_apply() {
    let f = fleet().await;
    let theirs = export_brand(&f, &f.platform, f.brand_b).await;
    let before = f.app.fingerprint().await;
    let foreign = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": text_of(&theirs)}),
        )
        .await;
    let mut unknown_doc = theirs.clone();
    let unknown = Uuid::new_v4();
    if let Some(b) = unknown_doc.brand.as_mut() {
        b.id = Some(unknown);
    }
    let missing = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": text_of(&unknown_doc)}),
        )
        .await;
    assert_eq!(
        (foreign.status, missing.status),
        (404, 404),
        "{}",
        foreign.body
    );
    assert_eq!(
        foreign
            .body
            .to_string()
            .replace(&f.brand_b.to_string(), "ID"),
        missing.body.to_string().replace(&unknown.to_string(), "ID"),
    );
    let ours = export_brand(&f, &f.admin_a, f.brand_a).await;
    let scope = KeyScope {
        brand_ids: vec![f.brand_a],
        ..KeyScope::default()
    };
    for role in [Role::Operator, Role::Viewer] {
        let token = f.app.token(role.as_str(), role, &scope).await;
        let reply = f
            .app
            .call(
                ConfigApplyRequest::NAME,
                &token,
                json!({"document": text_of(&ours), "dry_run": true}),
            )
            .await;
        assert_eq!(reply.status, 403, "{role:?}: {}", reply.body);
    }
    assert_eq!(f.app.fingerprint().await, before);
}

#[tokio::test]
async fn an_apply_from_a_stale_export_is_refused_when_it_touches_what_changed_since() {
    let f = fleet().await;
    let base = export_brand(&f, &f.admin_a, f.brand_a).await;
    let apply = |document: &res_config::Document, force: bool| {
        let body = json!({"document": text_of(document), "force": force});
        let app = &f.app;
        let token = f.admin_a.clone();
        async move { app.call(ConfigApplyRequest::NAME, &token, body).await }
    };
    let set_window = |document: &res_config::Document, branch: &str, from: &str| {
        let mut d = document.clone();
        if let Some(b) = d.brand.as_mut()
            && let Some(window) = b
                .branches
                .iter_mut()
                .find(|x| x.name == branch)
                .and_then(|x| x.rules.get_mut("Queue length"))
                .and_then(|r| r.window.as_mut())
        {
            window.from = from.into();
        }
        d
    };
    // Alice moves Olaya; Bob, from the same export, moves Olaya too: refused, named.
    let first = apply(&set_window(&base, "Olaya", "07:00"), false).await;
    assert_eq!(first.status, 200, "{}", first.body);
    // The base export named revision 0, before any apply: give Bob's a real base.
    let rev1 = export_brand(&f, &f.admin_a, f.brand_a).await;
    let second = apply(&set_window(&rev1, "Olaya", "07:30"), false).await;
    assert_eq!(second.status, 200, "{}", second.body);
    let stale = apply(&set_window(&rev1, "Olaya", "10:00"), false).await;
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert_eq!(stale.body["error"]["code"], "stale_revision");
    assert!(
        stale.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(
                "changed since revision 1 (the latest is 2): branch rule 'Olaya / Queue length' (revision 2, by A admin)"
            )),
        "{}",
        stale.body
    );
    // Editing another object from the stale export would still put Olaya back: refused
    // too, naming Olaya. --force applies it.
    let elsewhere = apply(&set_window(&rev1, "Malqa", "10:00"), false).await;
    assert_eq!(elsewhere.status, 409, "{}", elsewhere.body);
    assert!(
        elsewhere.body["error"]["message"]
            .as_str()
            .is_some_and(
                |m| m.contains("branch rule 'Olaya / Queue length'") && !m.contains("Malqa")
            ),
        "{}",
        elsewhere.body
    );
    // The base is checked first, before the document itself (a big brand's full check
    // and diff take seconds): a stale document is refused as stale even where it is also
    // invalid, and nothing is written.
    let before = f.app.fingerprint().await;
    let broken = set_window(&set_window(&rev1, "Olaya", "10:00"), "Malqa", "25:00");
    let stale_and_broken = apply(&broken, false).await;
    assert_eq!(
        (
            stale_and_broken.status,
            &stale_and_broken.body["error"]["code"]
        ),
        (409, &json!("stale_revision")),
        "{}",
        stale_and_broken.body
    );
    assert_eq!(f.app.fingerprint().await, before);
    let forced_broken = apply(&broken, true).await;
    assert_eq!(forced_broken.status, 422, "{}", forced_broken.body);
    let forced = apply(&set_window(&rev1, "Olaya", "10:00"), true).await;
    assert_eq!(forced.status, 200, "{}", forced.body);
    assert_eq!(forced.body["revision"], 3);
    // A fresh export applies without force.
    let fresh = export_brand(&f, &f.admin_a, f.brand_a).await;
    let ok = apply(&set_window(&fresh, "Malqa", "10:00"), false).await;
    assert_eq!(
        (ok.status, ok.body["revision"].clone()),
        (200, json!(4)),
        "{}",
        ok.body
    );
}

#[tokio::test]
async fn huge_documents_are_refused_by_size_before_they_are_read() {
    let f = fleet().await;
    let before = f.app.fingerprint().await;
    // Within the body limit but over the document limit: refused by the parser, named.
    let big = format!(
        "brand:\n  name: A\n# {}\n",
        "x".repeat(res_config::MAX_DOCUMENT_BYTES)
    );
    let reply = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": big}),
        )
        .await;
    assert_eq!(
        reply.status,
        422,
        "{}",
        &reply.body.to_string()[..200.min(reply.body.to_string().len())]
    );
    assert!(
        reply.body["problems"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 16777216"))
    );
    // Declared over the body limit (32 MiB): 413 before a byte of it is read.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = f.app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connects");
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {address}\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        ConfigApplyRequest::path(),
        f.admin_a,
        (32 << 20) + 1
    );
    socket.write_all(head.as_bytes()).await.expect("sends");
    let mut answer = vec![0; 4096];
    let read = socket.read(&mut answer).await.expect("an answer");
    let answer = String::from_utf8_lossy(&answer[..read]).into_owned();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(f.app.fingerprint().await, before);
}

#[tokio::test]
async fn history_lists_each_apply_and_applying_an_old_revision_rolls_back_to_it() {
    let f = fleet().await;
    let set_from = |document: &res_config::Document, from: &str| {
        let mut d = document.clone();
        if let Some(window) = d
            .brand
            .as_mut()
            .and_then(|b| b.branches.iter_mut().find(|x| x.name == "Olaya"))
            .and_then(|x| x.rules.get_mut("Queue length"))
            .and_then(|r| r.window.as_mut())
        {
            window.from = from.into();
        }
        text_of(&d)
    };
    for (from, why) in [("09:00", "later opening"), ("10:00", "later still")] {
        let base = export_brand(&f, &f.admin_a, f.brand_a).await;
        let reply = f
            .app
            .call(
                ConfigApplyRequest::NAME,
                &f.admin_a,
                json!({"document": set_from(&base, from), "message": why}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let history = f
        .app
        .call(
            ConfigHistoryRequest::NAME,
            &f.admin_a,
            json!({"brand_id": f.brand_a}),
        )
        .await;
    assert_eq!(history.status, 200, "{}", history.body);
    let revisions = history.body["revisions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let seen: Vec<(i64, &str, &str, i64)> = revisions
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap_or_default(),
                r["key_name"].as_str().unwrap_or_default(),
                r["message"].as_str().unwrap_or_default(),
                r["changed"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (2, "A admin", "later still", 1),
            (1, "A admin", "later opening", 1)
        ]
    );
    let page = f
        .app
        .call(
            ConfigHistoryRequest::NAME,
            &f.admin_a,
            json!({"brand_id": f.brand_a, "before": 2}),
        )
        .await;
    assert_eq!(
        page.body["revisions"].as_array().map(Vec::len),
        Some(1),
        "{}",
        page.body
    );

    // Roll back: revision 1's document, applied again.
    let first = f
        .app
        .call(ConfigShowRequest::NAME, &f.admin_a, json!({"revision": 1}))
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["message"], "later opening");
    assert_eq!(
        first.body["diff"]["changes"][0]["fields"][0]["after"],
        "09:00-24:00"
    );
    let old: res_config::Document =
        serde_json::from_value(first.body["document"].clone()).expect("a document");
    let rolled = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": text_of(&old), "message": "roll back to 1"}),
        )
        .await;
    assert_eq!(rolled.status, 200, "{}", rolled.body);
    assert_eq!(rolled.body["revision"], 3);
    assert!(
        rolled.body["summary"]
            .as_str()
            .is_some_and(|s| s.contains("window: 10:00-24:00 → 09:00-24:00")),
        "{}",
        rolled.body
    );
    let from: String = sqlx::query_scalar(
        "SELECT x.operation_time_from::text FROM branch_rules x WHERE x.branch_id = $1",
    )
    .bind(f.branch_a)
    .fetch_one(&f.app.pool)
    .await
    .expect("the window");
    assert_eq!(from, "09:00:00");

    // Another brand's admin: the history and the revisions answer as unknown ones.
    let admin_b = f
        .app
        .token(
            "B admin",
            Role::Admin,
            &KeyScope {
                brand_ids: vec![f.brand_b],
                ..KeyScope::default()
            },
        )
        .await;
    let theirs = f
        .app
        .call(ConfigShowRequest::NAME, &admin_b, json!({"revision": 1}))
        .await;
    let nobody = f
        .app
        .call(ConfigShowRequest::NAME, &admin_b, json!({"revision": 999}))
        .await;
    assert_eq!((theirs.status, nobody.status), (404, 404));
    assert_eq!(
        theirs
            .body
            .to_string()
            .replace("revision 1 ", "revision N "),
        nobody
            .body
            .to_string()
            .replace("revision 999 ", "revision N ")
    );
    let listed = f
        .app
        .call(
            ConfigHistoryRequest::NAME,
            &admin_b,
            json!({"brand_id": f.brand_a}),
        )
        .await;
    assert_eq!(listed.status, 404, "{}", listed.body);
    let catalogue = f
        .app
        .call(
            ConfigHistoryRequest::NAME,
            &f.admin_a,
            json!({"catalogue": true}),
        )
        .await;
    assert_eq!(catalogue.status, 403, "{}", catalogue.body);
}

/// A branch (with its rule) archived at one revision and the revision before applied again:
/// the branch, its rule and the brand rule come back under their ids, active, scheduled
/// afresh, and the branch's runner (whose key names the branch's id) has the rule again.
#[tokio::test]
async fn rolling_back_past_an_archive_brings_the_branch_and_its_rules_back_under_their_ids() {
    let f = fleet().await;
    let malqa: (Uuid, Uuid) = sqlx::query_as(
        "SELECT b.id, x.id FROM branches b JOIN branch_rules x ON x.branch_id = b.id \
         WHERE b.name = 'Malqa'",
    )
    .fetch_one(&f.app.pool)
    .await
    .expect("Malqa");
    let apply = |document: String, message: &'static str| {
        let app = &f.app;
        let admin = f.admin_a.clone();
        async move {
            app.call(
                ConfigApplyRequest::NAME,
                &admin,
                json!({"document": document, "message": message}),
            )
            .await
        }
    };
    // Revision 1: a later opening at Olaya; revision 2: Malqa closed (archived).
    let mut later = export_brand(&f, &f.admin_a, f.brand_a).await;
    if let Some(b) = later.brand.as_mut() {
        for x in &mut b.branches {
            if let Some(w) = x
                .rules
                .get_mut("Queue length")
                .and_then(|r| r.window.as_mut())
            {
                w.from = "09:00".into();
            }
        }
    }
    assert_eq!(apply(text_of(&later), "later").await.status, 200);
    let mut closed = export_brand(&f, &f.admin_a, f.brand_a).await;
    if let Some(b) = closed.brand.as_mut() {
        b.branches.retain(|x| x.name != "Malqa");
    }
    assert_eq!(apply(text_of(&closed), "close Malqa").await.status, 200);
    let archived: (bool, bool) = sqlx::query_as(
        "SELECT b.is_archived, x.is_archived FROM branches b JOIN branch_rules x ON x.branch_id = b.id \
         WHERE b.id = $1",
    )
    .bind(malqa.0)
    .fetch_one(&f.app.pool)
    .await
    .expect("archived");
    assert_eq!(archived, (true, true));
    let runner = f.app.runner_token(&[malqa.0]).await;
    let plan = |token: String| {
        let app = &f.app;
        async move {
            let plan = app
                .call(
                    PlanRequest::NAME,
                    &token,
                    json!({"runner_id": "site-malqa"}),
                )
                .await;
            assert_eq!(plan.status, 200, "{}", plan.body);
            plan.body["workflows"]
                .as_array()
                .map(|w| {
                    w.iter()
                        .map(|r| (r["id"].clone(), r["is_archived"].clone()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        }
    };
    // The site's plan keeps the rule, archived: it runs nothing.
    assert_eq!(plan(runner.clone()).await, [(json!(malqa.1), json!(true))]);

    // Another brand's admin naming the archived branch's id is answered as for any id it
    // does not know, and nothing changes.
    let admin_b = f.app.brand_token("B admin", Role::Admin, f.brand_b).await;
    let theirs = export_brand(&f, &admin_b, f.brand_b).await;
    let stranger = |id: Uuid| {
        let mut d = theirs.clone();
        if let Some(b) = d.brand.as_mut() {
            b.branches[0].id = Some(id);
        }
        text_of(&d)
    };
    let before = f.app.fingerprint().await;
    let mut refusals = Vec::new();
    for id in [malqa.0, Uuid::new_v4()] {
        let reply = f
            .app
            .call(
                ConfigApplyRequest::NAME,
                &admin_b,
                json!({"document": stranger(id), "dry_run": true}),
            )
            .await;
        assert_eq!(reply.status, 422, "{}", reply.body);
        refusals.push(
            reply.body["problems"][0]["message"]
                .as_str()
                .map(|m| m.replace(&id.to_string(), "ID")),
        );
    }
    assert_eq!(refusals[0], refusals[1]);
    assert_eq!(f.app.fingerprint().await, before);

    // Revision 1's document applied again: Malqa and its rule are restored.
    let first = f
        .app
        .call(ConfigShowRequest::NAME, &f.admin_a, json!({"revision": 1}))
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let old = document(&first.body);
    let diff = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": text_of(&old), "dry_run": true}),
        )
        .await;
    assert_eq!(diff.status, 200, "{}", diff.body);
    let summary = diff.body["summary"].as_str().unwrap_or_default().to_owned();
    assert!(
        summary.contains("+ branch 'Malqa' (restored: back under its id, with its history)")
            && summary.contains("+ branch rule 'Malqa / Queue length' (restored")
            && summary.contains("2 to create (2 restored)"),
        "{summary}"
    );
    assert_eq!(
        diff.body["diff"]["changes"][0]["restored"], true,
        "{}",
        diff.body
    );
    let rolled = apply(text_of(&old), "reopen Malqa").await;
    assert_eq!(rolled.status, 200, "{}", rolled.body);
    let back: (
        bool,
        bool,
        bool,
        bool,
        Option<chrono::DateTime<chrono::Utc>>,
    ) = sqlx::query_as(
        "SELECT b.is_archived, b.is_active, x.is_archived, x.is_active, x.next_run_time \
         FROM branches b JOIN branch_rules x ON x.branch_id = b.id WHERE x.id = $1",
    )
    .bind(malqa.1)
    .fetch_one(&f.app.pool)
    .await
    .expect("restored");
    assert_eq!((back.0, back.1, back.2, back.3), (false, true, false, true));
    assert!(
        back.4.is_some_and(|next| next > chrono::Utc::now()),
        "scheduled afresh, not overdue: {back:?}"
    );
    assert_eq!(plan(runner).await, [(json!(malqa.1), json!(false))]);
    let exported = export_brand(&f, &f.admin_a, f.brand_a).await;
    let ids: Vec<(String, Option<Uuid>)> = exported
        .brand
        .iter()
        .flat_map(|b| b.branches.iter().map(|x| (x.name.clone(), x.id)))
        .collect();
    assert!(
        ids.contains(&("Malqa".to_owned(), Some(malqa.0))),
        "{ids:?}"
    );
}

/// docs/schedule.md: a window time with a one-digit hour is read as written — `9:00` is
/// `09:00` — and stored and exported as `09:00`, so applying the same document again
/// changes nothing. (The console's form: console.rs; the runner's CLI: next_run_cli.rs.)
#[tokio::test]
async fn a_one_digit_hour_in_a_document_is_stored_and_exported_as_hh_mm() {
    let f = fleet().await;
    let mut doc = export_brand(&f, &f.admin_a, f.brand_a).await;
    doc.base_revision = None;
    if let Some(w) = doc
        .brand
        .as_mut()
        .and_then(|b| b.branches.iter_mut().find(|x| x.name == "Olaya"))
        .and_then(|x| x.rules.get_mut("Queue length"))
        .and_then(|r| r.window.as_mut())
    {
        w.from = "9:00".into();
    }
    let text = text_of(&doc);
    assert!(text.contains("from: \"9:00\""), "{text}");
    for (round, applied) in [(1, true), (2, false)] {
        let reply = f
            .app
            .call(
                ConfigApplyRequest::NAME,
                &f.admin_a,
                json!({"document": text, "message": "nine"}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(
            reply.body["applied"], applied,
            "round {round}: {}",
            reply.body
        );
    }
    let stored: String = sqlx::query_scalar(
        "SELECT operation_time_from::text FROM branch_rules WHERE branch_id = $1",
    )
    .bind(f.branch_a)
    .fetch_one(&f.app.pool)
    .await
    .expect("the window");
    assert_eq!(stored, "09:00:00");
    let exported = export_brand(&f, &f.admin_a, f.brand_a).await;
    let window = exported
        .brand
        .as_ref()
        .and_then(|b| b.branches.iter().find(|x| x.name == "Olaya"))
        .and_then(|x| x.rules.get("Queue length"))
        .and_then(|r| r.window.clone())
        .expect("a window");
    assert_eq!(window.from, "09:00");
}

/// Names are unique ignoring case, so a document may write them in any case: references
/// resolve to what they name and are stored as the catalogue spells them.
#[tokio::test]
async fn names_in_another_case_resolve_to_what_they_name() {
    let f = fleet().await;
    let doc = export_brand(&f, &f.admin_a, f.brand_a).await;
    let text = text_of(&doc)
        .replace("Queue length:", "queue LENGTH:")
        .replace("Queue detector:", "QUEUE detector:");
    assert!(text.contains("queue LENGTH:"), "{text}");
    let reply = f
        .app
        .call(
            ConfigApplyRequest::NAME,
            &f.admin_a,
            json!({"document": text, "dry_run": true}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.body["summary"], "No changes: the document says what is stored.\n",
        "{}",
        reply.body
    );
}
