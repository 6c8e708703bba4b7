//! Alerts end to end: `res-functions serve` (sweeping every second) announces a rule that
//! needs attention to a webhook receiver started here, signed, once; its resolve waits in
//! the PostgreSQL outbox while the receiver is down and across a restart of `serve`, and
//! arrives once; a rule overdue with no runner of its branch seen is announced too.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_tests::browser::Browser;
use res_tests::functions::RuleSpec;
use res_tests::processes::eventually;
use res_tests::receiver::{Receiver, signed_by};
use serde_json::Value;
use uuid::Uuid;

use super::console::sign_in;
use crate::system::{System, detector, functions_cli};

const WAIT: Duration = Duration::from_secs(40);

async fn resctl_json(system: &System, token: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let output = system.resctl(token, &args).await;
    assert!(output.status.success(), "resctl {args:?}: {output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_default()
}

async fn set_rule(system: &System, statement: &'static str, rule: Uuid) {
    sqlx::query(statement)
        .bind(rule)
        .execute(&system.pool)
        .await
        .expect("rule updated");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_signed_message_per_item_and_one_resolve_across_a_restart_with_the_receiver_down() {
    let mut system = System::start_with(&[
        "--sweep-interval",
        "1",
        "--notify-max-backoff",
        "1",
        "--runner-stale-after",
        "3",
        "--notify-private-targets",
    ])
    .await;
    let brand: Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(system.branch)
        .fetch_one(&system.pool)
        .await
        .expect("the brand");
    let admin = functions_cli(
        system.database_url(),
        &[
            "create-api-key",
            "--name",
            "brand admin",
            "--role",
            "admin",
            "--brand",
            &brand.to_string(),
        ],
    );
    let receiver = Receiver::start().await;
    let brand_arg = brand.to_string();
    let created = resctl_json(
        &system,
        &admin,
        &[
            "channels",
            "create",
            "--brand",
            &brand_arg,
            "--name",
            "ops",
            "--kind",
            "webhook",
            "--to",
            &receiver.url,
        ],
    )
    .await;
    let secret = created["secret"].as_str().unwrap_or_default().to_owned();
    assert!(secret.starts_with("whsec_"), "{created}");

    let rule = system
        .rule(
            RuleSpec {
                next_run_time: Some(Utc::now() + TimeDelta::hours(1)),
                ..RuleSpec::default()
            },
            &detector(0.0, 0),
        )
        .await;
    set_rule(
        &system,
        "UPDATE branch_rules SET needs_attention_at = now(), consecutive_failures = 3, \
             needs_attention_reason = 'failed 3 times in a row (last: camera offline)' \
         WHERE id = $1",
        rule,
    )
    .await;
    eventually("the item is announced", WAIT, || async {
        !receiver.received().is_empty()
    })
    .await;
    let firing = receiver.received()[0].clone();
    assert!(signed_by(&firing, &secret), "{firing:?}");
    assert_eq!(firing.json()["event"], "firing");
    the_documented_receiver_accepts(&firing, &secret);

    // The receiver goes down; the rule recovers: the resolve is tried and kept.
    receiver.down();
    set_rule(
        &system,
        "UPDATE branch_rules SET needs_attention_at = NULL, consecutive_failures = 0, \
             needs_attention_reason = NULL WHERE id = $1",
        rule,
    )
    .await;
    eventually("the resolve is refused by the receiver", WAIT, || async {
        receiver.refused() >= 1
    })
    .await;
    let channels = resctl_json(&system, &admin, &["channels", "list"]).await;
    let channel = &channels["channels"][0];
    assert!(channel["failing_since"].is_string(), "{channels}");
    assert_eq!(channel["pending"], 1, "{channels}");
    // The console's fleet page says so, in Chromium.
    let browser = Browser::start(1280, 900).await;
    sign_in(&browser, &system, &admin).await;
    let shown = browser.text("#channels").await;
    assert!(
        shown.contains("failing since") && shown.contains("503 Service Unavailable"),
        "{shown}"
    );

    // serve restarts while the receiver is down; the outbox is in PostgreSQL.
    assert!(system.functions.stop(), "serve stops cleanly");
    system.functions.restart().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    receiver.up();
    eventually("the resolve arrives", WAIT, || async {
        receiver.received().len() >= 2
    })
    .await;
    // Several sweeps later there is still one message of each.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "{received:?}");
    let resolved = &received[1];
    assert!(signed_by(resolved, &secret), "{resolved:?}");
    assert_eq!(resolved.json()["event"], "resolved");
    assert_eq!(resolved.json()["item"], firing.json()["item"]);
    assert_ne!(
        resolved.header("res-delivery"),
        firing.header("res-delivery")
    );
    let channels = resctl_json(&system, &admin, &["channels", "list"]).await;
    assert!(
        channels["channels"][0]["failing_since"].is_null(),
        "{channels}"
    );

    // Overdue with no runner of its branch ever seen: announced as such.
    set_rule(
        &system,
        "UPDATE branch_rules SET next_run_time = now() - interval '10 minutes' WHERE id = $1",
        rule,
    )
    .await;
    eventually("the overdue rule is announced", WAIT, || async {
        receiver.received().len() >= 3
    })
    .await;
    let overdue = receiver.received()[2].json();
    assert_eq!(overdue["kind"], "overdue", "{overdue}");
    assert!(
        overdue["summary"]
            .as_str()
            .is_some_and(|s| s.contains("no runner of the branch seen ever")),
        "{overdue}"
    );
    let text = String::from_utf8_lossy(&system.resctl(&admin, &["channels", "list"]).await.stdout)
        .into_owned();
    assert!(text.contains("ops") && text.contains(" ok "), "{text}");
}

/// The fenced block of docs/operate.md in `lang` that contains `needle`.
fn documented(lang: &str, needle: &str) -> String {
    let markdown =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operate.md"))
            .expect("docs/operate.md");
    markdown
        .split(&format!("```{lang}\n"))
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("no {lang} block with {needle} in docs/operate.md"))
        .to_owned()
}

/// docs/operate.md's webhook body has the fields a delivery has, and its Python check,
/// run as written, accepts the delivery and refuses it under another secret.
fn the_documented_receiver_accepts(delivery: &res_tests::receiver::Received, secret: &str) {
    let shape: Value = serde_json::from_str(&documented("json", "\"event\": \"firing\""))
        .expect("the documented body is JSON");
    let body = delivery.json();
    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(keys(&shape), keys(&body), "{body}");
    assert_eq!(keys(&shape["subject"]), keys(&body["subject"]), "{body}");
    let check = documented("python", "hmac.new");
    for (key, accepted) in [(secret, true), ("whsec_other", false)] {
        let program = format!(
            "import hashlib, hmac, sys, time\n\
             secret = {key:?}\n\
             timestamp = {timestamp:?}\n\
             signature = {signature:?}\n\
             body = sys.stdin.buffer.read()\n\
             {check}\n\
             sys.exit(0 if ok else 1)\n",
            timestamp = delivery.header("res-timestamp"),
            signature = delivery.header("res-signature"),
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &program])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write as _;
            stdin.write_all(&delivery.body).expect("the body written");
        }
        let status = child.wait().expect("python3 ends");
        assert_eq!(status.success(), accepted, "{key}: {program}");
    }
}
