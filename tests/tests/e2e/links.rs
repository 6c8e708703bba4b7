//! Bad links between a site and the functions (docs/faults.md): the runner runs in a network
//! namespace of the test's own, joined to this host by a veth pair, and the link drops what
//! a NAT box or 4G router would.

use std::time::{Duration, Instant};

use uuid::Uuid;

use res_tests::netns::Netns;
use res_tests::processes::{Runner, binary, eventually};

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
    let ports = waiting_connections(&system, &netns, &runner).await;
    assert!(!ports.is_empty(), "the runner's plan request is open");
    // The NAT forgets every connection the site has: nothing of them passes either way.
    netns.blackhole(&ports);
    let dropped = Instant::now();
    system.run_now(run_now, "through a bad link").await;
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

/// A long granted wait (240 s) and a NAT box that forgets the waiting connection: the
/// keep-alive spaces stop, the runner notices within two and a half intervals (25 s) rather
/// than at the wait's end (255 s), and a Run now arrives on a new connection.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_wait_dropped_silently_is_noticed_within_seconds_by_its_missing_keepalives() {
    let netns = Netns::create();
    let system = System::start_serving(
        &binary("res-functions"),
        &["--plan-wait-max-seconds", "240"],
        netns.host.into(),
    )
    .await;
    let run_now = system.tomorrows_rule(0.1).await;
    let runner = system.runner_in(&netns, "site-1", &[("PLAN_WAIT_SECONDS", "240")]);
    let ports = waiting_connections(&system, &netns, &runner).await;
    assert!(!ports.is_empty(), "the runner's plan request is open");
    netns.blackhole(&ports);
    let dropped = Instant::now();
    system
        .run_now(run_now, "through a forgotten connection")
        .await;
    let recovered = dropped.elapsed();
    // Silent for 25 s at most after the last space (which came at most 10 s before the
    // drop), then a new connection and the run itself.
    let bound = Duration::from_secs(25 + 10);
    assert!(
        recovered < bound,
        "the Run now took {recovered:?} through a forgotten connection (bound {bound:?})"
    );
    let log = runner.log();
    assert!(log.contains("the waiting answer went silent"), "{log}");
    assert!(!log.contains("outage started"), "not an outage: {log}");
    eprintln!("the Run now completed {recovered:?} after the connection was forgotten");
}

/// docs/faults.md: keep-alive probes end a waiting request's connection after four are lost,
/// not one. reqwest's default `TCP_USER_TIMEOUT` (30 s) made Linux end it at the first lost
/// probe once the connection had been idle a minute.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_plan_request_outlives_a_lost_keepalive_probe_and_a_run_now_arrives_on_it() {
    let netns = Netns::create();
    // The wait outlasts the first two probes (after 60 s idle, then 15 s). No keep-alive
    // spaces: with them the connection is never idle and no probe is sent.
    let system = System::start_serving(
        &binary("res-functions"),
        &[
            "--plan-wait-max-seconds",
            "150",
            "--plan-keepalive-seconds",
            "0",
        ],
        netns.host.into(),
    )
    .await;
    let run_now = system.tomorrows_rule(0.1).await;
    let runner = system.runner_in(&netns, "site-1", &[("PLAN_WAIT_SECONDS", "240")]);
    let ports = waiting_connections(&system, &netns, &runner).await;
    let functions = system.functions.port();
    let [waiting] = ports[..] else {
        panic!("one waiting plan request's connection is open: {ports:?}");
    };
    // Everything the site sends on it is lost until its first probe has gone unanswered.
    netns.mute(&[waiting]);
    eventually(
        "the runner's first keep-alive probe goes unanswered",
        Duration::from_secs(60),
        || async {
            netns
                .probes_unanswered(waiting, functions)
                .is_some_and(|n| n >= 1)
        },
    )
    .await;
    netns.unmute();
    // The next probe, 15 s later, is answered and the connection goes on.
    eventually(
        "the runner's next keep-alive probe is answered",
        Duration::from_secs(30),
        || async {
            match netns.probes_unanswered(waiting, functions) {
                Some(n) => n == 0,
                None => panic!("the waiting request's connection ended after one lost probe"),
            }
        },
    )
    .await;
    let asked = Instant::now();
    system.run_now(run_now, "after a lost probe").await;
    let log = runner.log();
    assert!(
        !log.contains("a waiting plan request got no answer"),
        "the wait was given up: {log}"
    );
    eprintln!(
        "the Run now completed {:?} after it was asked, over connection {waiting}",
        asked.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_losing_a_fifth_of_its_packets_runs_nothing_twice_and_loses_nothing() {
    let netns = Netns::create();
    let system = System::start_serving(&binary("res-functions"), &[], netns.host.into()).await;
    let starts = system.dir.join("starts");
    let mut rules = Vec::new();
    for _ in 0..4 {
        let spec = res_tests::functions::RuleSpec {
            cron: Some("*/5 * * * * *"),
            next_run_time: Some(chrono::Utc::now() - chrono::TimeDelta::seconds(5)),
            ..res_tests::functions::RuleSpec::default()
        };
        // Each start writes its execution's id (from the job on stdin), so a run started
        // twice shows as an id written twice.
        let detector = format!(
            "grep -o '\"execution_id\":\"[^\"]*\"' | head -1 | cut -d'\"' -f4 >> '{}'; sleep 1; \
             echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 1}}'",
            starts.display()
        );
        rules.push(system.rule(spec, &detector).await);
    }
    netns.lose(20);
    // Production's request timeout and waits, over the lossy link.
    let runner = system.runner_in(
        &netns,
        "site-1",
        &[
            ("REQUEST_TIMEOUT_SECONDS", "15"),
            ("PLAN_WAIT_SECONDS", "240"),
        ],
    );
    eventually(
        "runs go on over the lossy link",
        Duration::from_secs(90),
        || async {
            let mut runs = 0;
            for rule in &rules {
                runs += system.rule_row(*rule).await.2;
            }
            runs >= 16
        },
    )
    .await;
    system
        .pause_and_settle(&rules, &runner, Duration::from_secs(90))
        .await;
    // A 3-second lease over this link is sometimes lost: the runner stops that run and
    // reports it cancelled (or the cloud retries it), while a violation request already
    // on the wire may still land. So the invariants hold per run and its retries: none
    // recorded twice, none of a completed run lost, no detector started twice.
    let started: Vec<String> = std::fs::read_to_string(&starts)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let mut executions = Vec::new();
    let mut known = std::collections::BTreeSet::new();
    for rule in &rules {
        let violations = system.violations_by_execution(*rule).await;
        let mine = system.executions(*rule).await;
        assert!(
            violations
                .keys()
                .all(|id| id.is_some_and(|id| mine.iter().any(|e| e.0 == id))),
            "rule {rule}: every violation names a run of the rule: {violations:?}"
        );
        let parent: std::collections::HashMap<Uuid, Option<Uuid>> =
            mine.iter().map(|e| (e.0, e.2)).collect();
        let root_of = |mut id: Uuid| {
            while let Some(Some(up)) = parent.get(&id) {
                id = *up;
            }
            id
        };
        let mut chains: std::collections::HashMap<Uuid, (usize, bool)> = Default::default();
        for (id, status, ..) in &mine {
            let starts = started.iter().filter(|s| **s == id.to_string()).count();
            assert!(
                starts <= 1,
                "run {id} ({status}) started its detector {starts} times"
            );
            let recorded = violations.get(&Some(*id)).copied().unwrap_or(0);
            if recorded > 0 {
                assert_eq!(starts, 1, "run {id} recorded a violation it never detected");
            }
            let chain = chains.entry(root_of(*id)).or_default();
            chain.0 += recorded;
            chain.1 |= status == "completed";
            known.insert(id.to_string());
            executions.push(status.clone());
        }
        for (root, (recorded, completed)) in chains {
            assert!(
                recorded <= 1,
                "run {root} and its retries: {recorded} violations: {mine:?}"
            );
            if completed {
                assert_eq!(
                    recorded, 1,
                    "run {root} completed but lost its violation: {mine:?}"
                );
            }
        }
    }
    let statuses: std::collections::BTreeMap<&str, usize> =
        executions.iter().fold(Default::default(), |mut m, s| {
            *m.entry(s.as_str()).or_default() += 1;
            m
        });
    let lost = netns.lost();
    eprintln!(
        "over 20 % loss ({lost} packets dropped): {statuses:?}, {} detector starts",
        started.len()
    );
    assert!(lost > 0, "the link lost packets");
    assert!(
        statuses.get("completed").copied().unwrap_or(0) * 2 >= executions.len(),
        "most runs complete over the lossy link: {statuses:?}"
    );
    assert!(
        started.iter().all(|s| known.contains(s)),
        "every detector start belongs to a recorded run: {started:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_of_a_thousand_rules_arrives_over_128_kbit() {
    let netns = Netns::create();
    let system = System::start_serving(&binary("res-functions"), &[], netns.host.into()).await;
    thousand_rules(&system).await;
    netns.limit_rate(128);
    let asked = Instant::now();
    let runner = system.runner_in(&netns, "site-1", &[("REQUEST_TIMEOUT_SECONDS", "15")]);
    // From its log: the status page of 1,000 rules would itself crawl over this link.
    eventually("the plan arrives", Duration::from_secs(120), || async {
        runner
            .log()
            .contains("first plan refresh: the server's plan is taken as is workflows=1000")
    })
    .await;
    eprintln!("a 1,000-rule plan over 128 kbit/s: {:?}", asked.elapsed());
    assert!(
        !runner.log().contains("plan refresh failed"),
        "every plan request got through: {}",
        runner.log()
    );
}

/// The request timeout over the slow link: shorter than a plan takes to arrive there.
const SLOW_LINK_TIMEOUT: Duration = Duration::from_secs(5);

/// A link with a 1.5 s round trip at 128 kbit/s each way, made in user space (this kernel has
/// no `netem` to add latency): today's runner gets a plan of 1,000 rules in format 3, and its
/// client gets the same plan in formats 1 and 2 — each arrives although it takes longer than
/// the request timeout (5 s here), because that bounds the wait for the answer to begin and
/// then each piece of it, not the whole call.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_of_a_thousand_rules_arrives_in_every_format_over_a_1_5_s_round_trip_at_128_kbit() {
    use res_shared::wire::PlanRequest;
    use res_tests::forwarder::{Forwarder, Link, Target};
    use res_tests::processes::RunnerSpec;

    let system = System::start().await;
    thousand_rules(&system).await;
    let functions = std::net::SocketAddr::from(([127, 0, 0, 1], system.functions.port()));
    let link = Forwarder::start_to(
        Target::Tcp(functions),
        Link {
            delay: Duration::from_millis(750),
            bits_per_second: Some(128_000),
        },
    )
    .await;
    let url = format!("http://127.0.0.1:{}/functions/v1", link.port());
    let asked = Instant::now();
    let runner = Runner::start(
        RunnerSpec {
            binary: &binary("res-runner"),
            dir: &system.dir,
            name: "site-1",
            functions_url: &url,
            token: &system.token,
        },
        &[("REQUEST_TIMEOUT_SECONDS", "5")],
        &[],
    );
    eventually("the plan arrives", Duration::from_secs(180), || async {
        runner
            .log()
            .contains("first plan refresh: the server's plan is taken as is workflows=1000")
    })
    .await;
    let format_3 = asked.elapsed();
    assert!(
        !runner.log().contains("plan refresh failed"),
        "every plan request got through: {}",
        runner.log()
    );
    let client = res_runner::cloud::FunctionsClient::new(
        &url,
        &system.token,
        SLOW_LINK_TIMEOUT,
        "res-tests",
    )
    .expect("a client");
    let mut took = Vec::new();
    for format in [1, 2] {
        let request = PlanRequest {
            runner_id: format!("format-{format}"),
            since: None,
            health: None,
            wait_seconds: None,
            format: Some(format),
        };
        let started = Instant::now();
        let plan = client
            .call(&request)
            .await
            .unwrap_or_else(|e| panic!("format {format} over the slow link: {e}"));
        assert_eq!(plan.workflows.len(), 1000, "format {format}");
        took.push((format, started.elapsed()));
    }
    assert!(
        took.iter().all(|(_, t)| *t > SLOW_LINK_TIMEOUT),
        "each call outlasted the request timeout, as a call bounded as a whole could not: {took:?}"
    );
    eprintln!(
        "1,000 rules over a 1.5 s round trip at 128 kbit/s: format 3 (the runner's first plan, \
         registration included) {format_3:?}; {took:?}"
    );
}

/// A thousand rules at the system's branch, due tomorrow.
async fn thousand_rules(system: &System) {
    let seed = res_tests::functions::Seed::new(&system.pool);
    for _ in 0..1000 {
        seed.branch_rule(system.branch, crate::system::due_tomorrow())
            .await;
    }
}

/// The runner's connections to the functions once it waits on its plan and its pool has
/// dropped the rest (idle 30 s): the waiting plan request's.
async fn waiting_connections(system: &System, netns: &Netns, runner: &Runner) -> Vec<u16> {
    eventually(
        "the runner waits on its plan",
        Duration::from_secs(30),
        || async { runner.reaches_functions().await },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(35)).await;
    netns.connections_to(system.functions.port())
}
