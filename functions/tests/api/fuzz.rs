//! Structure-aware fuzzing of the running service: thousands of malformed and hostile
//! requests (seeded, bounded in count and time) built from valid bodies of every function,
//! each aimed at ids outside the caller's scope or at no id at all. No answer may be a
//! 5xx, every refusal has the documented JSON error shape, and the database is unchanged.
//!
//! The operator functions and the console's pages and forms get the same: arrays for
//! objects, NUL and CR/LF in every field and query string, forged and foreign cursors.
//!
//! `RES_FUZZ_SEED` replays a run; `RES_FUZZ_REQUESTS` sets its size (default 10,000 site
//! requests and 6,000 operator and console ones).

use res_shared::wire::{
    Call, ClaimRequest, HeartbeatRequest, PauseRequest, PlanRequest, RegisterRequest,
    SetNextRunTimeRequest, ViolationRequest,
};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use res_shared::wire::RuleListRequest;
use res_tests::functions as support;
use serde_json::{Map, Value, json};
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

/// Stops early past this, whatever the count: the suite must stay quick.
const TIME_LIMIT: Duration = Duration::from_secs(90);

/// Strings an attacker tries.
const HOSTILE: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "a\u{0}b",
    "line\nforged INFO line",
    "\u{1b}[31mred\u{1b}]0;title\u{7}",
    "\r\n\r\nHTTP/1.1 200 OK",
    "' OR 1=1 --",
    "\u{202e}reversed",
    "😀",
    "%s%n%x",
    "{\"nested\": true}",
];

/// Raw JSON fragments serde and PostgreSQL disagree about, or that are just awkward.
const RAW_VALUES: &[&str] = &[
    "1e400",
    "-1e400",
    "\"\\ud800\"",
    "\"\\udc00x\"",
    "\"\\u0000\"",
    "18446744073709551616",
    "-9223372036854775809",
    "1.5",
    "-0",
    "true",
    "null",
    "[]",
    "{}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
];

struct Target {
    function: &'static str,
    body: Value,
}

fn targets(foreign_rule: Uuid, foreign_execution: Uuid, own_rule: Uuid) -> Vec<Target> {
    let now = Utc::now();
    vec![
        Target {
            function: PlanRequest::NAME,
            body: json!({"runner_id": "fuzz", "since": "not-a-cursor"}),
        },
        Target {
            function: ClaimRequest::NAME,
            body: json!({"branch_rule_id": foreign_rule, "runner_id": "fuzz", "lease_seconds": 30, "boot_id": "b"}),
        },
        Target {
            function: HeartbeatRequest::NAME,
            body: json!({"execution_id": foreign_execution, "claim_token": "t", "status": "running"}),
        },
        Target {
            function: ViolationRequest::NAME,
            body: json!({"execution_id": foreign_execution, "claim_token": "t", "kind": "k",
                         "details": {"a": 1}, "idempotency_key": "key"}),
        },
        Target {
            function: PauseRequest::NAME,
            body: json!({"execution_id": foreign_execution, "claim_token": "t",
                         "delay_seconds": 60, "context": {"node": "wait"}}),
        },
        Target {
            function: SetNextRunTimeRequest::NAME,
            body: json!({"branch_rule_id": foreign_rule, "is_last_run_failed": false,
                         "execution_id": foreign_execution, "claim_token": "t",
                         "status": "completed", "result": {}, "metrics": {}, "error": null,
                         "output": [{"node_id": "detect", "visit": 1, "stream": "stderr",
                                     "text": "camera offline", "cut_bytes": 10}]}),
        },
        Target {
            // The caller's own rule, offline, but naming an execution that exists elsewhere.
            function: SetNextRunTimeRequest::NAME,
            body: json!({"branch_rule_id": own_rule, "is_last_run_failed": true,
                         "execution_id": foreign_execution, "claim_token": "offline-t",
                         "offline": {"runner_id": "fuzz",
                                     "started_at": now - TimeDelta::minutes(2),
                                     "finished_at": now - TimeDelta::minutes(1),
                                     "violations": [{"kind": "k", "details": {}, "idempotency_key": "o"}]}}),
        },
        Target {
            function: RegisterRequest::NAME,
            body: json!({"runner_id": "fuzz", "boot_id": "boot"}),
        },
    ]
}

/// A random JSON value of any type, hostile strings included.
fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..8) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>() * 1e6),
        4 => json!(HOSTILE[rng.random_range(0..HOSTILE.len())]),
        5 => json!("x".repeat(rng.random_range(0..400))),
        6 if depth < 3 => Value::Array(
            (0..rng.random_range(0..3))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ if depth < 3 => {
            let mut map = Map::new();
            for _ in 0..rng.random_range(0..3) {
                let key = HOSTILE[rng.random_range(0..HOSTILE.len())].to_owned();
                map.insert(key, random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
        // No well-formed id: a fresh one would let an offline report create its run.
        _ => json!(rng.random_range(0..100)),
    }
}

/// A field path inside `value` (objects only), picked at random.
fn random_field(rng: &mut StdRng, value: &Value) -> Option<Vec<String>> {
    let map = value.as_object()?;
    if map.is_empty() {
        return None;
    }
    let keys: Vec<&String> = map.keys().collect();
    let key = keys[rng.random_range(0..keys.len())].clone();
    let mut path = vec![key.clone()];
    if rng.random_range(0..3) == 0
        && let Some(deeper) = random_field(rng, &map[&key])
    {
        path.extend(deeper);
    }
    Some(path)
}

fn at<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    path.iter()
        .try_fold(value, |v, key| v.as_object_mut()?.get_mut(key))
}

/// One mutated request body as raw bytes.
fn mutate(rng: &mut StdRng, body: &Value) -> Vec<u8> {
    let mut body = body.clone();
    let rounds = rng.random_range(1..4);
    let mut raw_splice: Option<(Vec<String>, &str)> = None;
    for _ in 0..rounds {
        let Some(path) = random_field(rng, &body) else {
            break;
        };
        match rng.random_range(0..6) {
            0 => {
                // Drop a field.
                let (last, parent) = path.split_last().expect("a path");
                if let Some(Value::Object(map)) = at(&mut body, parent) {
                    map.remove(last);
                }
            }
            1 | 2 => {
                if let Some(slot) = at(&mut body, &path) {
                    *slot = random_value(rng, 0);
                }
            }
            3 => {
                if let Some(slot) = at(&mut body, &path) {
                    *slot = json!(HOSTILE[rng.random_range(0..HOSTILE.len())]);
                }
            }
            4 => {
                if let Some(Value::Object(map)) = at(&mut body, &path[..path.len() - 1]) {
                    map.insert(format!("unknown_{}", rng.random_range(0..9)), json!(1));
                }
            }
            _ => raw_splice = Some((path, RAW_VALUES[rng.random_range(0..RAW_VALUES.len())])),
        }
    }
    let text = match raw_splice {
        // Values serde_json cannot build go in as text: a placeholder is replaced.
        Some((path, raw)) => {
            let marker = format!("__raw_{}__", rng.random_range(0..u32::MAX));
            if let Some(slot) = at(&mut body, &path) {
                *slot = json!(marker);
            }
            body.to_string().replace(&format!("\"{marker}\""), raw)
        }
        None => body.to_string(),
    };
    let mut bytes = text.into_bytes();
    match rng.random_range(0..12) {
        // Cut anywhere, even inside a UTF-8 sequence.
        0 => bytes.truncate(rng.random_range(0..bytes.len().max(1))),
        1 => bytes.extend_from_slice(b" trailing"),
        2 => {
            bytes.insert(0, b'[');
            bytes.push(b']');
        }
        _ => {}
    }
    bytes
}

/// The run's seed (`RES_FUZZ_SEED`, else random), its size (`RES_FUZZ_REQUESTS`, else
/// `default`) and its generator.
fn run_size(default: usize) -> (u64, usize, StdRng) {
    let seed: u64 = std::env::var("RES_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let count = std::env::var("RES_FUZZ_REQUESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    (seed, count, StdRng::seed_from_u64(seed))
}

#[tokio::test]
async fn thousands_of_hostile_requests_get_4xx_in_the_error_shape_and_change_nothing() {
    let (seed, count, mut rng) = run_size(10_000);

    let app = TestApp::start().await;
    let seed_data = Seed::new(&app.pool);
    let (branch_a, own_rule) = seed_data.due_rule(RuleSpec::default()).await;
    let (branch_b, foreign_rule) = seed_data.due_rule(RuleSpec::default()).await;
    let a = app.runner_token(&[branch_a]).await;
    let b = app.runner_token(&[branch_b]).await;
    let foreign = app.claim(&b, foreign_rule, "runner-b").await;
    let tokens = [
        a.clone(),
        a.clone(),
        a.clone(),
        a,
        "res_forged".to_owned(),
        String::new(),
    ];
    let targets = targets(foreign_rule, foreign.execution, own_rule);
    let before = app.fingerprint().await;

    let started = Instant::now();
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut sent = 0;
    while sent < count && started.elapsed() < TIME_LIMIT {
        let target = &targets[rng.random_range(0..targets.len())];
        let body = mutate(&mut rng, &target.body);
        let token = &tokens[rng.random_range(0..tokens.len())];
        let mut request = app
            .client
            .post(format!("{}/functions/v1/{}", app.base, target.function))
            .header("content-type", "application/json")
            .body(body.clone());
        if !token.is_empty() {
            request = request.bearer_auth(token);
        }
        if rng.random_range(0..10) == 0 {
            request = request.header("accept-encoding", "identity;q=0, *;q=0");
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let shown = String::from_utf8_lossy(&body);
        let context = format!(
            "seed {seed}, request {sent}: {} {shown} -> {status} {text}",
            target.function
        );
        assert!(status < 500, "{context}");
        if status >= 400 {
            let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            assert!(
                error["error"]["code"]
                    .as_str()
                    .is_some_and(|c| !c.is_empty()),
                "no error code: {context}"
            );
            assert!(
                error["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "no error message: {context}"
            );
        } else {
            // Only reads may succeed: everything else aims outside the caller's scope.
            assert!(
                matches!(target.function, PlanRequest::NAME | RegisterRequest::NAME),
                "an action succeeded: {context}"
            );
        }
        *statuses.entry(status).or_default() += 1;
        sent += 1;
    }
    assert_eq!(
        app.fingerprint().await,
        before,
        "seed {seed}: the database changed"
    );
    assert!(
        sent >= count.min(500),
        "only {sent} requests in the time limit"
    );
    eprintln!(
        "fuzz: seed {seed}, {sent} requests in {:.1} s, statuses {statuses:?}",
        started.elapsed().as_secs_f64()
    );
}

/// Bodies of the operator functions, actions aimed at another brand's rule and execution,
/// reads at the caller's own (which may answer 200), each list given `cursor`.
fn operator_targets(foreign: &Foreign, own_rule: Uuid, cursor: &str) -> Vec<Target> {
    let (foreign_rule, foreign_execution) = (foreign.rule, foreign.execution);
    let act = |function, body| Target { function, body };
    let why = "fuzzing";
    let mut targets: Vec<Target> = [
        "rules_run_now",
        "rules_pause",
        "rules_resume",
        "rules_force_stop",
    ]
    .into_iter()
    .map(|action| {
        act(
            action,
            json!({"branch_rule_id": foreign_rule, "reason": why}),
        )
    })
    .collect();
    targets.extend([
        act(
            "executions_cancel",
            json!({"execution_id": foreign_execution, "reason": why}),
        ),
        act(
            "executions_show",
            json!({"execution_id": foreign_execution}),
        ),
        act(
            "executions_show",
            json!({"execution_id": foreign_execution, "output": true, "output_node": "detect"}),
        ),
        act(
            "rules_describe",
            json!({"branch_rule_id": own_rule, "next_runs": 3}),
        ),
        act(
            "executions_list",
            json!({"branch_rule_id": own_rule, "status": "failed",
            "since": "2026-01-01T00:00:00Z", "limit": 5, "after": cursor}),
        ),
        act(
            "rules_list",
            json!({"rule_name": "Queue", "condition": "idle", "limit": 1, "after": cursor}),
        ),
        act(
            "runners_list",
            json!({"state": "alive", "limit": 2, "after": cursor}),
        ),
        act(
            "violations_list",
            json!({"kind": "k", "limit": 2, "after": cursor}),
        ),
        act("keys_list", json!({"include_revoked": true})),
        act("fleet_summary", json!({"brand_id": foreign.brand})),
        act(
            "attention_acknowledge",
            json!({"branch_rule_id": foreign_rule, "reason": why, "until": "2030-01-01T00:00:00Z"}),
        ),
        act(
            "keys_create",
            json!({"name": "fuzz", "role": "viewer", "brand_ids": [foreign.brand]}),
        ),
        act("keys_rotate", json!({"key_id": foreign.key})),
        act("keys_revoke", json!({"key_id": foreign.key})),
        act("config_export", json!({"brand_id": foreign.brand})),
        act("config_export", json!({"catalogue": true})),
        act("config_history", json!({"brand_id": foreign.brand, "limit": 5})),
        act("config_show", json!({"revision": 1})),
        act(
            "channels_create",
            json!({"brand_id": foreign.brand, "name": why, "kind": "webhook", "url": "https://x.example/h"}),
        ),
        act("channels_list", json!({"brand_id": foreign.brand})),
        act("channels_delete", json!({"channel_id": foreign.channel})),
        act("channels_test", json!({"channel_id": foreign.channel})),
        act(
            "secrets_set",
            json!({"brand_id": foreign.brand, "name": "b-camera", "value": why}),
        ),
        act("secrets_list", json!({"brand_id": foreign.brand})),
        act(
            "secrets_delete",
            json!({"brand_id": foreign.brand, "name": "b-camera"}),
        ),
        act(
            "config_apply",
            json!({"document": format!("brand: {{name: X, id: {}}}", foreign.brand), "message": why}),
        ),
    ]);
    targets
}

/// Another brand's objects, which every call here aims at.
struct Foreign {
    brand: Uuid,
    rule: Uuid,
    execution: Uuid,
    key: Uuid,
    channel: Uuid,
}

/// Reads of the operator functions: they may answer 200 (in scope, or an empty page).
const OPERATOR_READS: &[&str] = &[
    "rules_describe",
    "executions_list",
    "rules_list",
    "runners_list",
    "violations_list",
    "keys_list",
    "fleet_summary",
    "channels_list",
    "secrets_list",
];

/// A console query value an attacker tries, percent-encoded as a browser would send it
/// (or not: raw `%00`, `%0d%0a`, and array syntax too).
fn console_query(rng: &mut StdRng, cursors: &[String]) -> String {
    const KEYS: &[&str] = &[
        "brand",
        "branch",
        "rule",
        "status",
        "trigger",
        "since",
        "until",
        "after",
        "name",
        "condition",
        "state",
        "done",
        "next",
        "after[]",
        "status[]",
    ];
    let mut pairs = Vec::new();
    for _ in 0..rng.random_range(1..4) {
        let key = KEYS[rng.random_range(0..KEYS.len())];
        let value = match rng.random_range(0..5) {
            0 => cursors[rng.random_range(0..cursors.len())].clone(),
            1 => {
                ["%00", "%0d%0a", "a%00b", "%E0%80", "%", "%zz"][rng.random_range(0..6)].to_owned()
            }
            _ => {
                let hostile = HOSTILE[rng.random_range(0..HOSTILE.len())];
                serde_urlencoded::to_string([("v", hostile)])
                    .map(|t| t.trim_start_matches("v=").to_owned())
                    .unwrap_or_default()
            }
        };
        pairs.push(format!("{key}={value}"));
    }
    pairs.join("&")
}

#[tokio::test]
async fn operator_functions_and_console_forms_under_hostile_input_answer_4xx_and_change_nothing() {
    use res_functions::auth::Role;
    use res_functions::db::api_keys::KeyScope;
    use res_tests::console::Console;

    let (seed, count, mut rng) = run_size(6_000);

    let app = TestApp::start().await;
    let seed_data = Seed::new(&app.pool);
    let brand_a = seed_data.brand("Asia/Riyadh").await;
    let branch_a = seed_data.branch(brand_a, None).await;
    let own_rule = seed_data.branch_rule(branch_a, RuleSpec::default()).await;
    seed_data.branch_rule(branch_a, RuleSpec::default()).await;
    let (branch_b, foreign_rule) = seed_data.due_rule(RuleSpec::default()).await;
    let b = app.runner_token(&[branch_b]).await;
    let foreign = app.claim(&b, foreign_rule, "runner-b").await;
    let (brand_b, key_b): (Uuid, Uuid) = sqlx::query_as(
        "SELECT b.brand_id, k.id FROM branches b, api_keys k \
         WHERE b.id = $1 AND $1 = ANY(k.branch_ids)",
    )
    .bind(branch_b)
    .fetch_one(&app.pool)
    .await
    .expect("brand B and its runner key");
    let channel_b: Uuid = sqlx::query_scalar(
        "INSERT INTO notification_channels (brand_id, name, kind, url, secret, created_by) \
         VALUES ($1, 'b hook', 'webhook', 'https://b.example/hook', 'whsec_b', 'b admin') \
         RETURNING id",
    )
    .bind(brand_b)
    .fetch_one(&app.pool)
    .await
    .expect("brand B's channel");
    // A secret of brand B that every secrets call aims at (its sealed bytes are never read).
    sqlx::query(
        "INSERT INTO secrets (brand_id, name, key_id, wrapped_key, sealed_value, created_by, updated_by) \
         VALUES ($1, 'b-camera', 'k', '\\x00', '\\x00', 'b admin', 'b admin')",
    )
    .bind(brand_b)
    .execute(&app.pool)
    .await
    .expect("brand B's secret");
    let foreign = Foreign {
        brand: brand_b,
        rule: foreign_rule,
        execution: foreign.execution,
        key: key_b,
        channel: channel_b,
    };
    let scope = KeyScope {
        brand_ids: vec![brand_a],
        ..KeyScope::default()
    };
    let operator = app.token("fuzz operator", Role::Operator, &scope).await;
    let admin = app.token("fuzz admin", Role::Admin, &scope).await;
    let viewer = app.token("fuzz viewer", Role::Viewer, &scope).await;
    // A real cursor of one list (offered to the others), a forged one, one holding NUL.
    let page = app
        .call(RuleListRequest::NAME, &operator, json!({"limit": 1}))
        .await;
    let real = page.body["next"].as_str().unwrap_or_default().to_owned();
    assert!(!real.is_empty(), "{}", page.body);
    use base64::Engine as _;
    let encode = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let cursors = vec![
        real.clone(),
        encode(
            json!({"list": "executions_list", "filters": "0", "key": ["2026-01-01T00:00:00Z", Uuid::nil()]}),
        ),
        encode(json!({"list": "runners_list", "filters": "0", "key": ["a\u{0}b", Uuid::nil()]})),
        encode(json!(["2026-01-01T00:00:00Z", Uuid::nil()])),
        "!!!".to_owned(),
    ];
    let targets: Vec<Target> = cursors
        .iter()
        .flat_map(|c| operator_targets(&foreign, own_rule, c))
        .collect();
    let tokens = [
        operator.clone(),
        admin.clone(),
        viewer.clone(),
        "res_forged".to_owned(),
    ];
    let mut console = Console::new(&app.base);
    assert_eq!(console.sign_in(&operator).await.status, 303);
    let csrf = console
        .get(&format!("/console/rules/{own_rule}"))
        .await
        .csrf()
        .unwrap_or_default();
    let before = app.fingerprint().await;

    let started = Instant::now();
    let mut statuses: BTreeMap<(&str, u16), usize> = BTreeMap::new();
    let mut sent = 0;
    while sent < count && started.elapsed() < TIME_LIMIT {
        let (kind, status, context) = match rng.random_range(0..4) {
            0 | 1 => {
                let target = &targets[rng.random_range(0..targets.len())];
                let body = mutate(&mut rng, &target.body);
                let token = &tokens[rng.random_range(0..tokens.len())];
                let reply = app
                    .call_raw(target.function, Some(token), body.clone())
                    .await;
                let context = format!(
                    "seed {seed}, request {sent}: {} {} -> {} {}",
                    target.function,
                    String::from_utf8_lossy(&body),
                    reply.status,
                    reply.body
                );
                if reply.status >= 400 {
                    assert!(
                        reply.body["error"]["code"]
                            .as_str()
                            .is_some_and(|c| !c.is_empty())
                            && reply.body["error"]["message"]
                                .as_str()
                                .is_some_and(|m| !m.is_empty()),
                        "not the error shape: {context}"
                    );
                } else {
                    assert!(
                        OPERATOR_READS.contains(&target.function),
                        "an action succeeded: {context}"
                    );
                }
                ("function", reply.status, context)
            }
            2 => {
                let page = [
                    "/console/",
                    "/console/rules",
                    "/console/executions",
                    "/console/runners",
                    "/console/sign-in",
                ][rng.random_range(0..5)];
                let path = format!("{page}?{}", console_query(&mut rng, &cursors));
                let answer = console.get(&path).await;
                (
                    "console page",
                    answer.status,
                    format!(
                        "seed {seed}, request {sent}: GET {path} -> {}",
                        answer.status
                    ),
                )
            }
            _ => {
                let hostile = HOSTILE[rng.random_range(0..HOSTILE.len())];
                let foreign_ids = format!("{foreign_rule},{hostile}");
                let (path, form): (String, Vec<(&str, &str)>) = match rng.random_range(0..5) {
                    0 => (
                        format!(
                            "/console/rules/{foreign_rule}/{}",
                            ["run-now", "pause", "resume", "force-stop"][rng.random_range(0..4)]
                        ),
                        vec![("csrf", csrf.as_str()), ("reason", hostile)],
                    ),
                    1 => (
                        format!("/console/executions/{}/cancel", foreign.execution),
                        vec![("csrf", csrf.as_str()), ("reason", hostile)],
                    ),
                    // The caller's own rule, with a reason the functions must refuse or a
                    // forged token: nothing may change.
                    2 => (
                        format!("/console/rules/{own_rule}/pause"),
                        if rng.random::<bool>() {
                            vec![("csrf", hostile), ("reason", "fuzzing")]
                        } else {
                            vec![
                                ("csrf", csrf.as_str()),
                                (
                                    "reason",
                                    ["", " ", "\u{0}", "a\u{0}b"][rng.random_range(0..4)],
                                ),
                            ]
                        },
                    ),
                    // A group action over another brand's rule (and junk), any action.
                    3 => (
                        "/console/fleet/group".to_owned(),
                        vec![
                            ("csrf", csrf.as_str()),
                            (
                                "action",
                                ["pause", "resume", "run-now", hostile][rng.random_range(0..4)],
                            ),
                            ("reason", hostile),
                            (
                                "rules",
                                if rng.random::<bool>() {
                                    foreign_ids.as_str()
                                } else {
                                    hostile
                                },
                            ),
                        ],
                    ),
                    _ => (
                        "/console/sign-in".to_owned(),
                        vec![("key", hostile), ("next", hostile)],
                    ),
                };
                let answer = console.post(&path, &form).await;
                (
                    "console form",
                    answer.status,
                    format!(
                        "seed {seed}, request {sent}: POST {path} {form:?} -> {} {}",
                        answer.status, answer.body
                    ),
                )
            }
        };
        assert!(status < 500, "{context}");
        *statuses.entry((kind, status)).or_default() += 1;
        sent += 1;
    }
    assert_eq!(
        app.fingerprint().await,
        before,
        "seed {seed}: the database changed"
    );
    assert!(
        sent >= count.min(500),
        "only {sent} requests in the time limit"
    );
    eprintln!(
        "fuzz (operator and console): seed {seed}, {sent} requests in {:.1} s, statuses {statuses:?}",
        started.elapsed().as_secs_f64()
    );
}
