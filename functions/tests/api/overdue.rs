//! One judgement of "overdue" everywhere a rule's state is shown — the rule page,
//! `rules_describe`, `rules_list`, the fleet and the `rules_overdue` gauge — with its cause;
//! Run now warns when no live runner serves the branch; blockers read on the branch's clock;
//! a paused rule lists no upcoming runs.

use chrono::TimeDelta;
use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::{Call, DescribeRuleRequest, RuleListRequest, RunNowRequest};
use res_shared::wire::{PauseRequest, PauseRuleRequest, RegisterRequest};
use res_tests::console::Console;
use res_tests::functions::{RuleSpec, Seed, TestApp};
use serde_json::{Value, json};
use uuid::Uuid;

struct Branch {
    app: TestApp,
    /// Due ten minutes ago; the branch's only runner was last seen ten minutes ago.
    forgotten: Uuid,
    /// As overdue, but paused by an operator.
    paused: Uuid,
    /// Due ten minutes ago, held by a paused execution: waiting, not overdue.
    waiting: Uuid,
    /// Due ten minutes ago, its claimed run's lease ran out: a crash nobody recorded, overdue.
    lost: Uuid,
    /// Due in two hours.
    later: Uuid,
    operator: String,
}

async fn branch() -> Branch {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("Asia/Riyadh").await;
    let branch = seed.branch(brand, None).await;
    let now = app.db_now().await;
    let rule = |next| RuleSpec {
        next_run_time: Some(next),
        ..RuleSpec::default()
    };
    let past = now - TimeDelta::minutes(10);
    let forgotten = seed.branch_rule(branch, rule(past)).await;
    let paused = seed.branch_rule(branch, rule(past)).await;
    let waiting = seed.branch_rule(branch, rule(now)).await;
    let lost = seed.branch_rule(branch, rule(now)).await;
    let later = seed
        .branch_rule(branch, rule(now + TimeDelta::hours(2)))
        .await;
    let runner = app.runner_token(&[branch]).await;
    let operator = app
        .token(
            "ops",
            Role::Operator,
            &KeyScope {
                brand_ids: vec![brand],
                ..KeyScope::default()
            },
        )
        .await;
    let registered = app
        .call(
            RegisterRequest::NAME,
            &runner,
            json!({"runner_id": "site-1", "boot_id": "boot-1"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    let waiting_claim = app.claim(&runner, waiting, "site-1").await;
    app.claim(&runner, lost, "site-1").await;
    let paused_run = app
        .call(
            PauseRequest::NAME,
            &runner,
            json!({"execution_id": waiting_claim.execution, "claim_token": waiting_claim.token,
                   "delay_seconds": 3600, "context": {}}),
        )
        .await;
    assert_eq!(paused_run.status, 200, "{}", paused_run.body);
    let pause = app
        .call(
            PauseRuleRequest::NAME,
            &operator,
            json!({"branch_rule_id": paused, "reason": "camera moved"}),
        )
        .await;
    assert_eq!(pause.status, 200, "{}", pause.body);
    for statement in [
        "UPDATE branch_rules SET next_run_time = now() - interval '10 minutes' \
         WHERE id = ANY(ARRAY[$1, $2]::uuid[])",
        "UPDATE executions SET lease_expires_at = now() - interval '1 minute' \
         WHERE branch_rule_id = $2 AND $1::uuid IS NOT NULL",
        "UPDATE runners SET last_seen_at = now() - interval '10 minutes' \
         WHERE $1::uuid IS NOT NULL AND $2::uuid IS NOT NULL",
    ] {
        app.exec(statement, &[waiting, lost]).await;
    }
    Branch {
        app,
        forgotten,
        paused,
        waiting,
        lost,
        later,
        operator,
    }
}

fn id_of(row: &Value) -> Option<Uuid> {
    row["branch_rule_id"].as_str()?.parse().ok()
}

#[tokio::test]
async fn an_overdue_rule_says_so_with_its_cause_on_every_path_and_the_gauge_agrees() {
    let b = branch().await;
    let overdue = [b.forgotten, b.lost];
    let listed = b
        .app
        .call(RuleListRequest::NAME, &b.operator, json!({}))
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let rows = listed.body["rules"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 5, "{}", listed.body);
    for row in &rows {
        let id = id_of(row).expect("an id");
        assert_eq!(row["overdue"], overdue.contains(&id), "{row}");
        let described = b
            .app
            .call(
                DescribeRuleRequest::NAME,
                &b.operator,
                json!({"branch_rule_id": id}),
            )
            .await;
        assert_eq!(described.status, 200, "{}", described.body);
        assert_eq!(described.body["overdue"], row["overdue"], "{id}");
        assert_eq!(
            described.body["overdue_cause"], row["overdue_cause"],
            "{id}"
        );
        if overdue.contains(&id) {
            let cause = row["overdue_cause"].as_str().unwrap_or_default();
            assert!(
                cause.starts_with("no runner of this branch seen since ")
                    && cause.ends_with(" Asia/Riyadh"),
                "{cause}"
            );
        } else {
            assert!(row["overdue_cause"].is_null(), "{row}");
        }
    }
    // The branch's runner, silent for ten minutes, is also its offline owner.
    sqlx::query(
        "INSERT INTO branch_offline_owners (branch_id, key_id, runner_id) \
         SELECT br.branch_id, rn.key_id, rn.runner_id FROM branch_rules br, runners rn \
         WHERE br.id = $1",
    )
    .bind(b.forgotten)
    .execute(&b.app.pool)
    .await
    .expect("an offline owner");
    let metrics = b.app.metrics().await;
    for line in [
        "res_functions_rules_overdue 2\n",
        "res_functions_rules_overdue_unserved 2\n",
        "res_functions_branches_offline_owner_absent 1\n",
    ] {
        assert!(
            metrics.contains(line),
            "the gauges count the same two rules and the silent owner: {line}\n{metrics}"
        );
    }
    // The rule page and the fleet page say it with the cause.
    let mut console = Console::new(&b.app.base);
    assert_eq!(console.sign_in(&b.operator).await.status, 303);
    let page = console
        .get(&format!("/console/rules/{}", b.forgotten))
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(">overdue<"), "the badge: {}", page.body);
    assert!(
        page.body
            .contains("overdue: no runner of this branch seen since "),
        "{}",
        page.body
    );
    assert!(page.body.contains("id=\"runner-warning\""), "{}", page.body);
    let fleet = console.get("/console/").await;
    assert!(
        fleet
            .body
            .contains("overdue: no runner of this branch seen since "),
        "{}",
        fleet.body
    );
    // The runner calls again: still overdue, but no longer for want of a runner.
    sqlx::query("UPDATE runners SET last_seen_at = now()")
        .execute(&b.app.pool)
        .await
        .expect("seen");
    let metrics = b.app.metrics().await;
    for line in [
        "res_functions_rules_overdue 2\n",
        "res_functions_rules_overdue_unserved 0\n",
        "res_functions_branches_offline_owner_absent 0\n",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
}

#[tokio::test]
async fn run_now_warns_when_no_live_runner_serves_the_branch() {
    let b = branch().await;
    let asked = b
        .app
        .call(
            RunNowRequest::NAME,
            &b.operator,
            json!({"branch_rule_id": b.later, "reason": "complaint"}),
        )
        .await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let warning = asked.body["warning"].as_str().unwrap_or_default();
    assert!(
        warning.starts_with("no runner of this branch seen since ")
            && warning.ends_with("the run starts when a runner of the branch calls"),
        "{}",
        asked.body
    );
    assert!(
        asked.body["run_requested_at"].is_string(),
        "still requested"
    );
    // A runner calls again: no warning.
    b.app
        .exec(
            "UPDATE runners SET last_seen_at = now() WHERE $1::uuid IS NOT NULL",
            &[b.later],
        )
        .await;
    let again = b
        .app
        .call(
            RunNowRequest::NAME,
            &b.operator,
            json!({"branch_rule_id": b.forgotten, "reason": "complaint"}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert!(again.body.get("warning").is_none(), "{}", again.body);
}

#[tokio::test]
async fn blockers_read_on_the_branch_clock_and_a_paused_rule_lists_no_upcoming_runs() {
    let b = branch().await;
    let describe = |id: Uuid| {
        b.app.call(
            DescribeRuleRequest::NAME,
            &b.operator,
            json!({"branch_rule_id": id}),
        )
    };
    let later = describe(b.later).await;
    let why: Vec<&str> = later.body["why_not"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(!why.is_empty(), "{}", later.body);
    assert!(
        why.iter()
            .any(|w| w.starts_with("due ") && w.ends_with(" Asia/Riyadh")),
        "{why:?}"
    );
    assert!(
        later.body["next_runs"]
            .as_array()
            .is_some_and(|n| !n.is_empty())
    );

    let paused = describe(b.paused).await;
    assert_eq!(paused.body["next_runs"], json!([]), "{}", paused.body);
    assert!(
        paused.body["next_runs_held"]
            .as_str()
            .is_some_and(|h| h.starts_with("none while the rule is paused")),
        "{}",
        paused.body
    );
    let waiting = describe(b.waiting).await;
    assert_eq!(waiting.body["condition"], "running", "{}", waiting.body);
    let mut console = Console::new(&b.app.base);
    assert_eq!(console.sign_in(&b.operator).await.status, 303);
    let page = console.get(&format!("/console/rules/{}", b.paused)).await;
    assert!(
        page.body.contains("none while the rule is paused"),
        "{}",
        page.body
    );
    let page = console.get(&format!("/console/rules/{}", b.later)).await;
    assert!(page.body.contains(" Asia/Riyadh"), "{}", page.body);
}
