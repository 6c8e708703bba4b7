//! The bounded wait of `get-execution-plan-v2`: a delta request with `wait_seconds` is held
//! until a change in the caller's scope commits and answered then, or answered empty when
//! the wait ends; another tenant's change does not wake it; waiting holds no connection and
//! no turn; a process that cannot hear changes answers at once and says it did not wait.

use std::time::{Duration, Instant};

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_functions::state::Settings;
use res_shared::wire::{Call, PlanRequest, RunnerListRequest, SetNextRunTimeRequest};
use res_tests::functions::{Reply, RuleSpec, Seed, TestApp};
use serde_json::{Value, json};
use uuid::Uuid;

fn waiting_up_to(seconds: u64) -> Settings {
    Settings {
        plan_wait_max: Duration::from_secs(seconds),
        ..Settings::default()
    }
}

/// A listening server, a branch with one rule, and its runner's token and cursor.
struct Site {
    app: TestApp,
    branch: Uuid,
    rule: Uuid,
    token: String,
    cursor: String,
}

async fn site(settings: Settings, listening: bool) -> Site {
    let app = TestApp::start_with(settings, listening).await;
    if listening {
        app.wait_until_listening().await;
    }
    let seed = Seed::new(&app.pool);
    let branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let full = app
        .call(PlanRequest::NAME, &token, json!({"runner_id": "site-1"}))
        .await;
    assert_eq!(full.status, 200, "{}", full.body);
    let cursor = full.body["cursor"].as_str().expect("a cursor").to_owned();
    Site {
        app,
        branch,
        rule,
        token,
        cursor,
    }
}

impl Site {
    /// Takes a cursor from now, after setup that changed shared definitions.
    async fn fresh_cursor(&mut self) {
        let plan = self
            .app
            .call(
                PlanRequest::NAME,
                &self.token,
                json!({"runner_id": "site-1"}),
            )
            .await;
        self.cursor = plan.body["cursor"].as_str().expect("a cursor").to_owned();
    }

    /// A plan request with `body`, answered 200.
    async fn ask(&self, body: Value) -> Reply {
        let reply = self.app.call(PlanRequest::NAME, &self.token, body).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply
    }

    /// A delta request waiting up to `wait` seconds, running in the background.
    fn wait_for_delta(&self, wait: u32) -> tokio::task::JoinHandle<(Reply, Duration)> {
        self.wait_as(json!({"runner_id": "site-1", "since": self.cursor, "wait_seconds": wait}))
    }

    /// A plan request with `body`, running in the background.
    fn wait_as(&self, body: Value) -> tokio::task::JoinHandle<(Reply, Duration)> {
        let (base, client, token) = (
            self.app.base.clone(),
            self.app.client.clone(),
            self.token.clone(),
        );
        tokio::spawn(async move {
            let started = Instant::now();
            let response = client
                .post(format!("{base}/functions/v1/{}", PlanRequest::NAME))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("the server answers");
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            let reply = Reply {
                status,
                body,
                headers: Default::default(),
            };
            (reply, started.elapsed())
        })
    }
}

fn workflow_ids(body: &Value) -> Vec<&str> {
    body["workflows"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["id"].as_str()).collect())
        .unwrap_or_default()
}

async fn request_run(app: &TestApp, rule: Uuid) {
    sqlx::query("UPDATE branch_rules SET run_requested_at = now() WHERE id = $1")
        .bind(rule)
        .execute(&app.pool)
        .await
        .expect("run requested");
}

#[tokio::test]
async fn a_waiting_delta_is_answered_as_soon_as_a_change_in_its_scope_commits() {
    let mut site = site(waiting_up_to(60), true).await;
    let waiting = site.wait_for_delta(60);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "nothing changed: the request waits");
    request_run(&site.app, site.rule).await;
    let (reply, took) = waiting.await.expect("joined");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(workflow_ids(&reply.body), [site.rule.to_string()]);
    assert!(
        reply.body["workflows"][0]["run_requested_at"].is_string(),
        "{}",
        reply.body
    );
    assert_eq!(reply.body["full"], false);
    assert_eq!(reply.body["wait_seconds"], 60, "the wait it was allowed");
    assert!(
        took < Duration::from_secs(30),
        "answered at the change, not the wait's end: {took:?}"
    );

    // A change to shared definitions (a rule's name) wakes every waiter with a full plan.
    site.fresh_cursor().await;
    let waiting = site.wait_for_delta(60);
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("UPDATE rules SET name = 'Queue at the tills'")
        .execute(&site.app.pool)
        .await
        .expect("rename");
    let (reply, took) = waiting.await.expect("joined");
    assert_eq!(reply.body["full"], true, "{}", reply.body);
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[tokio::test]
async fn another_tenants_change_does_not_wake_it_and_the_wait_ends_with_an_empty_delta() {
    let mut site = site(waiting_up_to(60), true).await;
    let seed = Seed::new(&site.app.pool);
    let elsewhere = seed.branch(seed.brand("Europe/Berlin").await, None).await;
    let theirs = seed.branch_rule(elsewhere, RuleSpec::default()).await;
    site.fresh_cursor().await;
    let waiting = site.wait_for_delta(2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    request_run(&site.app, theirs).await;
    let (reply, took) = waiting.await.expect("joined");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["full"], false);
    assert!(
        workflow_ids(&reply.body).is_empty(),
        "nothing of theirs: {}",
        reply.body
    );
    assert_eq!(reply.body["removed"], json!([]));
    assert_eq!(reply.body["wait_seconds"], 2);
    // The server shortens each wait by up to a sixteenth, to spread a fleet's returns.
    assert!(
        took >= Duration::from_millis(2_000 * 15 / 16),
        "it waited the whole wait: {took:?}"
    );
    assert_ne!(site.branch, elsewhere);

    // The empty answer's cursor is current: the next wait hears the site's own change.
    let site = Site {
        cursor: reply.body["cursor"].as_str().expect("cursor").to_owned(),
        ..site
    };
    let waiting = site.wait_for_delta(60);
    tokio::time::sleep(Duration::from_millis(300)).await;
    request_run(&site.app, site.rule).await;
    let (reply, _) = waiting.await.expect("joined");
    assert_eq!(workflow_ids(&reply.body), [site.rule.to_string()]);
}

#[tokio::test]
async fn waiting_requests_hold_no_connection_and_no_turn() {
    // The test server's pool has 20 connections, so 20 turns: 40 waiters would starve
    // everyone else if waiting held either.
    let site = site(waiting_up_to(60), true).await;
    let waiters: Vec<_> = (0..40).map(|_| site.wait_for_delta(30)).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Served (200) while all 40 wait.
    site.ask(json!({"runner_id": "site-2"})).await;
    let connections: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()",
    )
    .fetch_one(&site.app.pool)
    .await
    .expect("activity");
    assert!(
        connections < 40,
        "{connections} connections for 40 waiting requests"
    );
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "the other request was served while all 40 still waited"
    );
    request_run(&site.app, site.rule).await;
    for waiter in waiters {
        let (reply, _) = waiter.await.expect("joined");
        assert_eq!(
            workflow_ids(&reply.body),
            [site.rule.to_string()],
            "{}",
            reply.body
        );
    }
}

#[tokio::test]
async fn the_wait_is_bounded_by_the_server_and_refused_past_300_seconds() {
    let site = site(waiting_up_to(1), true).await;
    let (reply, took) = site.wait_for_delta(30).await.expect("joined");
    assert_eq!(
        reply.body["wait_seconds"], 1,
        "the server's limit: {}",
        reply.body
    );
    assert!(took < Duration::from_secs(20), "{took:?}");

    let refused = site
        .app
        .call(
            PlanRequest::NAME,
            &site.token,
            json!({"runner_id": "site-new", "since": site.cursor, "wait_seconds": 301}),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "invalid_field");
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("wait_seconds"), "{message}");
    let noted: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runners WHERE runner_id = 'site-new'")
            .fetch_one(&site.app.pool)
            .await
            .expect("registry");
    assert_eq!(noted, 0, "a refused request changes nothing");
}

#[tokio::test]
async fn a_process_that_cannot_hear_changes_answers_at_once_and_says_it_did_not_wait() {
    // No listener: the Lambda case, or a serve whose notification connection is down.
    let site = site(waiting_up_to(60), false).await;
    let (reply, took) = site.wait_for_delta(60).await.expect("joined");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["wait_seconds"], 0, "{}", reply.body);
    assert!(took < Duration::from_secs(30), "{took:?}");
}

/// Seconds since the runner was last seen, as the registry has it.
async fn silent_for(app: &TestApp, runner_id: &str) -> f64 {
    sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM now() - last_seen_at)::float8 FROM runners WHERE runner_id = $1",
    )
    .bind(runner_id)
    .fetch_one(&app.pool)
    .await
    .expect("the runner is registered")
}

fn stale_after(stale_seconds: u32, wait_seconds: u64) -> Settings {
    Settings {
        runner_thresholds: res_shared::wire::RunnerThresholds {
            stale_after_seconds: stale_seconds,
            gone_after_seconds: 3600,
        },
        ..waiting_up_to(wait_seconds)
    }
}

#[tokio::test]
async fn a_runner_waiting_longer_than_the_stale_time_stays_present_and_goes_silent_once_it_stops() {
    // Stale after 3 s: the registry is refreshed every second for whoever waits.
    let site = site(stale_after(3, 60), true).await;
    let waiting = site.wait_for_delta(60);
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(!waiting.is_finished(), "nothing changed: it still waits");
    let silent = silent_for(&site.app, "site-1").await;
    assert!(silent < 3.0, "waited 7 s, seen {silent:.1} s ago");
    let listed = site
        .app
        .call(
            RunnerListRequest::NAME,
            &site
                .app
                .token(
                    "ops",
                    Role::Viewer,
                    &KeyScope {
                        branch_ids: vec![site.branch],
                        ..KeyScope::default()
                    },
                )
                .await,
            json!({}),
        )
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(
        listed.body["runners"][0]["runner_id"], "site-1",
        "{}",
        listed.body
    );
    assert_eq!(
        listed.body["runners"][0]["state"], "alive",
        "{}",
        listed.body
    );

    // The request ends (the site went away): nobody keeps it present any more.
    waiting.abort();
    let _ = waiting.await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let silent = silent_for(&site.app, "site-1").await;
    assert!(
        silent > 3.0,
        "stopped waiting 5 s ago, seen {silent:.1} s ago"
    );
}

#[tokio::test]
async fn a_waiting_runner_takes_over_a_branch_whose_offline_owner_went_silent() {
    let site = site(stale_after(2, 60), true).await;
    let offline = json!({"version": "test", "outbox_depth": 0, "runs_offline": true});
    let owner = site
        .ask(json!({"runner_id": "owner", "health": offline}))
        .await;
    assert_eq!(
        owner.body["offline_owners"][0]["runner_id"], "owner",
        "{}",
        owner.body
    );

    // The other runner waits; the owner is never heard from again.
    let waiting = site.wait_as(json!({"runner_id": "standby", "since": site.cursor,
                                     "wait_seconds": 60, "health": offline}));
    let (reply, took) = waiting.await.expect("joined");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        took < Duration::from_secs(30),
        "answered when the owner went silent, not at the wait's end: {took:?}"
    );
    assert_eq!(
        workflow_ids(&reply.body),
        Vec::<&str>::new(),
        "nothing changed"
    );
    let cursor = reply.body["cursor"].as_str().expect("a cursor");
    let next = site
        .ask(json!({"runner_id": "standby", "since": cursor, "health": offline}))
        .await;
    assert_eq!(
        next.body["offline_owners"][0]["runner_id"], "standby",
        "its next request took the branch over: {}",
        next.body
    );
}

#[tokio::test]
async fn a_claim_and_a_report_do_not_wake_the_wait_but_the_next_delta_holds_them() {
    let mut site = site(waiting_up_to(60), true).await;
    site.fresh_cursor().await;
    let waiting = site.wait_for_delta(3);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let claim = site.app.claim(&site.token, site.rule, "site-1").await;
    let report = site
        .app
        .call(
            SetNextRunTimeRequest::NAME,
            &site.token,
            json!({"branch_rule_id": site.rule, "is_last_run_failed": false,
                   "execution_id": claim.execution, "claim_token": claim.token}),
        )
        .await;
    assert_eq!(report.status, 200, "{}", report.body);
    let (reply, took) = waiting.await.expect("joined");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        took >= Duration::from_millis(3_000 * 15 / 16),
        "the site's own claim and report did not end its wait: {took:?}"
    );
    assert_eq!(
        workflow_ids(&reply.body),
        Vec::<&str>::new(),
        "{}",
        reply.body
    );

    // They are in the next delta, from the cursor the wait answered with.
    let cursor = reply.body["cursor"].as_str().expect("a cursor");
    let next = site
        .ask(json!({"runner_id": "site-1", "since": cursor}))
        .await;
    assert_eq!(
        workflow_ids(&next.body),
        [site.rule.to_string()],
        "{}",
        next.body
    );
    assert_eq!(next.body["workflows"][0]["run_count"], 1, "{}", next.body);
}

/// A runner that asks is answered at once and sent a space every interval while its request
/// waits, then the plan (JSON after the spaces); one that does not ask, and one whose first
/// read has news, is answered as before.
#[tokio::test]
async fn a_waiting_request_that_asks_is_kept_alive_with_spaces_until_its_plan() {
    let settings = Settings {
        plan_wait_max: Duration::from_secs(60),
        plan_keepalive: Duration::from_secs(1),
        ..Settings::default()
    };
    let site = site(settings, true).await;
    let post = |keepalive: bool, body: Value| {
        let mut request = site
            .app
            .client
            .post(format!(
                "{}/functions/v1/{}",
                site.app.base,
                PlanRequest::NAME
            ))
            .bearer_auth(&site.token)
            .json(&body);
        if keepalive {
            request = request.header("res-keepalive", "1");
        }
        request.send()
    };
    let waiting = json!({"runner_id": "site-1", "since": site.cursor, "wait_seconds": 60});
    let started = Instant::now();
    let mut response = post(true, waiting.clone()).await.expect("answered");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "begun at once: {:?}",
        started.elapsed()
    );
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["res-keepalive-seconds"], "1");
    assert!(
        response.headers().get("content-encoding").is_none(),
        "not held back by a compressor"
    );
    // Spaces while nothing changes…
    let mut body = Vec::new();
    while body.len() < 2 {
        let piece = tokio::time::timeout(Duration::from_secs(5), response.chunk())
            .await
            .expect("a space within the interval")
            .expect("the body")
            .expect("not ended");
        body.extend_from_slice(&piece);
    }
    assert!(body.iter().all(|b| *b == b' '), "{body:?}");
    // …then the plan, once something does.
    request_run(&site.app, site.rule).await;
    while let Some(piece) = tokio::time::timeout(Duration::from_secs(10), response.chunk())
        .await
        .expect("the plan comes")
        .expect("the body")
    {
        body.extend_from_slice(&piece);
    }
    let plan: Value = serde_json::from_slice(&body).expect("JSON after the spaces");
    assert_eq!(workflow_ids(&plan), [site.rule.to_string()]);

    // Not asked: no spaces, the answer when the wait ends or something changes.
    let plain = post(
        false,
        json!({"runner_id": "site-1", "since": plan["cursor"], "wait_seconds": 1}),
    )
    .await
    .expect("answered");
    assert!(plain.headers().get("res-keepalive-seconds").is_none());
    assert_eq!(plain.status().as_u16(), 200);
    // Asked, but the first read has news: answered at once, as before.
    request_run(&site.app, site.rule).await;
    let news = post(
        true,
        json!({"runner_id": "site-1", "since": plan["cursor"], "wait_seconds": 60}),
    )
    .await
    .expect("answered");
    assert!(news.headers().get("res-keepalive-seconds").is_none());
    let news: Value = news.json().await.expect("JSON");
    assert_eq!(workflow_ids(&news), [site.rule.to_string()]);
}
