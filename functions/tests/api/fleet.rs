//! The fleet reads over real HTTP and PostgreSQL: the runner registry (fed by register,
//! plan fetches and heartbeats), rules with their condition, violations, and the same walls
//! between brands as every other operator function.

use chrono::TimeDelta;
use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::{
    AcknowledgeRequest, Call, DescribeRuleRequest, FleetSummaryRequest, HeartbeatRequest,
    KeyListRequest, PauseRuleRequest, PlanRequest, RegisterRequest, RuleListRequest,
    RunnerListRequest, ViolationListRequest, ViolationRequest,
};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

/// Two brands, each with a named branch, two rules, a runner key and an operator.
struct Fleet {
    app: TestApp,
    a: Tenant,
    b: Tenant,
}

struct Tenant {
    brand: Uuid,
    branch: Uuid,
    queue: Uuid,
    stock: Uuid,
    runner: String,
    operator: String,
}

async fn tenant(app: &TestApp, name: &str) -> Tenant {
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("Asia/Riyadh").await;
    let branch = seed.branch(brand, None).await;
    let due = Some(app.db_now().await - TimeDelta::minutes(1));
    let spec = || RuleSpec {
        next_run_time: due,
        ..RuleSpec::default()
    };
    let queue = seed.branch_rule(branch, spec()).await;
    let stock = seed.branch_rule(branch, spec()).await;
    sqlx::query("UPDATE branches SET name = $2 WHERE id = $1")
        .bind(branch)
        .bind(format!("{name} Olaya"))
        .execute(&app.pool)
        .await
        .expect("branch name");
    for (rule, rule_name) in [(queue, "Queue length"), (stock, "Stock count")] {
        seed.name_rule(rule, rule_name).await;
    }
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    Tenant {
        brand,
        branch,
        queue,
        stock,
        runner: app
            .token(
                &format!("{name} site"),
                Role::Runner,
                &KeyScope {
                    branch_ids: vec![branch],
                    ..KeyScope::default()
                },
            )
            .await,
        operator: app
            .token(&format!("{name} admin"), Role::Operator, &scope)
            .await,
    }
}

async fn fleet() -> Fleet {
    let app = TestApp::start().await;
    let a = tenant(&app, "A").await;
    let b = tenant(&app, "B").await;
    Fleet { app, a, b }
}

fn names<'a>(rows: &'a Value, field: &str) -> Vec<&'a str> {
    rows.as_array()
        .map(|rows| rows.iter().filter_map(|r| r[field].as_str()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_registry_hears_register_plan_fetches_and_heartbeats_and_judges_silence() {
    let f = fleet().await;
    let app = &f.app;
    let registered = app
        .call(
            RegisterRequest::NAME,
            &f.a.runner,
            json!({"runner_id": "olaya-1", "boot_id": "boot-1", "version": "0.1.0"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    let plan = app
        .call(
            PlanRequest::NAME,
            &f.a.runner,
            json!({"runner_id": "olaya-1", "health": {
                "outbox_depth": 3,
                "last_outage": {"started_at": "2026-11-20T10:00:00Z", "ended_at": "2026-11-20T10:05:00Z"}
            }}),
        )
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);

    let listed = app
        .call(RunnerListRequest::NAME, &f.a.operator, json!({}))
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let runners = listed.body["runners"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(runners.len(), 1, "{}", listed.body);
    let runner = &runners[0];
    assert_eq!(runner["runner_id"], "olaya-1");
    assert_eq!(runner["key_name"], "A site");
    assert_eq!(runner["version"], "0.1.0");
    assert_eq!(runner["boot_id"], "boot-1");
    assert_eq!(runner["state"], "alive");
    assert_eq!(runner["outbox_depth"], 3);
    assert_eq!(runner["offline_since"], Value::Null);
    assert_eq!(
        runner["last_outage"],
        json!({"started_at": "2026-11-20T10:00:00Z", "ended_at": "2026-11-20T10:05:00Z"})
    );
    assert_eq!(
        runner["branches"],
        json!([{"branch_id": f.a.branch, "branch_name": "A Olaya", "offline_owner": false}])
    );
    assert!(runner["last_plan_at"].is_string() && runner["booted_at"].is_string());

    // A heartbeat counts as being seen: silence is measured from it.
    let claim = app.claim(&f.a.runner, f.a.queue, "olaya-1").await;
    sqlx::query("UPDATE runners SET last_seen_at = now() - interval '10 minutes'")
        .execute(&app.pool)
        .await
        .expect("age the runner");
    let stale = app
        .call(
            RunnerListRequest::NAME,
            &f.a.operator,
            json!({"state": "stale"}),
        )
        .await;
    assert_eq!(names(&stale.body["runners"], "runner_id"), ["olaya-1"]);
    assert!(stale.body["runners"][0]["offline_since"].is_string());
    let beat = app
        .call(
            HeartbeatRequest::NAME,
            &f.a.runner,
            json!({"execution_id": claim.execution, "claim_token": claim.token}),
        )
        .await;
    assert_eq!(beat.status, 200, "{}", beat.body);
    let alive = app
        .call(
            RunnerListRequest::NAME,
            &f.a.operator,
            json!({"state": "alive"}),
        )
        .await;
    assert_eq!(names(&alive.body["runners"], "runner_id"), ["olaya-1"]);

    sqlx::query("UPDATE runners SET last_seen_at = now() - interval '2 hours'")
        .execute(&app.pool)
        .await
        .expect("age the runner");
    let gone = app
        .call(
            RunnerListRequest::NAME,
            &f.a.operator,
            json!({"state": "gone"}),
        )
        .await;
    assert_eq!(names(&gone.body["runners"], "runner_id"), ["olaya-1"]);
    assert_eq!(
        gone.body["thresholds"],
        json!({"stale_after_seconds": 60, "gone_after_seconds": 3600})
    );

    // Describe names the runners serving the rule's branch.
    let described = app
        .call(
            DescribeRuleRequest::NAME,
            &f.a.operator,
            json!({"branch_rule_id": f.a.stock}),
        )
        .await;
    assert_eq!(names(&described.body["runners"], "runner_id"), ["olaya-1"]);
}

#[tokio::test]
async fn another_brands_runners_rules_and_violations_are_never_listed() {
    let f = fleet().await;
    let app = &f.app;
    for (tenant, runner_id) in [(&f.a, "olaya-a"), (&f.b, "olaya-b")] {
        let reply = app
            .call(
                RegisterRequest::NAME,
                &tenant.runner,
                json!({"runner_id": runner_id, "boot_id": "1"}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let claim = app.claim(&tenant.runner, tenant.queue, runner_id).await;
        let made = app
            .call(
                ViolationRequest::NAME,
                &tenant.runner,
                json!({"execution_id": claim.execution, "claim_token": claim.token,
                       "kind": "queue_too_long", "idempotency_key": runner_id}),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.body);
    }
    let before = app.fingerprint().await;
    let a = &f.a.operator;
    let runners = app.call(RunnerListRequest::NAME, a, json!({})).await;
    assert_eq!(names(&runners.body["runners"], "runner_id"), ["olaya-a"]);
    let rules = app.call(RuleListRequest::NAME, a, json!({})).await;
    assert_eq!(
        names(&rules.body["rules"], "branch_name"),
        ["A Olaya", "A Olaya"]
    );
    let violations = app.call(ViolationListRequest::NAME, a, json!({})).await;
    assert_eq!(
        names(&violations.body["violations"], "branch_name"),
        ["A Olaya"]
    );
    // Filtering by the other brand's ids answers like an unknown id: an empty list.
    let unknown = Uuid::new_v4();
    for filter in ["brand_id", "branch_id"] {
        let (theirs, nobody) = if filter == "brand_id" {
            (f.b.brand, unknown)
        } else {
            (f.b.branch, unknown)
        };
        for function in [
            RunnerListRequest::NAME,
            RuleListRequest::NAME,
            ViolationListRequest::NAME,
        ] {
            let other = app.call(function, a, json!({filter: theirs})).await;
            let missing = app.call(function, a, json!({filter: nobody})).await;
            assert_eq!(other.status, 200, "{function}: {}", other.body);
            assert_eq!(other.body, missing.body, "{function} by {filter}");
        }
    }
    let theirs = app
        .call(
            ViolationListRequest::NAME,
            a,
            json!({"branch_rule_id": f.b.queue}),
        )
        .await;
    assert_eq!(theirs.body["violations"], json!([]));
    // A runner key reads none of it.
    for function in [
        RunnerListRequest::NAME,
        RuleListRequest::NAME,
        ViolationListRequest::NAME,
    ] {
        let refused = app.call(function, &f.a.runner, json!({})).await;
        assert_eq!(refused.status, 403, "{function}: {}", refused.body);
    }
    assert_eq!(app.fingerprint().await, before, "reads changed nothing");
}

#[tokio::test]
async fn rules_list_by_condition_and_name_in_pages() {
    let f = fleet().await;
    let app = &f.app;
    let op = &f.a.operator;
    let paused = app
        .call(
            PauseRuleRequest::NAME,
            op,
            json!({"branch_rule_id": f.a.stock, "reason": "camera moved"}),
        )
        .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    app.claim(&f.a.runner, f.a.queue, "olaya-1").await;
    let all = app.call(RuleListRequest::NAME, op, json!({})).await;
    let conditions: Vec<(&str, &str)> = all.body["rules"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .filter_map(|r| Some((r["rule_name"].as_str()?, r["condition"].as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        conditions,
        [("Queue length", "running"), ("Stock count", "paused")]
    );
    // The list says what describe says.
    for rule in [f.a.queue, f.a.stock] {
        let described = app
            .call(
                DescribeRuleRequest::NAME,
                op,
                json!({"branch_rule_id": rule}),
            )
            .await;
        let listed = all.body["rules"]
            .as_array()
            .and_then(|rules| {
                rules
                    .iter()
                    .find(|r| r["branch_rule_id"] == json!(rule))
                    .cloned()
            })
            .unwrap_or_default();
        assert_eq!(described.body["condition"], listed["condition"]);
    }

    let only_paused = app
        .call(RuleListRequest::NAME, op, json!({"condition": "paused"}))
        .await;
    assert_eq!(
        names(&only_paused.body["rules"], "rule_name"),
        ["Stock count"]
    );
    let by_name = app
        .call(
            RuleListRequest::NAME,
            op,
            json!({"rule_name": "queue LENGTH", "branch_name": "a olaya"}),
        )
        .await;
    assert_eq!(names(&by_name.body["rules"], "rule_name"), ["Queue length"]);

    let first = app
        .call(RuleListRequest::NAME, op, json!({"limit": 1}))
        .await;
    assert_eq!(names(&first.body["rules"], "rule_name"), ["Queue length"]);
    let next = first.body["next"].as_str().unwrap_or_default().to_owned();
    let second = app
        .call(
            RuleListRequest::NAME,
            op,
            json!({"limit": 1, "after": next}),
        )
        .await;
    assert_eq!(names(&second.body["rules"], "rule_name"), ["Stock count"]);
    assert_eq!(second.body["next"], Value::Null);

    // Bad input names its field.
    for (body, field) in [
        (json!({"limit": 0}), "limit"),
        (json!({"rule_name": ""}), "rule_name"),
        (json!({"after": "garbage"}), "after"),
        (json!({"condition": "sleepy"}), "condition"),
    ] {
        let refused = app.call(RuleListRequest::NAME, op, body.clone()).await;
        assert!(
            matches!(refused.status, 400 | 422),
            "{body}: {}",
            refused.body
        );
        let message = refused.body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(field), "{body}: {message}");
    }
}

#[tokio::test]
async fn violations_list_filters_and_pages_newest_first() {
    let f = fleet().await;
    let app = &f.app;
    let claim = app.claim(&f.a.runner, f.a.queue, "olaya-1").await;
    for (key, kind) in [
        ("1", "queue_too_long"),
        ("2", "no_staff"),
        ("3", "queue_too_long"),
    ] {
        let made = app
            .call(
                ViolationRequest::NAME,
                &f.a.runner,
                json!({"execution_id": claim.execution, "claim_token": claim.token,
                       "kind": kind, "idempotency_key": key, "details": {"n": key}}),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.body);
    }
    let op = &f.a.operator;
    let queue = app
        .call(
            ViolationListRequest::NAME,
            op,
            json!({"kind": "queue_too_long", "limit": 1}),
        )
        .await;
    let rows = queue.body["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rows.len(), 1, "{}", queue.body);
    assert_eq!(rows[0]["details"], json!({"n": "3"}), "newest first");
    assert_eq!(rows[0]["execution_id"], json!(claim.execution));
    assert_eq!(rows[0]["rule_name"], "Queue length");
    let next = queue.body["next"].as_str().unwrap_or_default().to_owned();
    let older = app
        .call(
            ViolationListRequest::NAME,
            op,
            json!({"kind": "queue_too_long", "after": next}),
        )
        .await;
    let rows = older.body["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rows.len(), 1, "{}", older.body);
    assert_eq!(rows[0]["details"], json!({"n": "1"}));
    assert_eq!(older.body["next"], Value::Null);

    let future = app
        .call(
            ViolationListRequest::NAME,
            op,
            json!({"since": "2100-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(future.body["violations"], json!([]));
    let backwards = app
        .call(
            ViolationListRequest::NAME,
            op,
            json!({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(backwards.status, 422, "{}", backwards.body);
    assert!(
        backwards.body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("until")
    );
}

#[tokio::test]
async fn keys_list_shows_only_keys_inside_the_callers_scope_and_never_a_secret() {
    let f = fleet().await;
    let app = &f.app;
    let viewer_a = app
        .token(
            "A wall screen",
            Role::Viewer,
            &KeyScope {
                branch_ids: vec![f.a.branch],
                ..KeyScope::default()
            },
        )
        .await;
    let everyone = app.all_brands_token("platform", Role::Operator).await;
    let key_names = |reply: &Value| -> Vec<String> {
        let mut names: Vec<String> = names(&reply["keys"], "name")
            .into_iter()
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    let brand_admin = app
        .call(KeyListRequest::NAME, &f.a.operator, json!({}))
        .await;
    assert_eq!(brand_admin.status, 200, "{}", brand_admin.body);
    assert_eq!(
        key_names(&brand_admin.body),
        ["A admin", "A site", "A wall screen"]
    );
    // A branch-scoped viewer sees keys of its branch, not its brand's admin key.
    let viewer = app.call(KeyListRequest::NAME, &viewer_a, json!({})).await;
    assert_eq!(key_names(&viewer.body), ["A site", "A wall screen"]);
    let platform = app.call(KeyListRequest::NAME, &everyone, json!({})).await;
    assert_eq!(
        key_names(&platform.body),
        [
            "A admin",
            "A site",
            "A wall screen",
            "B admin",
            "B site",
            "platform"
        ]
    );
    let service = app
        .call(KeyListRequest::NAME, &app.service, json!({}))
        .await;
    assert!(key_names(&service.body).contains(&"test service".to_owned()));
    let text = brand_admin.body.to_string();
    assert!(
        !text.contains("res_") && !text.contains("hash"),
        "no secret: {text}"
    );
    let refused = app.call(KeyListRequest::NAME, &f.a.runner, json!({})).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Scopes by name: the site key's branch, never another brand's names.
    let site = brand_admin.body["keys"]
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["name"] == "A site"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(site["branch_names"], json!(["A Olaya"]), "{site}");
    let scope: res_shared::wire::KeySummary = serde_json::from_value(site).expect("a key summary");
    assert_eq!(scope.scope_in_words(), "branch A Olaya");
    assert!(!text.contains("B Olaya"), "{text}");
}

async fn summary(app: &TestApp, token: &str, body: Value) -> support::Reply {
    app.call(FleetSummaryRequest::NAME, token, body).await
}

/// A rule failing at 15 branches is one group of 15, since the first was flagged, with each
/// branch's own reason; overdue rules group apart; the totals count the fleet; and another
/// brand's groups, totals and name answer as unknown.
#[tokio::test]
async fn a_rule_failing_at_fifteen_branches_is_one_group_of_fifteen_and_totals_count_the_fleet() {
    let f = fleet().await;
    let app = &f.app;
    let seed = Seed::new(&app.pool);
    let failing = seed.failing_rule(f.a.brand, "Camera check", 15).await;
    // Brand A's two first rules are overdue (due a minute ago, no runner): make it an hour.
    app.exec(
        "UPDATE branch_rules SET next_run_time = now() - interval '1 hour' WHERE id IN ($1, $2)",
        &[f.a.queue, f.a.stock],
    )
    .await;
    app.exec(
        "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, lease_seconds, \
                                 lease_expires_at, scheduled_at, finished_at, root_id) \
         SELECT $1, 'site-1', s, 't', 60, now(), now() - interval '1 hour', now(), \
                gen_random_uuid() \
         FROM unnest(ARRAY['completed', 'completed', 'failed', 'cancelled']) AS s",
        &[failing[0]],
    )
    .await;

    let answer = summary(app, &f.a.operator, json!({})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body = &answer.body;
    let groups = body["attention"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        groups.len(),
        3,
        "one failing group, two overdue rules: {body}"
    );
    let first = &groups[0];
    assert_eq!(first["kind"], json!("needs_attention"));
    assert_eq!(first["rule_name"], json!("Camera check"));
    assert_eq!(first["reason"], json!("failed 3 to 4 times in a row"));
    assert_eq!(first["branches"].as_array().map(Vec::len), Some(15));
    assert_eq!(
        names(&first["branches"], "branch_name")[..2],
        ["Branch 01", "Branch 02"]
    );
    assert!(
        first["branches"][14]["needs_attention"]
            .as_str()
            .is_some_and(|r| r.contains("camera 15 offline")),
        "{first}"
    );
    let flagged_first: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT min(needs_attention_at) FROM branch_rules WHERE id = ANY($1)")
            .bind(&failing)
            .fetch_one(&app.pool)
            .await
            .expect("the first flag");
    let since: Option<chrono::DateTime<chrono::Utc>> =
        first["since"].as_str().and_then(|t| t.parse().ok());
    assert_eq!(
        since.map(|t| t.timestamp()),
        Some(flagged_first.timestamp()),
        "{first}"
    );
    for overdue in &groups[1..] {
        assert_eq!(overdue["kind"], json!("overdue"), "{overdue}");
        assert_eq!(overdue["branches"].as_array().map(Vec::len), Some(1));
    }
    let totals = &body["totals"];
    assert_eq!(totals["branches"], json!(16), "{totals}");
    assert_eq!(
        totals["rules"],
        json!({"idle": 2, "needs_attention": 15}),
        "{totals}"
    );
    assert_eq!(totals["overdue"], json!(2), "{totals}");
    assert_eq!(totals["runners"], json!({}), "{totals}");
    assert_eq!(
        (
            &totals["day"]["succeeded"],
            &totals["day"]["failed"],
            &totals["day"]["cancelled"]
        ),
        (&json!(2), &json!(1), &json!(1)),
        "{totals}"
    );

    // One brand of the scope: the same; another brand's is an unknown brand's answer.
    let of_a = summary(app, &f.a.operator, json!({"brand_id": f.a.brand})).await;
    assert_eq!(of_a.body, answer.body);
    let of_b = summary(app, &f.a.operator, json!({"brand_id": f.b.brand})).await;
    let unknown = Uuid::new_v4();
    let none = summary(app, &f.a.operator, json!({"brand_id": unknown})).await;
    assert_eq!((of_b.status, none.status), (404, 404));
    assert_eq!(
        of_b.body.to_string().replace(&f.b.brand.to_string(), "ID"),
        none.body.to_string().replace(&unknown.to_string(), "ID")
    );
    // Brand B sees none of A's groups and counts none of A's rules or runs.
    let b = summary(app, &f.b.operator, json!({})).await;
    assert_eq!(b.status, 200, "{}", b.body);
    assert_eq!(b.body["totals"]["branches"], json!(1), "{}", b.body);
    assert_eq!(b.body["totals"]["day"]["succeeded"], json!(0), "{}", b.body);
    assert!(!b.body.to_string().contains("Camera check"), "{}", b.body);
    // A runner key cannot read it; an unknown field is refused by name.
    let runner = summary(app, &f.a.runner, json!({})).await;
    assert_eq!(runner.status, 403, "{}", runner.body);
    let odd = summary(app, &f.a.operator, json!({"brand": f.a.brand})).await;
    assert_eq!(odd.status, 400, "{}", odd.body);
    assert!(odd.body.to_string().contains("brand"), "{}", odd.body);
}

/// The fleet's totals are counted in SQL and judged in Rust; `rules_list` judges each rule
/// in full. With a rule in every condition (and one whose live run's lease ran out), both
/// say the same.
#[tokio::test]
async fn the_fleet_totals_agree_with_rules_list_in_every_condition() {
    let f = fleet().await;
    let app = &f.app;
    let seed = Seed::new(&app.pool);
    let spec = || RuleSpec {
        next_run_time: Some(chrono::Utc::now() - TimeDelta::hours(1)),
        ..RuleSpec::default()
    };
    let mut rules = Vec::new();
    for _ in 0..6 {
        rules.push(seed.branch_rule(f.a.branch, spec()).await);
    }
    let running = app.claim(&f.a.runner, rules[0], "olaya-1").await;
    let expired = app.claim(&f.a.runner, rules[1], "olaya-1").await;
    app.exec(
        "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        &[expired.execution],
    )
    .await;
    let paused = app
        .call(
            PauseRuleRequest::NAME,
            &f.a.operator,
            json!({"branch_rule_id": rules[2], "reason": "r"}),
        )
        .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    app.exec(
        "UPDATE branch_rules SET is_active = false WHERE id = $1",
        &[rules[3]],
    )
    .await;
    app.exec(
        "UPDATE branch_rules SET needs_attention_at = now(), needs_attention_reason = 'x' \
         WHERE id = $1",
        &[rules[4]],
    )
    .await;
    assert!(running.execution != expired.execution);
    // The same conditions with nothing due, where only the rule's branch, its brand rule or
    // its live run says it is not idle; and idle rules beside them.
    let later = || RuleSpec {
        next_run_time: Some(chrono::Utc::now() + TimeDelta::hours(1)),
        ..RuleSpec::default()
    };
    for statement in [
        "UPDATE branch_rules SET is_force_stopped = true WHERE id = $1",
        "UPDATE branch_rules SET is_archived = true WHERE id = $1",
    ] {
        let rule = seed.branch_rule(f.a.branch, later()).await;
        app.exec(statement, &[rule]).await;
    }
    seed.branch_rule(f.a.branch, later()).await;
    let closed = seed.branch(f.a.brand, None).await;
    seed.branch_rule(closed, later()).await;
    app.exec(
        "UPDATE branches SET is_active = false WHERE id = $1",
        &[closed],
    )
    .await;
    let draft = RuleSpec {
        status: "draft",
        ..later()
    };
    seed.branch_rule(f.a.branch, draft).await;
    let held = seed.branch_rule(f.a.branch, spec()).await;
    app.claim(&f.a.runner, held, "olaya-1").await;
    app.exec(
        "UPDATE branch_rules SET next_run_time = now() + interval '1 hour' WHERE id = $1",
        &[held],
    )
    .await;

    // Eight of the 14 rules are set aside by their own row, so the tally judges every rule;
    // with 60 idle ones more it judges the set-aside ones by id.
    let (by_condition, overdue) = fleet_agrees_with_rules_list(app, &f.a.operator).await;
    assert_eq!(by_condition.len(), 5, "every condition: {by_condition:?}");
    assert_eq!(
        by_condition.values().sum::<u64>(),
        14,
        "the tenant's two, the six due, the six not: {by_condition:?}"
    );
    assert!(
        overdue >= 2,
        "the expired run's rule and the idle ones: {overdue}"
    );
    for _ in 0..60 {
        seed.branch_rule(f.a.branch, later()).await;
    }
    let (more, overdue_then) = fleet_agrees_with_rules_list(app, &f.a.operator).await;
    assert_eq!(more["idle"], by_condition["idle"] + 60, "{more:?}");
    assert_eq!(overdue_then, overdue);
}

/// Asserts that `fleet_summary`'s totals are `rules_list`'s rules counted by condition and
/// overdue flag, and returns those counts.
async fn fleet_agrees_with_rules_list(
    app: &TestApp,
    operator: &str,
) -> (std::collections::BTreeMap<String, u64>, u64) {
    let listed = app
        .call(RuleListRequest::NAME, operator, json!({"limit": 500}))
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let mut by_condition = std::collections::BTreeMap::<String, u64>::new();
    let mut overdue = 0;
    for rule in listed.body["rules"].as_array().cloned().unwrap_or_default() {
        *by_condition
            .entry(rule["condition"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
        overdue += u64::from(rule["overdue"] == json!(true));
    }
    let summary = app
        .call(FleetSummaryRequest::NAME, operator, json!({}))
        .await;
    assert_eq!(summary.status, 200, "{}", summary.body);
    assert_eq!(summary.body["totals"]["rules"], json!(by_condition));
    assert_eq!(summary.body["totals"]["overdue"], json!(overdue));
    (by_condition, overdue)
}

async fn acks(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM attention_acks")
        .fetch_one(&app.pool)
        .await
        .expect("acks")
}

/// Acknowledging an item: who, why and until when, shown in its group (acknowledged groups
/// apart and last); it ends by itself at its time and when the rule is flagged anew; every
/// refusal names its field or reason and writes nothing; another brand's rule is unknown.
#[tokio::test]
async fn an_acknowledged_item_is_shown_apart_until_its_time_and_a_new_flag_ends_it() {
    let f = fleet().await;
    let app = &f.app;
    let rules = Seed::new(&app.pool)
        .failing_rule(f.a.brand, "Camera check", 3)
        .await;
    let ack = |rule: Uuid, until: chrono::DateTime<chrono::Utc>| json!({"branch_rule_id": rule, "reason": "vendor on site", "until": until});
    let now = chrono::Utc::now();
    for rule in &rules[..2] {
        let done = app
            .call(
                AcknowledgeRequest::NAME,
                &f.a.operator,
                ack(*rule, now + TimeDelta::hours(1)),
            )
            .await;
        assert_eq!(done.status, 200, "{}", done.body);
        assert_eq!(done.body["acknowledged"]["by"], json!("A admin"));
    }
    let groups = |body: &Value| -> Vec<(usize, Value)> {
        body["attention"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|g| g["rule_name"] == json!("Camera check"))
            .map(|g| {
                (
                    g["branches"].as_array().map_or(0, Vec::len),
                    g["acknowledged"]["reason"].clone(),
                )
            })
            .collect()
    };
    let summary = app
        .call(FleetSummaryRequest::NAME, &f.a.operator, json!({}))
        .await;
    assert_eq!(
        groups(&summary.body),
        [(1, Value::Null), (2, json!("vendor on site"))],
        "{}",
        summary.body
    );

    // rules_describe says so too, for the acknowledged rule only.
    let described = |rule: Uuid| {
        app.call(
            DescribeRuleRequest::NAME,
            &f.a.operator,
            json!({"branch_rule_id": rule}),
        )
    };
    let acked = described(rules[0]).await.body;
    assert_eq!(acked["acknowledged"]["by"], json!("A admin"), "{acked}");
    assert_eq!(described(rules[2]).await.body["acknowledged"], Value::Null);

    // And rules_list, row by row; another brand's list shows none of it.
    let listed = app
        .call(
            RuleListRequest::NAME,
            &f.a.operator,
            json!({"rule_name": "Camera check"}),
        )
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let mut reasons: Vec<(Value, Value)> = listed.body["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["branch_rule_id"].clone(),
                r["acknowledged"]["reason"].clone(),
            )
        })
        .collect();
    reasons.sort_by_key(|(id, _)| id.to_string());
    let mut expected: Vec<(Value, Value)> = rules
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let reason = if i < 2 {
                json!("vendor on site")
            } else {
                Value::Null
            };
            (json!(id), reason)
        })
        .collect();
    expected.sort_by_key(|(id, _)| id.to_string());
    assert_eq!(reasons, expected, "{}", listed.body);
    let theirs = app
        .call(
            RuleListRequest::NAME,
            &f.b.operator,
            json!({"rule_name": "Camera check"}),
        )
        .await;
    assert_eq!(theirs.body["rules"], json!([]), "{}", theirs.body);

    // Refused, naming why, writing nothing.
    let before = acks(app).await;
    let unknown = Uuid::new_v4();
    for (token, body, status, word) in [
        (
            &f.a.operator,
            ack(rules[2], now - TimeDelta::minutes(1)),
            422,
            "until",
        ),
        (
            &f.a.operator,
            ack(rules[2], now + TimeDelta::days(8)),
            422,
            "until",
        ),
        (
            &f.a.operator,
            json!({"branch_rule_id": rules[2], "reason": " ", "until": now + TimeDelta::hours(1)}),
            422,
            "reason",
        ),
        (
            &f.a.operator,
            ack(f.a.stock, now + TimeDelta::hours(1)),
            409,
            "not_flagged",
        ),
        (
            &f.a.operator,
            ack(f.b.queue, now + TimeDelta::hours(1)),
            404,
            "not found",
        ),
        (
            &f.a.operator,
            ack(unknown, now + TimeDelta::hours(1)),
            404,
            "not found",
        ),
        (
            &f.a.runner,
            ack(rules[2], now + TimeDelta::hours(1)),
            403,
            "",
        ),
    ] {
        let refused = app.call(AcknowledgeRequest::NAME, token, body).await;
        assert_eq!(refused.status, status, "{}", refused.body);
        assert!(refused.body.to_string().contains(word), "{}", refused.body);
    }
    let foreign = app
        .call(
            AcknowledgeRequest::NAME,
            &f.a.operator,
            ack(f.b.queue, now + TimeDelta::hours(1)),
        )
        .await;
    let none = app
        .call(
            AcknowledgeRequest::NAME,
            &f.a.operator,
            ack(unknown, now + TimeDelta::hours(1)),
        )
        .await;
    assert_eq!(
        foreign
            .body
            .to_string()
            .replace(&f.b.queue.to_string(), "ID"),
        none.body.to_string().replace(&unknown.to_string(), "ID")
    );
    assert_eq!(acks(app).await, before);

    // A snooze of two seconds: apart now, back with the others once it has run out.
    let short = app
        .call(
            AcknowledgeRequest::NAME,
            &f.a.operator,
            ack(rules[2], chrono::Utc::now() + TimeDelta::seconds(2)),
        )
        .await;
    assert_eq!(short.status, 200, "{}", short.body);
    let summary = app
        .call(FleetSummaryRequest::NAME, &f.a.operator, json!({}))
        .await;
    assert_eq!(
        groups(&summary.body),
        [(3, json!("vendor on site"))],
        "all three acknowledged: {}",
        summary.body
    );
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let summary = app
        .call(FleetSummaryRequest::NAME, &f.a.operator, json!({}))
        .await;
    assert_eq!(
        groups(&summary.body),
        [(1, Value::Null), (2, json!("vendor on site"))],
        "{}",
        summary.body
    );

    // Flagged anew (after a resume): the old acknowledgement no longer covers it.
    app.exec(
        "UPDATE branch_rules SET needs_attention_at = now() + interval '1 second' \
         WHERE id = $1",
        &[rules[0]],
    )
    .await;
    let summary = app
        .call(FleetSummaryRequest::NAME, &f.a.operator, json!({}))
        .await;
    assert_eq!(
        groups(&summary.body),
        [(2, Value::Null), (1, json!("vendor on site"))],
        "{}",
        summary.body
    );
    assert_eq!(described(rules[0]).await.body["acknowledged"], Value::Null);
}

/// Runners are counted by the version they report, and one these functions do not serve
/// is listed with its reason — to its own brand's operators only.
#[tokio::test]
async fn the_fleet_counts_runners_by_version_and_lists_those_outside_the_served_range() {
    let f = fleet().await;
    let app = &f.app;
    for (runner, version) in [
        ("a-new", Some("0.3.0")),
        ("a-old", Some("0.1.0")),
        ("a-odd", Some("banana")),
        ("a-ancient", Some("0.0.9")),
        ("a-silent", None),
    ] {
        let mut body = json!({"runner_id": runner, "boot_id": format!("{runner}-boot")});
        if let Some(version) = version {
            body["version"] = json!(version);
        }
        let registered = app.call(RegisterRequest::NAME, &f.a.runner, body).await;
        assert_eq!(registered.status, 200, "{}", registered.body);
    }
    let registered = app
        .call(
            RegisterRequest::NAME,
            &f.b.runner,
            json!({"runner_id": "b-ancient", "boot_id": "b", "version": "0.0.1"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);

    let a = summary(app, &f.a.operator, json!({})).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.body["totals"]["runner_versions"],
        json!({"0.0.9": 1, "0.1.0": 1, "0.3.0": 1, "banana": 1, "unknown": 1}),
        "{}",
        a.body
    );
    let unsupported = a.body["runners_needing_someone"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        names(&a.body["runners_needing_someone"], "runner_id"),
        ["a-ancient", "a-odd", "a-silent"],
        "{}",
        a.body
    );
    assert!(
        unsupported[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("0.0.9, older than 0.1.0")),
        "{}",
        a.body
    );
    assert_eq!(unsupported[0]["branches"][0]["branch_name"], "A Olaya");
    // Brand B's operator sees B's runner only, and nothing of A's.
    let b = summary(app, &f.b.operator, json!({})).await;
    assert_eq!(
        names(&b.body["runners_needing_someone"], "runner_id"),
        ["b-ancient"]
    );
    assert_eq!(b.body["totals"]["runner_versions"], json!({"0.0.1": 1}));
    for theirs in ["a-new", "a-old", "a-odd", "a-ancient", "a-silent", "banana"] {
        assert!(!b.body.to_string().contains(theirs), "{}", b.body);
    }
    // A gone runner runs nothing: neither counted nor listed.
    sqlx::query(
        "UPDATE runners SET last_seen_at = now() - interval '2 days' WHERE runner_id = 'a-ancient'",
    )
    .execute(&app.pool)
    .await
    .expect("silenced");
    let later = summary(app, &f.a.operator, json!({})).await;
    assert_eq!(
        names(&later.body["runners_needing_someone"], "runner_id"),
        ["a-odd", "a-silent"]
    );
    // A runner whose disk refuses writes says so with its plan requests: listed with the
    // reason until a plan request no longer says it.
    let plan = |since: Option<&str>| {
        let mut health = json!({"version": "0.3.0"});
        if let Some(since) = since {
            health["state_unwritable_since"] = json!(since);
        }
        json!({"runner_id": "a-new", "health": health})
    };
    let asked = app
        .call(
            PlanRequest::NAME,
            &f.a.runner,
            plan(Some("2026-11-27T10:00:00Z")),
        )
        .await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let full = summary(app, &f.a.operator, json!({})).await;
    let listed = full.body["runners_needing_someone"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        names(&full.body["runners_needing_someone"], "runner_id"),
        ["a-new", "a-odd", "a-silent"]
    );
    assert!(
        listed[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("its disk refuses writes since 2026-11-27 10:00 UTC")),
        "{}",
        full.body
    );
    let listed_by_b = summary(app, &f.b.operator, json!({})).await;
    assert!(!listed_by_b.body.to_string().contains("a-new"));
    let asked = app.call(PlanRequest::NAME, &f.a.runner, plan(None)).await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let freed = summary(app, &f.a.operator, json!({})).await;
    assert_eq!(
        names(&freed.body["runners_needing_someone"], "runner_id"),
        ["a-odd", "a-silent"]
    );
}
