//! Configuring from nothing without SQL: the catalogue applied by a platform-wide key, a new
//! brand made by applying its document, rules archived only when no brand uses them, and
//! a moved default schedule moving the next runs of the branch rules that follow it.

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::Call;
use res_shared::wire::{
    ConfigApplyRequest, ConfigExportRequest, ConfigHistoryRequest, ConfigShowRequest,
    ShowExecutionRequest,
};
use res_tests::functions::TestApp;
use serde_json::{Value, json};
use uuid::Uuid;

const CATALOGUE: &str = include_str!("../../../docs/config/catalogue.yaml");
const BRAND: &str = include_str!("../../../docs/config/brand.yaml");

struct Platform {
    app: TestApp,
    platform: String,
}

async fn platform() -> Platform {
    let app = TestApp::start().await;
    let platform = app.all_brands_token("platform", Role::Admin).await;
    Platform { app, platform }
}

impl Platform {
    async fn apply(&self, token: &str, document: &str, extra: Value) -> Value {
        let mut body = json!({"document": document, "message": "by a test"});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let reply = self.app.call(ConfigApplyRequest::NAME, token, body).await;
        json!({"status": reply.status, "body": reply.body})
    }

    async fn applied(&self, document: &str) -> Value {
        let reply = self.apply(&self.platform, document, json!({})).await;
        assert_eq!(reply["status"], 200, "{reply}");
        assert_eq!(reply["body"]["applied"], true, "{reply}");
        reply["body"].clone()
    }

    async fn export(&self, scope: Value) -> res_config::Document {
        let reply = self
            .app
            .call(ConfigExportRequest::NAME, &self.platform, scope)
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        serde_json::from_value(reply.body["document"].clone()).expect("a document")
    }

    /// The catalogue and the example brand applied; answers the brand's id.
    async fn configured(&self) -> Uuid {
        self.applied(CATALOGUE).await;
        let created = self.applied(BRAND).await;
        assert!(
            created["summary"]
                .as_str()
                .is_some_and(|s| s.contains("+ brand 'Demo Retail'")),
            "{created}"
        );
        sqlx::query_scalar("SELECT id FROM brands WHERE name = 'Demo Retail'")
            .fetch_one(&self.app.pool)
            .await
            .expect("the brand")
    }
}

fn yaml(document: &res_config::Document) -> String {
    res_config::to_yaml(document, "edited by a test").expect("yaml")
}

#[tokio::test]
async fn the_catalogue_and_a_new_brand_are_configured_from_nothing_and_export_round_trips() {
    let p = platform().await;
    let brand = p.configured().await;
    let rows: (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM action_templates), (SELECT count(*) FROM rules), \
                (SELECT count(*) FROM branches WHERE brand_id = $1), \
                (SELECT count(*) FROM branch_rules x JOIN branches b ON b.id = x.branch_id \
                 WHERE b.brand_id = $1 AND x.next_run_time IS NOT NULL)",
    )
    .bind(brand)
    .fetch_one(&p.app.pool)
    .await
    .expect("counts");
    assert_eq!(rows, (4, 2, 2, 3));

    // The workflow is stored as the runner reads it: templates by id.
    let stored: Value = sqlx::query_scalar(
        "SELECT c.workflow_config FROM action_template_connections c JOIN rules r ON r.id = c.rule_id \
         WHERE r.name = 'Queue length'",
    )
    .fetch_one(&p.app.pool)
    .await
    .expect("workflow");
    let detector: Uuid =
        sqlx::query_scalar("SELECT id FROM action_templates WHERE name = 'Queue detector'")
            .fetch_one(&p.app.pool)
            .await
            .expect("template");
    assert_eq!(
        stored["nodes"]["detect"]["action_template_id"],
        detector.to_string()
    );

    // Export, then apply: nothing changes, and no revision is made.
    for scope in [json!({"catalogue": true}), json!({"brand_id": brand})] {
        let exported = p.export(scope.clone()).await;
        let reply = p.applied_or_not(&yaml(&exported)).await;
        assert_eq!(reply["applied"], false, "{scope}: {reply}");
        assert!(
            reply["summary"]
                .as_str()
                .is_some_and(|s| s.starts_with("No changes")),
            "{scope}: {reply}"
        );
    }
    let revisions: i64 = sqlx::query_scalar("SELECT count(*) FROM config_revisions")
        .fetch_one(&p.app.pool)
        .await
        .expect("revisions");
    assert_eq!(revisions, 2, "one for the catalogue, one for the brand");
    let history = p
        .app
        .call(
            ConfigHistoryRequest::NAME,
            &p.platform,
            json!({"catalogue": true}),
        )
        .await;
    assert_eq!(history.body["revisions"][0]["message"], "by a test");
}

impl Platform {
    async fn applied_or_not(&self, document: &str) -> Value {
        let reply = self.apply(&self.platform, document, json!({})).await;
        assert_eq!(reply["status"], 200, "{reply}");
        reply["body"].clone()
    }
}

#[tokio::test]
async fn only_a_platform_key_applies_the_catalogue_or_makes_a_brand_and_names_find_brands() {
    let p = platform().await;
    let brand = p.configured().await;
    let admin = p
        .app
        .token(
            "brand admin",
            Role::Admin,
            &KeyScope {
                brand_ids: vec![brand],
                ..KeyScope::default()
            },
        )
        .await;
    let before = p.app.fingerprint().await;
    let reply = p.apply(&admin, CATALOGUE, json!({})).await;
    assert_eq!(reply["status"], 403, "{reply}");
    let new_brand = BRAND.replace("Demo Retail", "Another Retail");
    let reply = p.apply(&admin, &new_brand, json!({})).await;
    assert_eq!(reply["status"], 404, "{reply}");
    assert_eq!(
        reply["body"]["error"]["message"],
        "brand 'Another Retail' not found (brand.name names a brand of your key; new brands are made with a platform-wide key)"
    );
    // Named by name, the brand admin's own brand is found; the same document is no change.
    for token in [&admin, &p.platform] {
        let reply = p.apply(token, BRAND, json!({})).await;
        assert_eq!(reply["status"], 200, "{reply}");
        assert_eq!(reply["body"]["applied"], false, "{reply}");
    }
    // A dry run of a new brand shows it and makes nothing.
    let reply = p
        .apply(&p.platform, &new_brand, json!({"dry_run": true}))
        .await;
    assert_eq!(reply["status"], 200, "{reply}");
    assert_eq!(reply["body"]["applied"], false, "{reply}");
    assert!(
        reply["body"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("+ brand 'Another Retail'")),
        "{reply}"
    );
    // Both at once is two owners' work.
    let both = format!(
        "{CATALOGUE}\n{}",
        BRAND.replace("# yaml-language-server: $schema=./schema.json", "")
    );
    let reply = p.apply(&p.platform, &both, json!({})).await;
    assert_eq!(reply["status"], 422, "{reply}");
    assert_eq!(p.app.fingerprint().await, before);
}

#[tokio::test]
async fn what_a_brand_uses_stays_and_what_none_uses_is_archived_or_pruned() {
    let p = platform().await;
    p.configured().await;
    let mut catalogue = p.export(json!({"catalogue": true})).await;
    let as_exported = catalogue.clone();
    let before = p.app.fingerprint().await;

    // Dropping a rule the brand runs (and the templates its branches set) is refused.
    let mut dropped = catalogue.clone();
    if let Some(c) = dropped.catalogue.as_mut() {
        c.rules.retain(|r| r.name != "Queue length");
        c.action_templates.retain(|t| t.name != "Queue detector");
    }
    for extra in [json!({}), json!({"prune": true}), json!({"dry_run": true})] {
        let reply = p.apply(&p.platform, &yaml(&dropped), extra.clone()).await;
        assert_eq!(reply["status"], 409, "{extra}: {reply}");
        assert_eq!(reply["body"]["error"]["code"], "in_use", "{reply}");
        let message = reply["body"]["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains("rule 'Queue length' is used by 1 brand rule(s) and 2 branch rule(s)"),
            "{message}"
        );
        assert!(
            message.contains("action template 'Queue detector' has settings at 2 branch rule(s)"),
            "{message}"
        );
        assert!(!message.contains("Demo Retail"), "{message}");
    }
    assert_eq!(p.app.fingerprint().await, before);

    // A template no rule and no branch uses is archived: out of the export, its row kept.
    if let Some(c) = catalogue.catalogue.as_mut() {
        c.action_templates.retain(|t| t.name != "Tell the manager");
        if let Some(rule) = c.rules.iter_mut().find(|r| r.name == "Queue length") {
            rule.workflow.nodes.remove("tell");
            rule.workflow.edges.retain(|e| e.to != "tell");
        }
    }
    let reply = p.applied(&yaml(&catalogue)).await;
    assert!(
        reply["summary"]
            .as_str()
            .is_some_and(|s| s.contains("- action template 'Tell the manager' (archived")),
        "{reply}"
    );
    let exported = p.export(json!({"catalogue": true})).await;
    let names: Vec<String> = exported
        .catalogue
        .iter()
        .flat_map(|c| c.action_templates.iter().map(|t| t.name.clone()))
        .collect();
    assert!(!names.contains(&"Tell the manager".to_owned()), "{names:?}");
    let kept: (i64, bool) = sqlx::query_as(
        "SELECT count(*), bool_and(is_archived) FROM action_templates WHERE name = 'Tell the manager'",
    )
    .fetch_one(&p.app.pool)
    .await
    .expect("archived row");
    assert_eq!(kept, (1, true));

    // Rolling back to the export before: the template comes back under its id.
    let archived_id = as_exported
        .catalogue
        .iter()
        .flat_map(|c| c.action_templates.iter())
        .find(|t| t.name == "Tell the manager")
        .and_then(|t| t.id);
    let mut rollback = as_exported.clone();
    rollback.base_revision = None;
    let reply = p.applied(&yaml(&rollback)).await;
    assert!(
        reply["summary"].as_str().is_some_and(|s| s.contains(
            "+ action template 'Tell the manager' (restored: back under its id, with its history)"
        )),
        "{reply}"
    );
    let back: (Option<Uuid>, bool) = sqlx::query_as(
        "SELECT id, is_archived FROM action_templates WHERE name = 'Tell the manager'",
    )
    .fetch_one(&p.app.pool)
    .await
    .expect("the template");
    assert_eq!(back, (archived_id, false));

    // Once the brand has let go of a rule, prune deletes it and its template for good.
    let id: Uuid = sqlx::query_scalar("SELECT id FROM brands")
        .fetch_one(&p.app.pool)
        .await
        .expect("brand");
    let mut brand = p.export(json!({"brand_id": id})).await;
    if let Some(b) = brand.brand.as_mut() {
        b.rules.remove("Empty shelves");
        for branch in &mut b.branches {
            branch.rules.remove("Empty shelves");
        }
    }
    let reply = p
        .apply(&p.platform, &yaml(&brand), json!({"prune": true}))
        .await;
    assert_eq!(reply["status"], 200, "{reply}");
    let mut catalogue = p.export(json!({"catalogue": true})).await;
    if let Some(c) = catalogue.catalogue.as_mut() {
        c.rules.retain(|r| r.name != "Empty shelves");
        c.action_templates.retain(|t| t.name != "Shelf detector");
    }
    let reply = p
        .apply(&p.platform, &yaml(&catalogue), json!({"prune": true}))
        .await;
    assert_eq!(reply["status"], 200, "{reply}");
    assert!(
        reply["body"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("- rule 'Empty shelves' (deleted")),
        "{reply}"
    );
    let left: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM rules WHERE name = 'Empty shelves'), \
                (SELECT count(*) FROM action_templates WHERE name = 'Shelf detector')",
    )
    .fetch_one(&p.app.pool)
    .await
    .expect("counts");
    assert_eq!(left, (0, 0));
}

#[tokio::test]
async fn a_moved_default_schedule_moves_the_next_runs_of_the_branch_rules_that_follow_it() {
    let p = platform().await;
    p.configured().await;
    let next_runs = || async {
        let rows: Vec<(String, Option<chrono::DateTime<chrono::Utc>>)> = sqlx::query_as(
            "SELECT b.name, x.next_run_time FROM branch_rules x JOIN branches b ON b.id = x.branch_id \
             JOIN rules r ON r.id = x.rule_id WHERE r.name = $1 ORDER BY b.name",
        )
        .bind("Empty shelves")
        .fetch_all(&p.app.pool)
        .await
        .expect("next runs");
        rows
    };
    let before = next_runs().await;
    assert_eq!(before.len(), 1);
    let mut catalogue = p.export(json!({"catalogue": true})).await;
    if let Some(rule) = catalogue
        .catalogue
        .as_mut()
        .and_then(|c| c.rules.iter_mut().find(|r| r.name == "Empty shelves"))
    {
        rule.schedule = Some("*/7 * * * *".into());
    }
    let from = chrono::Utc::now();
    let reply = p.applied(&yaml(&catalogue)).await;
    let to = chrono::Utc::now();
    assert!(
        reply["summary"]
            .as_str()
            .is_some_and(|s| s.contains("*/7 * * * *")),
        "{reply}"
    );
    // Empty shelves runs 06:00-23:00 at Riyadh Olaya; the apply computed its next run on the
    // new schedule at some instant between `from` and `to`.
    let schedule = res_shared::schedule::Schedule::parse(
        "*/7 * * * *",
        Some("06:00"),
        Some("23:00"),
        Some("Asia/Riyadh"),
    )
    .expect("schedule");
    let expected: Vec<_> = [from, to]
        .iter()
        .map(|at| schedule.next_run(*at, false).expect("next").next_run_time)
        .collect();
    let after = next_runs().await;
    let next = after[0].1.expect("a next run");
    assert!(expected.contains(&next), "{next} not in {expected:?}");
    // The old hourly schedule would have said otherwise (unless both agree by chance).
    assert!(before[0].1.is_some());
}

#[tokio::test]
async fn the_demo_documents_apply_and_the_rule_that_never_fires_is_warned_about() {
    let p = platform().await;
    p.applied(include_str!("../../../infra/local/demo/catalogue.yaml"))
        .await;
    let reply = p
        .applied(include_str!("../../../infra/local/demo/brand.yaml"))
        .await;
    assert_eq!(
        reply["warnings"][0]["path"], "brand.branches[1].rules[\"Morning stock count\"]",
        "{reply}"
    );
    let rules: i64 = sqlx::query_scalar("SELECT count(*) FROM branch_rules")
        .fetch_one(&p.app.pool)
        .await
        .expect("count");
    assert_eq!(rules, 8);
    // Export, then apply: the demo's configuration round-trips with no change.
    let brand: Uuid = sqlx::query_scalar("SELECT id FROM brands")
        .fetch_one(&p.app.pool)
        .await
        .expect("the demo brand");
    for scope in [json!({"catalogue": true}), json!({"brand_id": brand})] {
        let exported = p.export(scope.clone()).await;
        let reply = p.applied_or_not(&yaml(&exported)).await;
        assert_eq!(reply["applied"], false, "{scope}: {reply}");
    }
}

#[tokio::test]
async fn an_execution_says_which_configuration_revisions_it_ran_with() {
    let p = platform().await;
    let brand = p.configured().await;
    let mut edited = p.export(json!({"brand_id": brand})).await;
    if let Some(rule) = edited
        .brand
        .as_mut()
        .and_then(|b| b.branches.iter_mut().find(|b| b.name == "Riyadh Olaya"))
        .and_then(|b| b.rules.get_mut("Queue length"))
    {
        // All day, so it may be claimed whenever the test runs.
        rule.window = None;
    }
    let third = p.applied(&yaml(&edited)).await;
    assert_eq!(third["revision"], 3, "{third}");
    let (rule, branch): (Uuid, Uuid) = sqlx::query_as(
        "UPDATE branch_rules x SET next_run_time = now() - interval '1 second' FROM branches b \
         WHERE b.id = x.branch_id AND b.name = 'Riyadh Olaya' \
           AND x.rule_id = (SELECT id FROM rules WHERE name = 'Queue length') \
         RETURNING x.id, b.id",
    )
    .fetch_one(&p.app.pool)
    .await
    .expect("a due rule");
    let runner = p.app.runner_token(&[branch]).await;
    let claim = p.app.claim(&runner, rule, "site-1").await;
    let shown = p
        .app
        .call(
            ShowExecutionRequest::NAME,
            &p.platform,
            json!({"execution_id": claim.execution}),
        )
        .await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert_eq!(shown.body["config_revision"], 3, "{}", shown.body);
    assert_eq!(shown.body["catalogue_revision"], 1, "{}", shown.body);
    let detail: res_shared::wire::ExecutionDetail =
        serde_json::from_value(shown.body).expect("a detail");
    assert_eq!(
        detail.configuration(),
        "brand revision 3, catalogue revision 1"
    );
}

/// A revision records the brand as it is stored — made from the applied document and the
/// ids the apply gave, before the branch rules are written — so it must be exactly what
/// export reads back, ids included: after creating a brand and after an edit that adds,
/// leaves out and changes branches and branch rules.
#[tokio::test]
async fn each_revision_holds_the_brand_exactly_as_export_reads_it_back() {
    use res_config::generate::{brand_text, catalogue_text};
    let p = platform().await;
    p.applied(&catalogue_text(3)).await;
    let created = p
        .applied(&brand_text("Generated", "Asia/Riyadh", 4, 3))
        .await;
    let brand: Uuid = sqlx::query_scalar("SELECT id FROM brands WHERE name = 'Generated'")
        .fetch_one(&p.app.pool)
        .await
        .expect("the brand");
    p.revision_is_the_export(&created, brand).await;

    let mut edited = p.export(json!({"brand_id": brand})).await;
    if let Some(b) = edited.brand.as_mut() {
        b.zone = "Asia/Dubai".into();
        b.branches.remove(1);
        let mut added = b.branches[0].clone();
        added.id = None;
        added.name = "Aardvark".into();
        for rule in added.rules.values_mut() {
            rule.id = None;
        }
        b.branches.push(added);
        b.branches[0].rules.remove("Rule 1");
        if let Some(window) = b.branches[0]
            .rules
            .get_mut("Rule 0")
            .and_then(|r| r.window.as_mut())
        {
            window.to = "24:00".into();
        }
    }
    let changed = p.applied(&yaml(&edited)).await;
    p.revision_is_the_export(&changed, brand).await;

    // The demo's documents, on their own catalogue.
    let p = platform().await;
    let demo = p.configured().await;
    let demo_revision: i64 =
        sqlx::query_scalar("SELECT max(id) FROM config_revisions WHERE brand_id = $1")
            .bind(demo)
            .fetch_one(&p.app.pool)
            .await
            .expect("the demo's revision");
    p.revision_is_the_export(&json!({"revision": demo_revision}), demo)
        .await;
}

impl Platform {
    async fn revision_is_the_export(&self, applied: &Value, brand: Uuid) {
        let shown = self
            .app
            .call(
                ConfigShowRequest::NAME,
                &self.platform,
                json!({"revision": applied["revision"]}),
            )
            .await;
        assert_eq!(shown.status, 200, "{}", shown.body);
        let recorded: res_config::Document =
            serde_json::from_value(shown.body["document"].clone()).expect("a document");
        let exported = self.export(json!({"brand_id": brand})).await;
        // Export lists branches in the database's collation; the revision in code points.
        let by_name = |document: res_config::Document| {
            let mut brand = document.brand.expect("a brand");
            brand.branches.sort_by(|a, b| a.name.cmp(&b.name));
            serde_json::to_value(brand).expect("json")
        };
        assert_eq!(by_name(recorded), by_name(exported));
    }
}
