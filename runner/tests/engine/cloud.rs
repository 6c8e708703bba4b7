//! Pausing, resuming and violations through the real functions.

use std::time::Duration;

use crate::support::*;
use chrono::{TimeDelta, Utc};
use res_runner::cloud::{CloudError, FunctionsClient};
use res_runner::daemon::services::CloudServices;
use res_runner::workflow::engine::Engine;
use res_runner::workflow::prepare::Prepared;
use res_runner::workflow::report::{ExecutionReport, NodeStatus};
use res_shared::wire::{ClaimRequest, ClaimResponse, ExecutionStatus, PlanRequest};
use res_tests::functions::{RuleSpec, Seed, TestApp};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct Cloud {
    pub app: TestApp,
    pub rule: Uuid,
    pub token: String,
}

impl Cloud {
    /// A due branch rule whose workflow detects at `site` and records a violation, with
    /// `between` nodes (e.g. a delay) in the middle.
    pub async fn start(site: &Site, between: Option<Value>) -> Cloud {
        let app = TestApp::start().await;
        let seed = Seed::new(&app.pool);
        let (branch, rule) = seed.due_rule(RuleSpec::default()).await;
        let detect = seed
            .template(
                "Queue detector",
                "detection",
                &json!({"executor": "http", "url": site.url("queue")}),
            )
            .await;
        let violation = seed
            .template(
                "Queue violation",
                "business",
                &json!({"kind": "queue_too_long"}),
            )
            .await;
        let mut config = json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": detect},
                "violation": {"type": "business", "action": "create_violation", "action_template_id": violation}
            },
            "edges": [{"from": "detect", "to": "violation", "condition": "violations > 0"}],
            "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
        });
        if let Some(node) = between {
            config["nodes"]["between"] = node;
            config["edges"] = json!([
                {"from": "detect", "to": "between", "condition": "violations > 0"},
                {"from": "between", "to": "violation"}
            ]);
        }
        seed.workflow(rule, &config).await;
        let token = app.runner_token(&[branch]).await;
        Cloud { app, rule, token }
    }

    pub fn client(&self) -> FunctionsClient {
        res_runner::tls::install();
        FunctionsClient::new(
            &format!("{}/functions/v1", self.app.base),
            &self.token,
            Duration::from_secs(10),
            "res-runner-test",
        )
        .expect("a client")
    }

    /// The rule as a runner prepares it from a fresh plan.
    pub async fn prepared(&self, engine: &Engine) -> Prepared {
        let plan = self
            .client()
            .call(&PlanRequest {
                runner_id: "runner".into(),
                since: None,
                health: None,
                wait_seconds: None,
                format: Some(res_shared::wire::PLAN_FORMAT_SHARED),
            })
            .await
            .expect("a plan");
        let entry = plan
            .workflows
            .iter()
            .find(|w| w.id == self.rule)
            .expect("the rule is in the plan");
        Prepared::new(engine, entry, &plan.lookups).expect("the workflow loads")
    }

    pub async fn claim(&self, runner_id: &str) -> Result<ClaimResponse, CloudError> {
        self.client()
            .call(&ClaimRequest {
                branch_rule_id: self.rule,
                runner_id: runner_id.into(),
                lease_seconds: None,
                boot_id: None,
            })
            .await
    }

    /// Runs a claimed execution on a new engine.
    pub async fn run(&self, claim: &ClaimResponse) -> ExecutionReport {
        let engine = engine();
        let prepared = self.prepared(&engine).await;
        let services =
            CloudServices::new(self.client(), claim.execution_id, claim.claim_token.clone());
        engine
            .run(
                &prepared.execution(claim),
                &services,
                CancellationToken::new(),
            )
            .await
    }

    /// One runner: claim and run.
    pub async fn run_once(&self, runner_id: &str) -> (ClaimResponse, ExecutionReport) {
        let claim = self.claim(runner_id).await.expect("claimed");
        let report = self.run(&claim).await;
        (claim, report)
    }

    pub async fn execution_status(&self, id: Uuid) -> String {
        sqlx::query_scalar("SELECT status FROM executions WHERE id = $1")
            .bind(id)
            .fetch_one(&self.app.pool)
            .await
            .expect("the execution exists")
    }

    pub async fn violations(&self) -> Vec<(Uuid, Uuid)> {
        sqlx::query_as("SELECT id, execution_id FROM violations WHERE branch_rule_id = $1")
            .bind(self.rule)
            .fetch_all(&self.app.pool)
            .await
            .expect("violations")
    }
}

#[tokio::test]
pub async fn a_paused_execution_resumes_on_another_engine_with_the_same_id() {
    let site = Site::start().await;
    let cloud = Cloud::start(&site, Some(json!({"type": "delay", "seconds": 3600}))).await;
    let (claim, paused) = cloud.run_once("runner-a").await;
    assert_eq!(paused.status, ExecutionStatus::Paused, "{:?}", paused.error);
    assert!(
        paused
            .resume_at
            .is_some_and(|at| at > Utc::now() + TimeDelta::minutes(59))
    );
    assert_eq!(
        statuses(&paused),
        [
            ("detect", NodeStatus::Completed),
            ("between", NodeStatus::Paused)
        ]
    );
    assert!(
        paused
            .next_run_request(cloud.rule, &claim.claim_token)
            .is_none(),
        "nothing to report yet"
    );
    assert_eq!(cloud.execution_status(claim.execution_id).await, "paused");

    // Not before its time...
    let early = cloud.claim("runner-b").await.expect_err("still paused");
    assert_eq!(early.code(), Some("paused"), "{early}");

    // ...but once it is due, exactly one of two runners resumes it.
    sqlx::query("UPDATE executions SET resume_at = now() - interval '1 second' WHERE id = $1")
        .bind(claim.execution_id)
        .execute(&cloud.app.pool)
        .await
        .expect("fast-forward the pause");
    let (b, c) = tokio::join!(cloud.claim("runner-b"), cloud.claim("runner-c"));
    let (resumed, refused) = match (b, c) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("exactly one runner must resume: {other:?}"),
    };
    assert_eq!(refused.code(), Some("running"), "{refused}");
    let report = cloud.run(&resumed).await;
    assert!(resumed.resumed);
    assert_eq!(
        resumed.execution_id, claim.execution_id,
        "same execution id"
    );
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(report.resumed_count, 1);
    assert_eq!(report.started_at, paused.started_at);
    assert_eq!(
        statuses(&report),
        [
            ("detect", NodeStatus::Completed),
            ("between", NodeStatus::Completed),
            ("violation", NodeStatus::Completed)
        ]
    );
    assert_eq!(
        report.nodes[1].result.as_ref().expect("waited")["paused"],
        true
    );
    assert_eq!(site.calls("queue").len(), 1, "detection did not run again");

    let finish = report
        .next_run_request(cloud.rule, &resumed.claim_token)
        .expect("finished");
    cloud.client().call(&finish).await.expect("reported");
    assert_eq!(
        cloud.execution_status(claim.execution_id).await,
        "completed"
    );
    let violations = cloud.violations().await;
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].1, claim.execution_id);
}

#[tokio::test]
pub async fn a_retried_run_never_records_a_second_violation() {
    let site = Site::start().await;
    let cloud = Cloud::start(&site, None).await;
    let (first, report) = cloud.run_once("runner-a").await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    let violation_id = report.aggregated_actions_details[1]["violation_id"].clone();
    assert!(violation_id.is_string());

    // The runner dies before reporting; its lease runs out and another runner retries.
    sqlx::query(
        "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(first.execution_id)
    .execute(&cloud.app.pool)
    .await
    .expect("expire the lease");
    let (retry, report) = cloud.run_once("runner-b").await;
    assert_eq!(retry.retry_of, Some(first.execution_id));
    assert_eq!(retry.root_execution_id, first.execution_id);
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(
        report.aggregated_actions_details[1]["violation_id"], violation_id,
        "the same violation"
    );
    assert_eq!(cloud.violations().await.len(), 1);
    assert_eq!(cloud.execution_status(first.execution_id).await, "crashed");
}

// ---------------------------------------------------------------------------------------
