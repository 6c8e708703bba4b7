//! Bad links between a site and the functions (docs/faults.md): the runner runs in a network
//! namespace of the test's own, joined to this host by a veth pair, and the link drops what
//! a NAT box or 4G router would.

use std::time::{Duration, Instant};

use res_tests::netns::Netns;
use res_tests::processes::{binary, eventually};

use crate::system::System;

/// The functions' granted wait in these tests, and the runner's request timeout.
const GRANTED: u64 = 10;
const REQUEST_TIMEOUT: u64 = 5;

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_request_dropped_silently_mid_wait_is_noticed_in_the_granted_wait_and_a_run_now_still_arrives()
 {
    let netns = Netns::create();
    let granted = GRANTED.to_string();
    let system = System::start_serving(
        &binary("res-functions"),
        &["--plan-wait-max-seconds", &granted],
        netns.host.into(),
    )
    .await;
    let run_now = system.tomorrows_rule(0.1).await;
    let timeout = REQUEST_TIMEOUT.to_string();
    let runner = system.runner_in(
        &netns,
        "site-1",
        &[
            ("PLAN_WAIT_SECONDS", "240"),
            ("REQUEST_TIMEOUT_SECONDS", &timeout),
        ],
    );
    eventually(
        "the runner waits on its plan",
        Duration::from_secs(30),
        || async {
            runner
                .status()
                .await
                .is_some_and(|s| s["cloud_reachable"] == true)
        },
    )
    .await;
    // Past the idle time after which the runner drops pooled connections (30 s): what is
    // left open is the waiting plan request's connection.
    tokio::time::sleep(Duration::from_secs(35)).await;
    let ports = netns.connections_to(system.functions.port());
    assert!(!ports.is_empty(), "the runner's plan request is open");
    // The NAT forgets every connection the site has: nothing of them passes either way.
    netns.blackhole(&ports);
    let dropped = Instant::now();
    let answer = reqwest::Client::new()
        .post(format!("{}/rules_run_now", system.functions.url()))
        .bearer_auth(&system.operator)
        .json(&serde_json::json!({"branch_rule_id": run_now, "reason": "through a bad link"}))
        .send()
        .await
        .expect("run now answered");
    assert_eq!(answer.status().as_u16(), 200);
    system
        .completes(run_now, "the Run now reached the site")
        .await;
    let recovered = dropped.elapsed();
    // The documented bound: the granted wait plus the request timeout, then a new
    // connection (docs/faults.md); a few seconds more for the run itself.
    let bound = Duration::from_secs(GRANTED + REQUEST_TIMEOUT + 5);
    assert!(
        recovered < bound,
        "the Run now took {recovered:?} through a dropped connection (bound {bound:?})"
    );
    let log = runner.log();
    assert!(
        log.contains("a waiting plan request got no answer; asking again on a new connection"),
        "{log}"
    );
    assert!(
        !log.contains("outage started"),
        "a dropped connection is not an outage: {log}"
    );
    eprintln!(
        "dropped {} connection(s); the Run now completed {recovered:?} after",
        ports.len()
    );
}
