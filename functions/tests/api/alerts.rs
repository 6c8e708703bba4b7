//! Alerts that reach a person, against real PostgreSQL and a webhook receiver over HTTP:
//! channels are a brand admin's (another brand's answer as unknown ones), an item is
//! announced once, signed, and resolved once, an acknowledgement silences it, and a
//! failing channel says so and is retried until it takes the message.

use std::time::Duration;

use res_functions::alerts::{client, deliver_round, evaluate};
use res_functions::auth::Role;
use res_functions::metrics::Metrics;
use res_shared::wire::{
    AcknowledgeRequest, ChannelDeleteRequest, ChannelTestRequest, RegisterRequest,
};
use res_shared::wire::{Call, ChannelCreateRequest, ChannelListRequest, RunnerThresholds};
use res_tests::functions::{Reply, RuleSpec, Seed, TestApp};
use res_tests::receiver::{Receiver, signed_by};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

struct Brands {
    app: TestApp,
    brand: Uuid,
    rules: [Uuid; 2],
    admin: String,
    viewer: String,
    other_admin: String,
}

async fn brands() -> Brands {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    let due = Some(app.db_now().await + chrono::TimeDelta::hours(1));
    let spec = || RuleSpec {
        next_run_time: due,
        ..RuleSpec::default()
    };
    let rules = [
        seed.branch_rule(branch, spec()).await,
        seed.branch_rule(branch, spec()).await,
    ];
    for (rule, name) in rules.iter().zip(["Queue length", "Shelf gaps"]) {
        seed.name_rule(*rule, name).await;
    }
    let other_brand = seed.brand("UTC").await;
    Brands {
        admin: app.brand_token("brand admin", Role::Admin, brand).await,
        viewer: app.brand_token("brand viewer", Role::Viewer, brand).await,
        other_admin: app
            .brand_token("other admin", Role::Admin, other_brand)
            .await,
        app,
        brand,
        rules,
    }
}

impl Brands {
    async fn call(&self, function: &str, token: &str, body: Value) -> Reply {
        self.app.call(function, token, body).await
    }

    /// A webhook channel to `url`; its id and signing secret.
    async fn webhook(&self, url: &str) -> (Uuid, String) {
        let created = self
            .call(
                ChannelCreateRequest::NAME,
                &self.admin,
                json!({"brand_id": self.brand, "name": "ops hook", "kind": "webhook", "url": url}),
            )
            .await;
        assert_eq!(created.status, 200, "{}", created.body);
        let id = created.body["channel"]["channel_id"]
            .as_str()
            .and_then(|id| id.parse().ok())
            .expect("a channel id");
        let secret = created.body["secret"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (id, secret)
    }

    async fn flag(&self, rule: Uuid) {
        self.app
            .exec(
                "UPDATE branch_rules SET needs_attention_at = now(), consecutive_failures = 3, \
                     needs_attention_reason = 'failed 3 times in a row (last: camera offline)' \
                 WHERE id = $1",
                &[rule],
            )
            .await;
    }

    async fn clear(&self, rule: Uuid) {
        self.app
            .exec(
                "UPDATE branch_rules SET needs_attention_at = NULL, consecutive_failures = 0, \
                     needs_attention_reason = NULL WHERE id = $1",
                &[rule],
            )
            .await;
    }

    /// One evaluation then delivery rounds until nothing is due.
    async fn sweep_and_deliver(&self, metrics: &Metrics) {
        evaluate(&self.app.pool, RunnerThresholds::default())
            .await
            .expect("evaluates");
        let client = client().expect("a client");
        for _ in 0..20 {
            let round = deliver_round(
                &self.app.pool,
                &client,
                Duration::from_secs(1),
                metrics,
                &CancellationToken::new(),
            )
            .await
            .expect("delivers");
            if round.delivered + round.failed == 0 {
                break;
            }
        }
    }

    async fn channels(&self, token: &str) -> Value {
        let listed = self.call(ChannelListRequest::NAME, token, json!({})).await;
        assert_eq!(listed.status, 200, "{}", listed.body);
        listed.body["channels"].clone()
    }
}

#[tokio::test]
async fn channels_are_a_brand_admins_and_another_brands_answer_as_unknown_ones() {
    let b = brands().await;
    let (id, secret) = b
        .webhook("https://hooks.example.com/res/abc?token=t0p")
        .await;
    assert!(
        secret.starts_with("whsec_") && secret.len() > 40,
        "{secret}"
    );
    let slack = b
        .call(
            ChannelCreateRequest::NAME,
            &b.admin,
            json!({"brand_id": b.brand, "name": "slack", "kind": "slack",
                   "url": "https://hooks.slack.com/services/T0/B0/secretpath"}),
        )
        .await;
    assert_eq!(slack.status, 200, "{}", slack.body);
    assert!(
        slack.body.get("secret").is_none(),
        "a Slack URL is its own secret"
    );

    // Listed without secrets or paths, to the brand's viewer too.
    let listed = b.channels(&b.viewer).await;
    let text = listed.to_string();
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    assert!(!text.contains("whsec_") && !text.contains("secretpath") && !text.contains("t0p"));
    assert!(text.contains("https://hooks.slack.com/…"), "{text}");

    // Refusals name the field and change nothing.
    for (body, status, named) in [
        (
            json!({"brand_id": b.brand, "name": "ops hook", "kind": "webhook", "url": "https://x.example"}),
            409,
            "already has a channel named 'ops hook'",
        ),
        (
            json!({"brand_id": b.brand, "name": "ftp", "kind": "webhook", "url": "ftp://x.example/"}),
            422,
            "url: must start with https://",
        ),
        (
            json!({"brand_id": b.brand, "name": "bad", "kind": "webhook", "url": "not a url"}),
            422,
            "url: not a URL",
        ),
        (
            json!({"brand_id": b.brand, "name": " ", "kind": "webhook", "url": "https://x.example"}),
            422,
            "name must not be empty",
        ),
        (
            json!({"brand_id": b.brand, "name": "sms", "kind": "sms", "url": "https://x.example"}),
            400,
            "kind",
        ),
    ] {
        let reply = b.call(ChannelCreateRequest::NAME, &b.admin, body).await;
        assert_eq!(reply.status, status, "{named}: {}", reply.body);
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains(named),
            "{named}: {}",
            reply.body
        );
    }
    let viewer_create = b
        .call(
            ChannelCreateRequest::NAME,
            &b.viewer,
            json!({"brand_id": b.brand, "name": "v", "kind": "webhook", "url": "https://x.example"}),
        )
        .await;
    assert_eq!(viewer_create.status, 403, "{}", viewer_create.body);
    assert_eq!(b.channels(&b.admin).await.as_array().map(Vec::len), Some(2));

    // Another brand's admin: sees none of them, and each id answers as an unknown one.
    assert_eq!(b.channels(&b.other_admin).await, json!([]));
    let unknown = Uuid::new_v4();
    for function in ["channels_delete", "channels_test"] {
        let theirs = b
            .call(function, &b.other_admin, json!({"channel_id": id}))
            .await;
        let nobodys = b
            .call(function, &b.other_admin, json!({"channel_id": unknown}))
            .await;
        assert_eq!((theirs.status, nobodys.status), (404, 404), "{function}");
        assert_eq!(
            theirs.body.to_string().replace(&id.to_string(), "ID"),
            nobodys.body.to_string().replace(&unknown.to_string(), "ID"),
            "{function}"
        );
    }
    let unknown_brand = Uuid::new_v4();
    let theirs = b
        .call(
            ChannelListRequest::NAME,
            &b.other_admin,
            json!({"brand_id": b.brand}),
        )
        .await;
    let nobodys = b
        .call(
            ChannelListRequest::NAME,
            &b.other_admin,
            json!({"brand_id": unknown_brand}),
        )
        .await;
    assert_eq!((theirs.status, nobodys.status), (404, 404));
    assert_eq!(
        theirs.body.to_string().replace(&b.brand.to_string(), "ID"),
        nobodys
            .body
            .to_string()
            .replace(&unknown_brand.to_string(), "ID")
    );
    let theirs = b
        .call(
            ChannelCreateRequest::NAME,
            &b.other_admin,
            json!({"brand_id": b.brand, "name": "x", "kind": "webhook", "url": "https://x.example"}),
        )
        .await;
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    let runner = b.app.runner_token(&[]).await;
    let refused = b.call(ChannelListRequest::NAME, &runner, json!({})).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(b.channels(&b.admin).await.as_array().map(Vec::len), Some(2));

    // The admin deletes one; it is gone.
    let deleted = b
        .call(
            ChannelDeleteRequest::NAME,
            &b.admin,
            json!({"channel_id": id}),
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(b.channels(&b.admin).await.as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn an_item_is_announced_once_signed_and_resolved_once_and_an_acknowledgement_silences_it() {
    let b = brands().await;
    let receiver = Receiver::start().await;
    let (_, secret) = b.webhook(&receiver.url).await;
    let metrics = Metrics::default();
    let [queue, shelf] = b.rules;

    b.flag(queue).await;
    // Shelf gaps is flagged too, but an operator acknowledged it first.
    b.flag(shelf).await;
    let operator = b.app.brand_token("ops", Role::Operator, b.brand).await;
    let until = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let acked = b
        .call(
            AcknowledgeRequest::NAME,
            &operator,
            json!({"branch_rule_id": shelf, "reason": "camera moved", "until": until}),
        )
        .await;
    assert_eq!(acked.status, 200, "{}", acked.body);

    for _ in 0..3 {
        b.sweep_and_deliver(&metrics).await;
    }
    let received = receiver.received();
    assert_eq!(
        received.len(),
        1,
        "one message for one item, however many sweeps"
    );
    let firing = &received[0];
    assert!(signed_by(firing, &secret), "{firing:?}");
    assert!(
        !signed_by(firing, "whsec_other"),
        "another secret does not verify"
    );
    let body = firing.json();
    assert_eq!(body["event"], "firing", "{body}");
    assert_eq!(body["kind"], "needs_attention");
    assert_eq!(body["subject"]["rule_name"], "Queue length");
    assert_eq!(
        body["summary"],
        format!(
            "Queue length at {} ({}) needs attention: failed 3 times in a row (last: camera offline)",
            body["subject"]["branch_name"].as_str().unwrap_or_default(),
            body["subject"]["brand_name"].as_str().unwrap_or_default()
        )
    );
    assert!(!firing.header("res-delivery").is_empty());

    // It clears: one resolve, naming the same item.
    b.clear(queue).await;
    b.sweep_and_deliver(&metrics).await;
    b.sweep_and_deliver(&metrics).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "{received:?}");
    let resolved = received[1].json();
    assert_eq!(resolved["event"], "resolved");
    assert_eq!(resolved["item"], body["item"]);
    assert!(signed_by(&received[1], &secret));
    assert_ne!(
        received[1].header("res-delivery"),
        firing.header("res-delivery")
    );

    // Flagged anew: a new item, announced.
    b.flag(queue).await;
    b.sweep_and_deliver(&metrics).await;
    let received = receiver.received();
    assert_eq!(received.len(), 3);
    assert_ne!(
        received[2].json()["item"],
        body["item"],
        "a new flag is a new item"
    );
    let metrics_text = metrics.encode().unwrap_or_default();
    assert!(
        metrics_text.contains("res_functions_notifications_total{kind=\"delivered\"} 3"),
        "{metrics_text}"
    );
}

/// docs/operate.md: an acknowledgement silences an item while it lasts — a new one is not
/// announced (nor resolved), and acknowledging one already announced sends nothing; when
/// that one clears, `resolved` closes the incident its firing message opened.
#[tokio::test]
async fn an_acknowledged_item_is_resolved_when_it_clears_only_if_it_was_announced() {
    let b = brands().await;
    let receiver = Receiver::start().await;
    b.webhook(&receiver.url).await;
    let metrics = Metrics::default();
    let [queue, shelf] = b.rules;
    let operator = b.app.brand_token("ops", Role::Operator, b.brand).await;
    let acknowledge = |rule: Uuid| {
        let until = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
        b.call(
            AcknowledgeRequest::NAME,
            &operator,
            json!({"branch_rule_id": rule, "reason": "on it", "until": until}),
        )
    };

    // Announced, then acknowledged: the acknowledgement itself sends nothing.
    b.flag(queue).await;
    b.sweep_and_deliver(&metrics).await;
    assert_eq!(receiver.received().len(), 1);
    let firing = receiver.received()[0].json();
    assert_eq!(firing["event"], "firing");
    assert_eq!(acknowledge(queue).await.status, 200);
    // Acknowledged before anyone heard of it: never announced.
    b.flag(shelf).await;
    assert_eq!(acknowledge(shelf).await.status, 200);
    b.sweep_and_deliver(&metrics).await;
    b.sweep_and_deliver(&metrics).await;
    assert_eq!(receiver.received().len(), 1, "{:?}", receiver.received());

    // Both clear while acknowledged: the announced one is resolved, the other is silent.
    b.clear(queue).await;
    b.clear(shelf).await;
    b.sweep_and_deliver(&metrics).await;
    b.sweep_and_deliver(&metrics).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "{received:?}");
    let resolved = received[1].json();
    assert_eq!(
        (&resolved["event"], &resolved["item"]),
        (&json!("resolved"), &firing["item"])
    );
}

#[tokio::test]
async fn a_failing_channel_says_so_and_gets_the_message_once_it_answers_again() {
    let b = brands().await;
    let receiver = Receiver::start().await;
    b.webhook(&receiver.url).await;
    let slack = b
        .call(
            ChannelCreateRequest::NAME,
            &b.admin,
            json!({"brand_id": b.brand, "name": "slack", "kind": "slack", "url": receiver.url.replace("/hook", "/hook?slack")}),
        )
        .await;
    assert_eq!(slack.status, 200, "{}", slack.body);
    let metrics = Metrics::default();
    receiver.down();
    b.flag(b.rules[0]).await;
    b.sweep_and_deliver(&metrics).await;
    assert!(receiver.refused() >= 2, "both channels tried");
    let channels = b.channels(&b.viewer).await;
    for channel in channels.as_array().cloned().unwrap_or_default() {
        assert!(channel["failing_since"].is_string(), "{channel}");
        assert_eq!(channel["pending"], 1, "{channel}");
        assert!(
            channel["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("503")),
            "{channel}"
        );
    }
    // The console's fleet page says so, to the brand's viewer and not to another brand.
    let mut console = res_tests::console::Console::new(&b.app.base);
    assert_eq!(console.sign_in(&b.viewer).await.status, 303);
    let page = console.get("/console/").await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("<h2 id=\"channels-h\">Alert channels</h2>"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("<span class=\"badge bad\">failing</span> since"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("the channel answered 503 Service Unavailable")
    );
    let mut stranger = res_tests::console::Console::new(&b.app.base);
    assert_eq!(stranger.sign_in(&b.other_admin).await.status, 303);
    let theirs = stranger.get("/console/").await;
    assert!(!theirs.body.contains("Alert channels"), "{}", theirs.body);

    receiver.up();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    b.sweep_and_deliver(&metrics).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "one message a channel: {received:?}");
    let slack_text = received
        .iter()
        .find_map(|r| r.json()["text"].as_str().map(str::to_owned))
        .unwrap_or_default();
    assert!(
        slack_text.starts_with(":rotating_light: Queue length at "),
        "{slack_text}"
    );
    for channel in b
        .channels(&b.viewer)
        .await
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        assert!(channel["failing_since"].is_null(), "{channel}");
        assert_eq!(channel["pending"], 0, "{channel}");
    }
    // A test message goes through the same outbox.
    let id = b.channels(&b.admin).await[0]["channel_id"].clone();
    let tested = b
        .call(
            ChannelTestRequest::NAME,
            &b.admin,
            json!({"channel_id": id}),
        )
        .await;
    assert_eq!(tested.status, 200, "{}", tested.body);
    b.sweep_and_deliver(&metrics).await;
    let received = receiver.received();
    assert_eq!(received.len(), 3);
    // As docs/operate.md describes it: about nothing, signed like the others.
    let test = received[2].json();
    assert_eq!(
        (&test["event"], &test["kind"]),
        (&json!("test"), &Value::Null),
        "{test}"
    );
    assert!(
        test["item"]
            .as_str()
            .is_some_and(|i| i.starts_with("test:")),
        "{test}"
    );
    assert_eq!(
        test["summary"],
        format!(
            "{} test message: asked by brand admin",
            test["subject"]["brand_name"].as_str().unwrap_or_default()
        )
    );
    assert!(test["subject"].get("rule_name").is_none(), "{test}");
}

#[tokio::test]
async fn a_delivery_told_to_stop_hands_its_claims_back_and_the_next_round_sends_them_at_once() {
    let b = brands().await;
    let receiver = Receiver::start().await;
    b.webhook(&receiver.url).await;
    b.flag(b.rules[0]).await;
    evaluate(&b.app.pool, RunnerThresholds::default())
        .await
        .expect("evaluates");
    let metrics = Metrics::default();
    let client = client().expect("a client");
    let stopping = CancellationToken::new();
    stopping.cancel();
    let round = deliver_round(
        &b.app.pool,
        &client,
        Duration::from_secs(1),
        &metrics,
        &stopping,
    )
    .await
    .expect("a round");
    assert_eq!(round, Default::default());
    assert!(receiver.received().is_empty());
    let (attempts, due): (i32, bool) = sqlx::query_as(
        "SELECT attempts, next_attempt_at <= now() FROM notification_outbox \
         WHERE delivered_at IS NULL",
    )
    .fetch_one(&b.app.pool)
    .await
    .expect("the message still waits");
    assert_eq!(
        (attempts, due),
        (0, true),
        "handed back, not held for a minute"
    );
    // Without a wait: the hand-back left it due now.
    let round = deliver_round(
        &b.app.pool,
        &client,
        Duration::from_secs(1),
        &metrics,
        &CancellationToken::new(),
    )
    .await
    .expect("a round");
    assert_eq!(round.delivered, 1);
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_gone_runner_and_an_absent_offline_owner_are_announced_and_resolved_when_it_calls() {
    let b = brands().await;
    let receiver = Receiver::start().await;
    b.webhook(&receiver.url).await;
    let branch: Uuid = sqlx::query_scalar("SELECT branch_id FROM branch_rules WHERE id = $1")
        .bind(b.rules[0])
        .fetch_one(&b.app.pool)
        .await
        .expect("the branch");
    let runner = b.app.runner_token(&[branch]).await;
    let registered = b
        .call(
            RegisterRequest::NAME,
            &runner,
            json!({"runner_id": "site-17", "boot_id": "boot-1"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    for statement in [
        "INSERT INTO branch_offline_owners (branch_id, key_id, runner_id) \
         SELECT $1, key_id, runner_id FROM runners",
        "UPDATE runners SET last_seen_at = now() - interval '2 hours' WHERE $1::uuid IS NOT NULL",
    ] {
        b.app.exec(statement, &[branch]).await;
    }
    let metrics = Metrics::default();
    b.sweep_and_deliver(&metrics).await;
    let mut kinds: Vec<(String, String)> = receiver
        .received()
        .iter()
        .map(|r| {
            let body = r.json();
            (
                body["kind"].as_str().unwrap_or_default().to_owned(),
                body["summary"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert_eq!(kinds[0].0, "offline_owner_absent");
    assert!(
        kinds[0]
            .1
            .contains("lost its offline owner: its offline owner site-17 silent since "),
        "{kinds:?}"
    );
    assert_eq!(kinds[1].0, "runner_gone");
    assert!(kinds[1].1.starts_with("runner site-17 ("), "{kinds:?}");

    // It calls again: both resolve.
    b.app
        .exec(
            "UPDATE runners SET last_seen_at = now() WHERE $1::uuid IS NOT NULL",
            &[branch],
        )
        .await;
    b.sweep_and_deliver(&metrics).await;
    let events: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.json()["event"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(events, ["firing", "firing", "resolved", "resolved"]);
}

/// By default a brand's admin cannot point a channel inside the functions' network (the
/// other tests run with `notify_private_targets`, their receivers being local).
#[tokio::test]
async fn a_channel_cannot_point_at_an_inside_address_unless_the_deployment_allows_it() {
    let app = TestApp::start_with(res_functions::state::Settings::default(), false).await;
    let brand = Seed::new(&app.pool).brand("UTC").await;
    let admin = app.brand_token("brand admin", Role::Admin, brand).await;
    for (url, host) in [
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
        ),
        ("http://127.0.0.1:54321/functions/v1/keys_list", "127.0.0.1"),
        ("http://localhost:9000/", "localhost"),
        ("http://[fd00::1]/hook", "[fd00::1]"),
    ] {
        let reply = app
            .call(
                ChannelCreateRequest::NAME,
                &admin,
                json!({"brand_id": brand, "name": "inside", "kind": "webhook", "url": url}),
            )
            .await;
        assert_eq!(reply.status, 422, "{url}: {}", reply.body);
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!(
                "url: {host} is a loopback, private or link-local address"
            )),
            "{message}"
        );
    }
    let outside = app
        .call(
            ChannelCreateRequest::NAME,
            &admin,
            json!({"brand_id": brand, "name": "outside", "kind": "webhook", "url": "https://alerts.example.com/res"}),
        )
        .await;
    assert_eq!(outside.status, 200, "{}", outside.body);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM notification_channels")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(count, 1, "only the outside one was made");
}
