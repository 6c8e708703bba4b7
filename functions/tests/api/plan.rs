//! `get-execution-plan-v2`: full snapshots, scoping, and exact deltas.

use res_shared::wire::{Call, ClaimRequest, PlanRequest};
use res_tests::functions as support;

use serde_json::{Value, json};
use support::{Reply, RuleSpec, Seed, TestApp};
use uuid::Uuid;

struct World {
    app: TestApp,
    /// In the runner's scope: two rules, one with an action detail.
    branch: Uuid,
    rule_a: Uuid,
    rule_b: Uuid,
    /// Outside it.
    other_branch: Uuid,
    outside_rule: Uuid,
    runner: String,
}

async fn world() -> World {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("Asia/Riyadh").await;
    let branch = seed.branch(brand, Some("Europe/Berlin")).await;
    let other_branch = seed.branch(brand, None).await;
    let rule_a = seed
        .branch_rule(
            branch,
            RuleSpec {
                window: Some(("08:00", "18:00")),
                ..RuleSpec::default()
            },
        )
        .await;
    seed.action_detail(rule_a).await;
    let rule_b = seed.branch_rule(branch, RuleSpec::default()).await;
    let outside_rule = seed.branch_rule(other_branch, RuleSpec::default()).await;
    let runner = app.runner_token(&[branch]).await;
    World {
        app,
        branch,
        rule_a,
        rule_b,
        other_branch,
        outside_rule,
        runner,
    }
}

impl World {
    async fn plan(&self, since: Option<&str>) -> Reply {
        let body = match since {
            Some(cursor) => json!({"runner_id": "site-1", "since": cursor}),
            None => json!({"runner_id": "site-1"}),
        };
        let reply = self.app.call(PlanRequest::NAME, &self.runner, body).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply
    }
}

fn ids(reply: &Reply, field: &str) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = reply.body[field]
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| serde_json::from_value(v.get("id").cloned().unwrap_or(v.clone())).expect("uuid"))
        .collect();
    ids.sort();
    ids
}

fn cursor(reply: &Reply) -> String {
    reply.body["cursor"].as_str().expect("a cursor").to_owned()
}

fn sorted(mut ids: Vec<Uuid>) -> Vec<Uuid> {
    ids.sort();
    ids
}

#[tokio::test]
async fn a_full_plan_holds_the_scope_with_effective_settings_and_lookups() {
    let w = world().await;
    let plan = w.plan(None).await;
    assert_eq!(plan.body["full"], true);
    assert_eq!(ids(&plan, "workflows"), sorted(vec![w.rule_a, w.rule_b]));
    assert_eq!(plan.body["removed"], json!([]));
    let a = plan.body["workflows"]
        .as_array()
        .expect("workflows")
        .iter()
        .find(|wf| wf["id"] == json!(w.rule_a))
        .expect("rule a");
    assert_eq!(
        a["timezone"], "Europe/Berlin",
        "the branch overrides the brand"
    );
    assert_eq!(a["cron_expression"], "*/30 * * * *");
    assert_eq!(a["operation_time_from"], "08:00:00");
    assert_eq!(a["operation_time_to"], "18:00:00");
    assert_eq!(a["is_currently_running"], false);
    assert_eq!(a["workflow_config"]["start_node"], "detect");
    let branch = &plan.body["branches"][w.branch.to_string()];
    assert_eq!(branch["timezone"], "Europe/Berlin");
    assert!(
        plan.body["branches"]
            .get(w.other_branch.to_string())
            .is_none()
    );
    assert_eq!(plan.body["brands"].as_object().map(|m| m.len()), Some(1));
    assert_eq!(plan.body["rules"].as_object().map(|m| m.len()), Some(2));
    let details = plan.body["action_details"].as_object().expect("details");
    assert_eq!(details.len(), 1);
    let detail = details.values().next().expect("one detail");
    assert_eq!(detail["branch_rule_id"], json!(w.rule_a));
    let template =
        &plan.body["action_templates"][detail["action_template_id"].as_str().expect("id")];
    assert_eq!(template["kind"], "detection");

    let everything = w
        .app
        .call(
            PlanRequest::NAME,
            &w.app.service,
            json!({"runner_id": "ops"}),
        )
        .await;
    assert_eq!(
        ids(&everything, "workflows"),
        sorted(vec![w.rule_a, w.rule_b, w.outside_rule])
    );
}

#[tokio::test]
async fn brand_rules_override_the_cron_expression() {
    let w = world().await;
    sqlx::query(
        "WITH br AS (INSERT INTO brand_rules (brand_id, rule_id, cron_expression) \
             SELECT b.brand_id, x.rule_id, '0 9 * * *' FROM branch_rules x \
             JOIN branches b ON b.id = x.branch_id WHERE x.id = $1 RETURNING id) \
         UPDATE branch_rules SET brand_rule_id = (SELECT id FROM br) WHERE id = $1",
    )
    .bind(w.rule_b)
    .execute(&w.app.pool)
    .await
    .expect("brand rule");
    let plan = w.plan(None).await;
    let b = plan.body["workflows"]
        .as_array()
        .expect("workflows")
        .iter()
        .find(|wf| wf["id"] == json!(w.rule_b))
        .expect("rule b")
        .clone();
    assert_eq!(b["cron_expression"], "0 9 * * *");
    assert_eq!(
        plan.body["brand_rules"].as_object().map(|m| m.len()),
        Some(1)
    );
}

#[tokio::test]
async fn an_unchanged_delta_is_empty() {
    let w = world().await;
    let first = w.plan(None).await;
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(delta.body["full"], false);
    assert_eq!(delta.body["workflows"], json!([]));
    assert_eq!(delta.body["removed"], json!([]));
    assert_ne!(cursor(&delta), "");
}

#[tokio::test]
async fn a_delta_carries_exactly_the_changed_rule() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app
        .exec(
            "UPDATE branch_rules SET is_active = false WHERE id = $1",
            &[w.rule_b],
        )
        .await;
    // A change outside the scope is not the runner's business.
    w.app
        .exec(
            "UPDATE branch_rules SET is_active = false WHERE id = $1",
            &[w.outside_rule],
        )
        .await;
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(delta.body["full"], false);
    assert_eq!(ids(&delta, "workflows"), vec![w.rule_b]);
    assert_eq!(delta.body["workflows"][0]["is_active"], false);
    assert_eq!(delta.body["rules"].as_object().map(|m| m.len()), Some(1));
    // And the next delta is empty again.
    let again = w.plan(Some(&cursor(&delta))).await;
    assert_eq!(again.body["workflows"], json!([]));
}

#[tokio::test]
async fn an_action_detail_change_refreshes_its_rule() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app.exec("UPDATE action_details SET config = '{\"camera_ids\": [\"cam-2\"]}' WHERE branch_rule_id = $1", &[w.rule_a]).await;
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(ids(&delta, "workflows"), vec![w.rule_a]);
    let detail = delta.body["action_details"]
        .as_object()
        .and_then(|m| m.values().next().cloned())
        .expect("the detail");
    assert_eq!(detail["config"]["camera_ids"][0], "cam-2");
}

/// The plan-change triggers fire once per statement: every row of a statement that writes
/// many (as a configuration apply does) is recorded, and so is an action detail added or
/// removed.
#[tokio::test]
async fn every_row_of_one_statement_and_action_details_added_or_removed_reach_the_delta() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app
        .exec(
            "UPDATE branch_rules SET jitter_seconds = 5 WHERE id IN ($1, $2, $3)",
            &[w.rule_a, w.rule_b, w.outside_rule],
        )
        .await;
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(delta.body["full"], false);
    assert_eq!(ids(&delta, "workflows"), sorted(vec![w.rule_a, w.rule_b]));

    // A second detail with the template rule A's uses (a new template would be a shared
    // change: a full plan).
    w.app
        .exec(
            "INSERT INTO action_details (branch_rule_id, action_template_id, config) \
             SELECT $2, action_template_id, config FROM action_details WHERE branch_rule_id = $1",
            &[w.rule_a, w.rule_b],
        )
        .await;
    let after_insert = w.plan(Some(&cursor(&delta))).await;
    assert_eq!(after_insert.body["full"], false);
    assert_eq!(ids(&after_insert, "workflows"), vec![w.rule_b]);
    assert_eq!(
        after_insert.body["action_details"]
            .as_object()
            .map(|details| details.len()),
        Some(1)
    );

    w.app
        .exec(
            "DELETE FROM action_details WHERE branch_rule_id = $1",
            &[w.rule_a],
        )
        .await;
    let after_delete = w.plan(Some(&cursor(&after_insert))).await;
    assert_eq!(after_delete.body["full"], false);
    assert_eq!(ids(&after_delete, "workflows"), vec![w.rule_a]);
    assert_eq!(after_delete.body["action_details"], json!({}));
}

#[tokio::test]
async fn deleted_and_moved_out_rules_are_removed() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app
        .exec("DELETE FROM branch_rules WHERE id = $1", &[w.rule_a])
        .await;
    w.app
        .exec(
            "UPDATE branch_rules SET branch_id = $2 WHERE id = $1",
            &[w.rule_b, w.other_branch],
        )
        .await;
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(delta.body["full"], false);
    assert_eq!(delta.body["workflows"], json!([]));
    assert_eq!(ids(&delta, "removed"), sorted(vec![w.rule_a, w.rule_b]));
}

#[tokio::test]
async fn a_rule_moved_into_scope_arrives() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app
        .exec(
            "UPDATE branch_rules SET branch_id = $2 WHERE id = $1",
            &[w.outside_rule, w.branch],
        )
        .await;
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(ids(&delta, "workflows"), vec![w.outside_rule]);
}

#[tokio::test]
async fn a_branch_change_refreshes_all_its_rules() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app
        .exec(
            "UPDATE branches SET timezone = 'Asia/Kolkata' WHERE id = $1",
            &[w.branch],
        )
        .await;
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(delta.body["full"], false);
    assert_eq!(ids(&delta, "workflows"), sorted(vec![w.rule_a, w.rule_b]));
    assert!(
        delta.body["workflows"]
            .as_array()
            .expect("workflows")
            .iter()
            .all(|wf| wf["timezone"] == "Asia/Kolkata")
    );
}

#[tokio::test]
async fn a_delta_says_of_each_rule_exactly_what_a_full_plan_says() {
    let w = world().await;
    let first = w.plan(None).await;
    // A run requested, a paused and a running rule, a window: every field with a value.
    w.app
        .exec(
            "UPDATE branch_rules SET run_requested_at = now(), paused_at = now(), \
             last_run_time = now() - interval '1 hour', run_count = 3 WHERE id = $1",
            &[w.rule_a],
        )
        .await;
    w.app.claim(&w.runner, w.rule_b, "site-1").await;
    w.app
        .exec(
            "UPDATE branches SET name = 'Olaya' WHERE id = $1",
            &[w.branch],
        )
        .await;
    let delta = w.plan(Some(&cursor(&first))).await;
    let full = w.plan(None).await;
    assert_eq!(delta.body["full"], false);
    let by_id = |reply: &Reply| -> Vec<Value> {
        let mut workflows = reply.body["workflows"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        workflows.sort_by_key(|w| w["id"].as_str().unwrap_or_default().to_owned());
        workflows
    };
    assert_eq!(by_id(&delta), by_id(&full));
    for lookup in [
        "branches",
        "rules",
        "brands",
        "brand_rules",
        "action_details",
        "action_templates",
    ] {
        assert_eq!(delta.body[lookup], full.body[lookup], "{lookup}");
    }
}

#[tokio::test]
async fn a_shared_definition_change_sends_a_full_plan() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app
        .exec("UPDATE rules SET cron_expression = '0 * * * *'", &[])
        .await;
    let next = w.plan(Some(&cursor(&first))).await;
    assert_eq!(next.body["full"], true);
    assert_eq!(ids(&next, "workflows"), sorted(vec![w.rule_a, w.rule_b]));
}

#[tokio::test]
async fn a_change_of_scope_sends_a_full_plan() {
    let w = world().await;
    let first = w.plan(None).await;
    w.app
        .exec(
            "UPDATE api_keys SET branch_ids = ARRAY[$1, $2]::uuid[] WHERE role = 'runner'",
            &[w.branch, w.other_branch],
        )
        .await;
    let next = w.plan(Some(&cursor(&first))).await;
    assert_eq!(next.body["full"], true);
    assert_eq!(
        ids(&next, "workflows"),
        sorted(vec![w.rule_a, w.rule_b, w.outside_rule])
    );
}

#[tokio::test]
async fn an_expired_lease_shows_as_not_running_in_the_next_delta() {
    expired_lease_in_a_delta(world().await).await;
}

#[tokio::test]
async fn an_expired_lease_shows_in_the_delta_of_a_key_with_many_branches_too() {
    // A scope this large reads the live executions instead of probing each rule.
    let mut w = world().await;
    let seed = Seed::new(&w.app.pool);
    let brand: Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(w.branch)
        .fetch_one(&w.app.pool)
        .await
        .expect("brand");
    let mut branches = vec![w.branch];
    for _ in 0..9 {
        branches.push(seed.branch(brand, None).await);
    }
    w.runner = w.app.runner_token(&branches).await;
    expired_lease_in_a_delta(w).await;
}

async fn expired_lease_in_a_delta(w: World) {
    sqlx::query(
        "UPDATE branch_rules SET next_run_time = now() - interval '1 minute' WHERE id = $1",
    )
    .bind(w.rule_b)
    .execute(&w.app.pool)
    .await
    .expect("due");
    let claim = w
        .app
        .call(
            ClaimRequest::NAME,
            &w.runner,
            json!({"branch_rule_id": w.rule_b, "runner_id": "site-1", "lease_seconds": 1}),
        )
        .await;
    assert_eq!(claim.status, 200, "{}", claim.body);
    let running = w.plan(None).await;
    let b = |reply: &Reply| -> Value {
        reply.body["workflows"]
            .as_array()
            .and_then(|wfs| wfs.iter().find(|wf| wf["id"] == json!(w.rule_b)).cloned())
            .unwrap_or(Value::Null)
    };
    assert_eq!(b(&running)["is_currently_running"], true);
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    // Nothing was written, yet the rule is no longer running.
    let delta = w.plan(Some(&cursor(&running))).await;
    assert_eq!(delta.body["full"], false);
    assert_eq!(ids(&delta, "workflows"), vec![w.rule_b]);
    assert_eq!(b(&delta)["is_currently_running"], false);
}

#[tokio::test]
async fn a_transaction_committing_after_the_cursor_is_not_missed() {
    let w = world().await;
    // A slow writer starts before the plan is read and commits after it.
    let mut slow = w.app.pool.begin().await.expect("begin");
    sqlx::query("UPDATE branch_rules SET is_force_stopped = true WHERE id = $1")
        .bind(w.rule_a)
        .execute(&mut *slow)
        .await
        .expect("update");
    let first = w.plan(None).await;
    let stopped = |reply: &Reply| {
        reply.body["workflows"]
            .as_array()
            .and_then(|wfs| wfs.iter().find(|wf| wf["id"] == json!(w.rule_a)).cloned())
            .map(|wf| wf["is_force_stopped"].clone())
    };
    assert_eq!(stopped(&first), Some(json!(false)), "not committed yet");
    slow.commit().await.expect("commit");
    let delta = w.plan(Some(&cursor(&first))).await;
    assert_eq!(ids(&delta, "workflows"), vec![w.rule_a]);
    assert_eq!(stopped(&delta), Some(json!(true)));
}

#[tokio::test]
async fn stale_or_foreign_cursors_fall_back_to_full_and_garbage_is_refused() {
    let w = world().await;
    let service_plan = w
        .app
        .call(
            PlanRequest::NAME,
            &w.app.service,
            json!({"runner_id": "ops"}),
        )
        .await;
    // A cursor read with another scope is not valid for this runner.
    let next = w.plan(Some(&cursor(&service_plan))).await;
    assert_eq!(next.body["full"], true);
    let garbage = w
        .app
        .call(
            PlanRequest::NAME,
            &w.runner,
            json!({"runner_id": "site-1", "since": "nonsense"}),
        )
        .await;
    assert_eq!(garbage.status, 400);
    assert_eq!(garbage.body["error"]["code"], "invalid_cursor");
    let empty_runner = w
        .app
        .call(PlanRequest::NAME, &w.runner, json!({"runner_id": ""}))
        .await;
    assert_eq!(empty_runner.status, 422);
}

#[tokio::test]
async fn the_plan_is_gzipped_for_clients_that_accept_it() {
    let w = world().await;
    res_tests::functions::install_tls();
    let response = reqwest::Client::builder()
        .no_gzip()
        .build()
        .expect("client")
        .post(format!("{}{}", w.app.base, PlanRequest::path()))
        .bearer_auth(&w.runner)
        .header("accept-encoding", "gzip")
        .json(&json!({"runner_id": "site-1"}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-encoding")
            .and_then(|v| v.to_str().ok()),
        Some("gzip")
    );
    let compressed = response.bytes().await.expect("body");
    let mut json = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&compressed[..]),
        &mut json,
    )
    .expect("valid gzip");
    let plan: Value = serde_json::from_str(&json).expect("JSON inside");
    assert_eq!(plan["full"], true);
}

/// The plan in `format`, read back as a runner reads it, as JSON to compare.
async fn typed_plan(w: &World, since: Option<&str>, format: Option<u32>) -> (Value, usize) {
    let mut body = json!({"runner_id": "site-1", "since": since});
    if let Some(format) = format {
        body["format"] = format.into();
    }
    let reply = w.app.call(PlanRequest::NAME, &w.runner, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let text = reply.body.to_string();
    let plan: res_shared::wire::PlanResponse = serde_json::from_str(&text).expect("a plan");
    let mut value = serde_json::to_value(&plan).expect("JSON");
    // Answers made a moment apart differ in their time and cursor only.
    for volatile in ["generated_at", "cursor"] {
        value[volatile] = Value::Null;
    }
    if let Some(workflows) = value["workflows"].as_array_mut() {
        workflows.sort_by_key(|w| w["id"].as_str().unwrap_or_default().to_owned());
    }
    (value, text.len())
}

#[tokio::test]
async fn every_format_says_what_the_first_says_in_full_and_in_a_delta() {
    let w = world().await;
    let seed = Seed::new(&w.app.pool);
    // Every value the window allows, 24:00 included, through both formats.
    let all_day = seed
        .branch_rule(
            w.branch,
            RuleSpec {
                window: Some(("00:00", "24:00")),
                ..RuleSpec::default()
            },
        )
        .await;
    let first = w.plan(None).await;
    let (plain, plain_bytes) = typed_plan(&w, None, None).await;
    let (shared, shared_bytes) = typed_plan(&w, None, Some(2)).await;
    let (columns, columns_bytes) = typed_plan(&w, None, Some(3)).await;
    assert_eq!(
        plain, shared,
        "a full plan reads the same in formats 1 and 2"
    );
    assert_eq!(
        plain, columns,
        "a full plan reads the same in formats 1 and 3"
    );
    assert!(shared_bytes < plain_bytes, "{shared_bytes} < {plain_bytes}");
    assert!(
        columns_bytes < shared_bytes,
        "{columns_bytes} < {shared_bytes}"
    );
    let ids: Vec<&str> = shared["workflows"]
        .as_array()
        .expect("workflows")
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert!(ids.contains(&all_day.to_string().as_str()));
    assert!(
        !ids.contains(&w.outside_rule.to_string().as_str()),
        "another branch's rule stays out in format 2 too"
    );

    w.app
        .exec(
            "UPDATE branch_rules SET run_requested_at = now(), paused_at = now(), \
             last_run_time = now() - interval '1 hour', run_count = 3 WHERE id = $1",
            &[w.rule_a],
        )
        .await;
    w.app.claim(&w.runner, all_day, "site-1").await;
    let since = cursor(&first);
    let (plain_delta, _) = typed_plan(&w, Some(&since), None).await;
    let (shared_delta, _) = typed_plan(&w, Some(&since), Some(2)).await;
    let (columns_delta, _) = typed_plan(&w, Some(&since), Some(3)).await;
    assert_eq!(plain_delta["full"], false);
    assert_eq!(
        plain_delta, shared_delta,
        "a delta reads the same in formats 1 and 2"
    );
    assert_eq!(
        plain_delta, columns_delta,
        "a delta reads the same in formats 1 and 3"
    );
    let window = |plan: &Value| {
        plan["workflows"]
            .as_array()
            .expect("workflows")
            .iter()
            .find(|e| e["id"] == all_day.to_string())
            .map(|e| {
                (
                    e["operation_time_from"].clone(),
                    e["operation_time_to"].clone(),
                )
            })
    };
    let all_day_window = window(&shared_delta);
    assert!(
        all_day_window
            .as_ref()
            .is_some_and(|(_, to)| to.is_string()),
        "the 24:00 rule is in the delta with its window: {shared_delta}"
    );
    assert_eq!(all_day_window, window(&plain_delta));
    assert_eq!(all_day_window, window(&columns_delta));

    for format in [0, 5] {
        let refused = w
            .app
            .call(
                PlanRequest::NAME,
                &w.runner,
                json!({"runner_id": "site-1", "format": format}),
            )
            .await;
        assert_eq!(refused.status, 422, "{}", refused.body);
        assert!(
            refused.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("format"))
        );
    }
}
