//! A runner claims its due rules in batches while an older runner claims the same rules one
//! at a time: every rule is claimed exactly once.

use std::time::Duration;

use res_shared::wire::{Call, ClaimRequest, SetNextRunTimeRequest};
use res_tests::functions::hourly_cron;
use res_tests::processes::free_port;
use serde_json::{Value, json};

use super::due;
use super::system::{System, answered, detector};

#[tokio::test(flavor = "multi_thread")]
async fn a_runners_batches_racing_an_older_runners_single_claims_claim_every_rule_once() {
    let metrics_port = free_port();
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let system =
        System::start_with(&["--metrics-bind", &format!("127.0.0.1:{metrics_port}")]).await;
    let cron = &hourly_cron();
    let mut rules = Vec::new();
    for _ in 0..40 {
        rules.push(system.rule(due(cron), &detector(0.3, 0)).await);
    }
    // The older runner: one claim per rule, last rule first, a report at once for each won.
    let racer = {
        let (url, token, rules) = (system.functions.url(), system.token.clone(), rules.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let post = |function: &'static str, body: Value| {
                client
                    .post(format!("{url}/{function}"))
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
            };
            let mut won = Vec::new();
            for rule in rules.iter().rev() {
                let reply = post(
                    ClaimRequest::NAME,
                    json!({"branch_rule_id": rule, "runner_id": "older-runner"}),
                )
                .await
                .expect("the functions answer");
                let status = reply.status().as_u16();
                let body: Value = reply.json().await.expect("JSON");
                assert!(matches!(status, 200 | 409), "{status} {body}");
                if status == 200 {
                    let report = post(
                        SetNextRunTimeRequest::NAME,
                        json!({"branch_rule_id": rule, "is_last_run_failed": false,
                               "execution_id": body["execution_id"], "claim_token": body["claim_token"],
                               "status": "completed"}),
                    )
                    .await
                    .expect("the functions answer");
                    assert_eq!(report.status().as_u16(), 200);
                    won.push(*rule);
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            won
        })
    };
    let mut runner = system.runner("runner-a", &[("WORKERS", "10")]);
    let by_racer = racer.await.expect("the older runner");
    system.all_ran(40).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut by_runner = 0;
    for rule in &rules {
        let executions = system.executions(*rule).await;
        assert_eq!(
            executions.len(),
            1,
            "rule {rule} was claimed {executions:?}"
        );
        assert_eq!(executions[0].1, "completed");
        let older = executions[0].4 == "older-runner";
        assert_eq!(
            older,
            by_racer.contains(rule),
            "rule {rule}: {executions:?}"
        );
        by_runner += usize::from(!older);
    }
    assert_eq!(by_runner + by_racer.len(), 40);
    let batches = answered(
        &metrics_url,
        "function=\"branch_rules_claim_batch\",status=\"200\"",
    )
    .await;
    assert!(batches > 0, "the runner claimed in batches");
    let batched_reports = answered(
        &metrics_url,
        "function=\"branch_rules_set_NextRunTime_batch\",status=\"200\"",
    )
    .await;
    eprintln!(
        "runner: {by_runner} rules in {batches} claim batches ({batched_reports} report batches); older runner: {}",
        by_racer.len()
    );
    assert!(runner.stop());
}
