//! Tenants are walls: a runner token sees and touches only its branches. Another scope's
//! ids answer exactly as unknown ids do, on every endpoint, and change nothing.

use chrono::{TimeDelta, Utc};
use res_shared::wire::{
    Call, ClaimRequest, HeartbeatRequest, PauseRequest, RegisterRequest, SetNextRunTimeRequest,
    ViolationRequest,
};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{Claim, Reply, RuleSpec, Seed, TestApp};
use uuid::Uuid;

/// Two brands; brand A has two branches. Each branch's runner holds a live claim.
struct World {
    app: TestApp,
    /// Runner token of branch A1.
    a: String,
    /// Live claims of branch A1's two rules.
    a1: Claim,
    a2: Claim,
    /// A rule of branch A1 nobody claimed.
    a_free: Uuid,
    /// Another branch of brand A, and its runner's claim.
    other_branch: Claim,
    other_branch_token: String,
    /// Brand B's runner and its claim.
    b: String,
    b1: Claim,
}

async fn world() -> World {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let due = || RuleSpec {
        next_run_time: Some(Utc::now() - TimeDelta::minutes(1)),
        ..RuleSpec::default()
    };
    let brand_a = seed.brand("Asia/Riyadh").await;
    let branch_a1 = seed.branch(brand_a, None).await;
    let branch_a2 = seed.branch(brand_a, None).await;
    let branch_b = seed.branch(seed.brand("Europe/Berlin").await, None).await;
    let (rule_a1, rule_a2, a_free) = (
        seed.branch_rule(branch_a1, due()).await,
        seed.branch_rule(branch_a1, due()).await,
        seed.branch_rule(branch_a1, due()).await,
    );
    let rule_other = seed.branch_rule(branch_a2, due()).await;
    let rule_b = seed.branch_rule(branch_b, due()).await;
    let a = app.runner_token(&[branch_a1]).await;
    let other_branch_token = app.runner_token(&[branch_a2]).await;
    let b = app.runner_token(&[branch_b]).await;
    World {
        a1: app.claim(&a, rule_a1, "runner-a").await,
        a2: app.claim(&a, rule_a2, "runner-a").await,
        other_branch: app
            .claim(&other_branch_token, rule_other, "runner-a2")
            .await,
        b1: app.claim(&b, rule_b, "runner-b").await,
        a_free,
        a,
        other_branch_token,
        b,
        app,
    }
}

fn offline_report(rule: Uuid, execution: Uuid, token: &str, runner: &str) -> Value {
    let now = Utc::now();
    json!({
        "branch_rule_id": rule,
        "is_last_run_failed": true,
        "status": "failed",
        "error": "forged",
        "result": {"forged": true},
        "execution_id": execution,
        "claim_token": token,
        "offline": {
            "runner_id": runner,
            "started_at": now - TimeDelta::seconds(30),
            "finished_at": now - TimeDelta::seconds(1),
        },
    })
}

fn code(reply: &Reply) -> &str {
    reply.body["error"]["code"].as_str().unwrap_or_default()
}

/// The error message with `id` written as `<id>`, so answers about two ids compare.
fn message_without(reply: &Reply, id: Uuid) -> String {
    reply.body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .replace(&id.to_string(), "<id>")
}

impl World {
    /// Sends A's forged offline report naming `execution` and checks it is refused as a
    /// taken id with nothing changed.
    async fn offline_report_refused(&self, execution: Uuid, token: &str) -> Reply {
        let before = self.app.fingerprint().await;
        let forged = offline_report(self.a1.rule, execution, token, "runner-a");
        let reply = self
            .app
            .call(SetNextRunTimeRequest::NAME, &self.a, forged)
            .await;
        assert_eq!(reply.status, 409, "{}", reply.body);
        assert_eq!(code(&reply), "execution_id_taken");
        assert_eq!(self.app.fingerprint().await, before, "nothing changed");
        reply
    }

    async fn heartbeat(&self, token: &str, claim: &Claim) -> Reply {
        self.app
            .call(
                HeartbeatRequest::NAME,
                token,
                json!({"execution_id": claim.execution, "claim_token": claim.token}),
            )
            .await
    }

    async fn finish(&self, token: &str, claim: &Claim) -> Reply {
        self.app
            .call(
                SetNextRunTimeRequest::NAME,
                token,
                json!({"branch_rule_id": claim.rule, "is_last_run_failed": false,
                       "execution_id": claim.execution, "claim_token": claim.token,
                       "result": {"mine": true}}),
            )
            .await
    }

    async fn execution(&self, id: Uuid) -> (String, Option<String>) {
        sqlx::query_as("SELECT status, error FROM executions WHERE id = $1")
            .bind(id)
            .fetch_one(&self.app.pool)
            .await
            .expect("execution")
    }
}

#[tokio::test]
async fn an_offline_report_cannot_rewrite_another_tenants_execution() {
    let w = world().await;
    let reply = w.offline_report_refused(w.b1.execution, "made-up").await;
    assert!(!reply.body.to_string().contains(&w.b1.rule.to_string()));
    // Its real runner keeps its lease and its own report gets its own answer.
    assert_eq!(w.heartbeat(&w.b, &w.b1).await.status, 200);
    let own = w.finish(&w.b, &w.b1).await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(own.body["branch_rule_id"], json!(w.b1.rule));
    assert_eq!(
        w.execution(w.b1.execution).await,
        ("completed".into(), None)
    );
}

#[tokio::test]
async fn an_offline_report_cannot_cancel_another_rule_of_the_same_branch() {
    let w = world().await;
    w.offline_report_refused(w.a2.execution, "made-up").await;
    assert_eq!(w.heartbeat(&w.a, &w.a2).await.status, 200);
    assert_eq!(w.execution(w.a2.execution).await.0, "running");
    // Naming its own rule's live, claimed execution offline is refused the same way.
    w.offline_report_refused(w.a1.execution, &w.a1.token).await;
}

#[tokio::test]
async fn an_offline_report_creates_its_execution_once_and_only_for_the_same_run() {
    let w = world().await;
    let id = Uuid::new_v4();
    let report = offline_report(w.a_free, id, "offline-1", "runner-a");
    let first = w
        .app
        .call(SetNextRunTimeRequest::NAME, &w.a, report.clone())
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let again = w
        .app
        .call(SetNextRunTimeRequest::NAME, &w.a, report.clone())
        .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body, first.body, "a repeat gets the same answer");
    let before = w.app.fingerprint().await;
    let mut other_runner = report.clone();
    other_runner["offline"]["runner_id"] = json!("someone-else");
    let mut other_token = report;
    other_token["claim_token"] = json!("offline-2");
    for body in [other_runner, other_token] {
        let reply = w.app.call(SetNextRunTimeRequest::NAME, &w.a, body).await;
        assert_eq!(reply.status, 409, "{}", reply.body);
        assert_eq!(code(&reply), "execution_id_taken");
    }
    assert_eq!(w.app.fingerprint().await, before);
}

/// For every endpoint that takes an id: another scope's id (another branch of the same
/// brand, another brand) gets exactly the answer an unknown id gets, and nothing changes.
#[tokio::test]
async fn every_endpoint_answers_another_scopes_id_as_an_unknown_id() {
    let w = world().await;
    type Body = Box<dyn Fn(Uuid, &Claim) -> Value>;
    let cases: Vec<(&str, &str, Body)> = vec![
        (
            ClaimRequest::NAME,
            "rule",
            Box::new(|id, _| json!({"branch_rule_id": id, "runner_id": "runner-a"})),
        ),
        (
            HeartbeatRequest::NAME,
            "execution",
            Box::new(|id, c| json!({"execution_id": id, "claim_token": c.token})),
        ),
        (
            ViolationRequest::NAME,
            "execution",
            Box::new(
                |id, c| json!({"execution_id": id, "claim_token": c.token, "kind": "k", "idempotency_key": "k"}),
            ),
        ),
        (
            PauseRequest::NAME,
            "execution",
            Box::new(
                |id, c| json!({"execution_id": id, "claim_token": c.token, "delay_seconds": 60, "context": {}}),
            ),
        ),
        (
            SetNextRunTimeRequest::NAME,
            "rule",
            Box::new(|id, c| {
                json!({"branch_rule_id": id, "is_last_run_failed": false,
                       "execution_id": c.execution, "claim_token": c.token})
            }),
        ),
        (
            SetNextRunTimeRequest::NAME,
            "execution",
            Box::new(|id, c| {
                json!({"branch_rule_id": c.rule, "is_last_run_failed": false,
                       "execution_id": id, "claim_token": c.token})
            }),
        ),
    ];
    let before = w.app.fingerprint().await;
    for (foreign, label) in [
        (&w.other_branch, "another branch"),
        (&w.b1, "another brand"),
    ] {
        for (function, kind, body) in &cases {
            let foreign_id = if *kind == "rule" {
                foreign.rule
            } else {
                foreign.execution
            };
            // The rule-side cases name A's own execution so only the rule is foreign.
            let claim = if *function == SetNextRunTimeRequest::NAME && *kind == "execution" {
                Claim {
                    rule: w.a1.rule,
                    ..foreign.clone()
                }
            } else {
                foreign.clone()
            };
            let unknown_id = Uuid::new_v4();
            let outside = w.app.call(function, &w.a, body(foreign_id, &claim)).await;
            let unknown = w.app.call(function, &w.a, body(unknown_id, &claim)).await;
            let what = format!("{function} with {label}'s {kind} id");
            assert_eq!(outside.status, 404, "{what}: {}", outside.body);
            assert_eq!(outside.status, unknown.status, "{what}");
            assert_eq!(code(&outside), code(&unknown), "{what}");
            assert_eq!(
                message_without(&outside, foreign_id),
                message_without(&unknown, unknown_id),
                "{what}"
            );
            assert_eq!(
                outside.body.as_object().map(|o| o.len()),
                unknown.body.as_object().map(|o| o.len()),
                "{what}: the same fields"
            );
        }
    }
    assert_eq!(w.app.fingerprint().await, before, "nothing changed");
    // And the owners' runs are untouched.
    assert_eq!(w.heartbeat(&w.b, &w.b1).await.status, 200);
    assert_eq!(
        w.heartbeat(&w.other_branch_token, &w.other_branch)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn registering_under_another_runners_name_crashes_nothing_outside_the_scope() {
    let w = world().await;
    let before = w.app.fingerprint().await;
    let reply = w
        .app
        .call(
            RegisterRequest::NAME,
            &w.a,
            json!({"runner_id": "runner-b", "boot_id": Uuid::new_v4().to_string()}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["crashed"], json!([]));
    assert_eq!(w.app.fingerprint().await, before);
    assert_eq!(w.heartbeat(&w.b, &w.b1).await.status, 200);
}

#[tokio::test]
async fn idempotency_keys_belong_to_their_rule_so_tenants_never_collide() {
    let w = world().await;
    let violation = |claim: &Claim| {
        json!({"execution_id": claim.execution, "claim_token": claim.token,
               "kind": "queue_too_long", "idempotency_key": "shared-key"})
    };
    let theirs = w
        .app
        .call(ViolationRequest::NAME, &w.b, violation(&w.b1))
        .await;
    assert_eq!(theirs.status, 201, "{}", theirs.body);
    let mine = w
        .app
        .call(ViolationRequest::NAME, &w.a, violation(&w.a1))
        .await;
    assert_eq!(mine.status, 201, "{}", mine.body);
    assert_ne!(mine.body["id"], theirs.body["id"]);
    assert!(!mine.body.to_string().contains(&w.b1.execution.to_string()));
    // Another rule of the same branch may use the key too; each replays its own.
    let sibling = w
        .app
        .call(ViolationRequest::NAME, &w.a, violation(&w.a2))
        .await;
    assert_eq!(sibling.status, 201);
    let replay = w
        .app
        .call(ViolationRequest::NAME, &w.a, violation(&w.a1))
        .await;
    assert_eq!(replay.body["id"], mine.body["id"]);
    assert_eq!(
        replay
            .headers
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
}
