//! Every `curl` example in docs/api.md, run against the functions process, must answer as
//! documented: the same fields (recursively), the same flags, codes and error messages.
//! Ids, tokens and times differ from run to run and are compared by type only.

use std::process::Command;

use res_tests::functions::RuleSpec;
use serde_json::Value;

use super::system::System;

/// A fenced block of the document.
pub(super) struct Block {
    pub(super) lang: String,
    pub(super) text: String,
    /// Line of the opening fence (1-based).
    pub(super) line: usize,
    /// Line of the closing fence.
    end: usize,
}

pub(super) fn blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for (n, line) in markdown.lines().enumerate() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                current = Some(Block {
                    lang: lang.trim().to_owned(),
                    text: String::new(),
                    line: n + 1,
                    end: 0,
                });
            }
            (Some(block), Some(_)) => {
                block.end = n + 1;
                blocks.extend(current.take());
            }
            (Some(block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// Parses documented JSON, where `…` stands for "more of the same" at the end of objects.
fn documented_json(text: &str) -> Value {
    let cleaned = text
        .replace(", …}", r#", "…": null}"#)
        .replace(", … }", r#", "…": null}"#);
    // The first JSON value; a comment may go on in words after it.
    serde_json::Deserializer::from_str(&cleaned)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("documented JSON does not parse: {text}"))
}

fn id_like(key: &str) -> bool {
    key.contains('…') || uuid::Uuid::parse_str(key).is_ok()
}

/// Whether `actual` has the documented shape; the first difference otherwise.
fn conforms(doc: &Value, actual: &Value, path: &str) -> Result<(), String> {
    const EXACT: [&str; 4] = ["code", "message", "status", "reason"];
    // Free-form JSON the caller or operator chose (configs, results): any object will do.
    const FREE: [&str; 5] = ["workflow_config", "config", "details", "result", "settings"];
    if FREE.iter().any(|k| path.ends_with(&format!(".{k}"))) {
        return if doc.is_object() == actual.is_object() {
            Ok(())
        } else {
            Err(format!("{path}: documented {doc}, answered {actual}"))
        };
    }
    match (doc, actual) {
        (Value::Null, _) | (_, Value::Null) => Ok(()),
        (Value::Object(d), Value::Object(a)) if !d.is_empty() && d.keys().all(|k| id_like(k)) => {
            let sample = d.values().next().unwrap_or(&Value::Null);
            a.iter()
                .try_for_each(|(k, v)| conforms(sample, v, &format!("{path}.{k}")))
        }
        (Value::Object(d), Value::Object(a)) => {
            // A documented object ending in `…` lists only some of its fields.
            let open = d.contains_key("…");
            let missing: Vec<&String> = d
                .keys()
                .filter(|k| *k != "…" && !a.contains_key(*k))
                .collect();
            let extra: Vec<&String> = a.keys().filter(|k| !open && !d.contains_key(*k)).collect();
            if !missing.is_empty() || !extra.is_empty() {
                return Err(format!(
                    "{path}: documented fields missing from the answer {missing:?}, undocumented fields in it {extra:?}"
                ));
            }
            d.iter().filter(|(k, _)| *k != "…").try_for_each(|(k, dv)| {
                let av = &a[k];
                if EXACT.contains(&k.as_str()) && dv.is_string() && dv != av {
                    return Err(format!("{path}.{k}: documented {dv}, answered {av}"));
                }
                conforms(dv, av, &format!("{path}.{k}"))
            })
        }
        // A documented list as long as the answer's is compared item by item (a batch's
        // answers differ in shape); otherwise its first item is the sample of every item.
        (Value::Array(d), Value::Array(a)) if d.len() == a.len() && d.len() > 1 => d
            .iter()
            .zip(a)
            .enumerate()
            .try_for_each(|(i, (dv, av))| conforms(dv, av, &format!("{path}[{i}]"))),
        (Value::Array(d), Value::Array(a)) => match d.first() {
            Some(sample) => a
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| conforms(sample, v, &format!("{path}[{i}]"))),
            None => Ok(()),
        },
        (Value::Bool(d), Value::Bool(a)) if d != a => {
            Err(format!("{path}: documented {d}, answered {a}"))
        }
        (Value::Bool(_), Value::Bool(_))
        | (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_)) => Ok(()),
        _ => Err(format!("{path}: documented {doc}, answered {actual}")),
    }
}

/// All JSON values printed one after another.
fn json_values(output: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(output)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_curl_examples_in_docs_api_md_answer_as_documented() {
    if let Err(message) = res_setup::require(
        &[res_setup::Tool::Curl, res_setup::Tool::Jq],
        "running the documented examples",
    ) {
        panic!("{message}");
    }
    let system = System::start().await;
    let rule = system
        .rule(
            RuleSpec {
                cron: Some("*/30 * * * *"),
                next_run_time: Some(chrono::Utc::now() - chrono::TimeDelta::minutes(1)),
                ..RuleSpec::default()
            },
            &super::system::detector(0.0, 0),
        )
        .await;
    let (template,): (uuid::Uuid,) =
        sqlx::query_as("SELECT id FROM action_templates WHERE kind = 'detection'")
            .fetch_one(&system.pool)
            .await
            .expect("template");
    sqlx::query("INSERT INTO action_details (branch_rule_id, action_template_id, config) VALUES ($1, $2, $3)")
        .bind(rule)
        .bind(template)
        .bind(serde_json::json!({"camera_ids": ["cam-17-entrance"], "stream_url": "rtsp://10.17.0.5/entrance"}))
        .execute(&system.pool)
        .await
        .expect("action detail");
    let markdown = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"))
        .expect("docs/api.md");
    let all = blocks(&markdown);
    // Literal ids in the examples stand for the ones the claim example hands out.
    let mut replacements: Vec<(String, String)> = Vec::new();
    let mut ran = 0;
    for (i, block) in all.iter().enumerate() {
        if block.lang != "sh"
            || !block.text.contains("curl ")
            || block.text.contains("res-functions migrate")
        {
            continue;
        }
        let mut script = block.text.clone();
        for (from, to) in &replacements {
            script = script.replace(from.as_str(), to.as_str());
        }
        let output = Command::new("sh")
            .args(["-c", &script])
            .env("RES", system.functions.url())
            .env("TOKEN", &system.token)
            .env("OPS", &system.operator)
            .env("RULE", rule.to_string())
            .output()
            .expect("sh runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "docs/api.md:{}: exit {}: {}",
            block.line,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        ran += 1;
        let comments: Vec<Value> = block
            .text
            .lines()
            .filter_map(|l| l.split_once("# {").map(|(_, rest)| format!("{{{rest}")))
            .map(|j| documented_json(&j))
            .collect();
        // The documented answer is the block right after, with only blank lines between.
        let lines: Vec<&str> = markdown.lines().collect();
        let next = all.get(i + 1).filter(|b| {
            lines[block.end..b.line - 1]
                .iter()
                .all(|l| l.trim().is_empty())
        });
        if let Some(next) = next.filter(|b| b.lang == "json") {
            let doc = documented_json(&next.text);
            let actual = json_values(&stdout).pop().unwrap_or(Value::Null);
            if let Err(difference) = conforms(&doc, &actual, "$") {
                panic!("docs/api.md:{}: {difference}\nanswer: {stdout}", block.line);
            }
            if actual.get("claim_token").is_some() {
                for (key, documented) in [
                    ("execution_id", &doc["execution_id"]),
                    ("claim_token", &doc["claim_token"]),
                ] {
                    if let (Some(d), Some(a)) = (documented.as_str(), actual[key].as_str()) {
                        replacements.push((d.to_owned(), a.to_owned()));
                    }
                }
            }
        } else if let Some(next) = next.filter(|b| b.lang.is_empty()) {
            // An HTTP exchange (`curl -si`): status line, documented headers, JSON body.
            let (doc_head, doc_body) = next.text.split_once("\n\n").unwrap_or((&next.text, ""));
            let (head, body) = stdout
                .split_once("\r\n\r\n")
                .unwrap_or_else(|| stdout.split_once("\n\n").unwrap_or((&stdout, "")));
            let mut doc_lines = doc_head.lines();
            let status = doc_lines
                .next()
                .unwrap_or("")
                .split_whitespace()
                .nth(1)
                .unwrap_or("");
            assert_eq!(
                head.lines()
                    .next()
                    .and_then(|l| l.split_whitespace().nth(1)),
                Some(status),
                "docs/api.md:{}: {stdout}",
                block.line
            );
            for header in doc_lines {
                let name = header.split(':').next().unwrap_or("").to_lowercase();
                assert!(
                    head.to_lowercase().contains(&format!("{name}:")),
                    "docs/api.md:{}: header {name} missing: {head}",
                    block.line
                );
            }
            if let Err(difference) = conforms(
                &documented_json(doc_body.trim()),
                &json_values(body).pop().unwrap_or(Value::Null),
                "$",
            ) {
                panic!("docs/api.md:{}: {difference}\nanswer: {stdout}", block.line);
            }
        }
        let outputs = json_values(&stdout);
        for (n, doc) in comments.iter().enumerate() {
            let actual = outputs.get(n).unwrap_or(&Value::Null);
            if let Err(difference) = conforms(doc, actual, "$") {
                panic!("docs/api.md:{}: {difference}\nanswer: {stdout}", block.line);
            }
        }
    }
    assert!(ran >= 9, "only {ran} curl examples found in docs/api.md");
}

/// Every `sh` example in docs/operate.md, in order, against a system whose state the
/// examples expect: "Queue length" at "Branch 17" with a failed run, "Stock count" running
/// with a violation, "Camera health" failing (a group on `fleet`), a registered runner, and
/// the metrics on their own port.
#[tokio::test(flavor = "multi_thread")]
async fn the_examples_in_docs_operate_md_run_as_written() {
    if let Err(message) = res_setup::require(
        &[res_setup::Tool::Curl, res_setup::Tool::Jq],
        "running the documented examples",
    ) {
        panic!("{message}");
    }
    let metrics_port = res_tests::processes::free_port().to_string();
    let metrics_bind = format!("127.0.0.1:{metrics_port}");
    let system = System::start_with(&["--metrics-bind", &metrics_bind]).await;
    let tomorrow = Some(chrono::Utc::now() + chrono::TimeDelta::days(1));
    let due = Some(chrono::Utc::now() - chrono::TimeDelta::minutes(1));
    let detector = super::system::detector(0.0, 0);
    let mut rules = Vec::new();
    // Camera health is not due: it is flagged below and must not be claimed meanwhile.
    for next_run_time in [due, due, tomorrow] {
        let spec = RuleSpec {
            next_run_time,
            ..RuleSpec::default()
        };
        rules.push(system.rule(spec, &detector).await);
    }
    let (queue, stock, camera) = (rules[0], rules[1], rules[2]);
    sqlx::query("UPDATE branches SET name = 'Branch 17' WHERE id = $1")
        .bind(system.branch)
        .execute(&system.pool)
        .await
        .expect("branch name");
    for (rule, name) in [
        (queue, "Queue length"),
        (stock, "Stock count"),
        (camera, "Camera health"),
    ] {
        res_tests::functions::Seed::new(&system.pool)
            .name_rule(rule, name)
            .await;
    }
    let client = res_tests::functions::client();
    let base = system.functions.url();
    let call = |function: &'static str, body: serde_json::Value| {
        let request = client
            .post(format!("{base}/{function}"))
            .bearer_auth(&system.token)
            .json(&body);
        async move {
            let reply = request.send().await.expect("an answer");
            assert!(
                reply.status().is_success(),
                "{function}: {}",
                reply.status()
            );
            reply.json::<Value>().await.expect("JSON")
        }
    };
    call(
        "runner_register",
        serde_json::json!({"runner_id": "site-17", "boot_id": "b1", "version": "0.1.0"}),
    )
    .await;
    let failed = call(
        "branch_rules_claim",
        serde_json::json!({"branch_rule_id": queue, "runner_id": "site-17"}),
    )
    .await;
    call(
        "branch_rules_set_NextRunTime",
        serde_json::json!({"branch_rule_id": queue, "execution_id": failed["execution_id"],
            "claim_token": failed["claim_token"], "is_last_run_failed": true,
            "error": "camera 3 did not answer",
            "output": [{"node_id": "detect", "visit": 1, "stream": "stderr",
                        "text": "connecting to camera 3\ncamera 3 did not answer\n"}]}),
    )
    .await;
    sqlx::query("UPDATE branch_rules SET next_run_time = $2 WHERE id = $1")
        .bind(queue)
        .bind(tomorrow)
        .execute(&system.pool)
        .await
        .expect("due tomorrow");
    let running = call(
        "branch_rules_claim",
        serde_json::json!({"branch_rule_id": stock, "runner_id": "site-17", "lease_seconds": 600}),
    )
    .await;
    call(
        "executions_heartbeat",
        serde_json::json!({"execution_id": running["execution_id"],
            "claim_token": running["claim_token"]}),
    )
    .await;
    call(
        "violations_create",
        serde_json::json!({"execution_id": running["execution_id"],
            "claim_token": running["claim_token"], "kind": "queue_too_long",
            "idempotency_key": "docs", "details": {"queue_length": 9}}),
    )
    .await;

    // Stock count's and Camera health's runs keep failing: flagged, so the acknowledge
    // examples have items (Camera health, not running, is a group on `fleet`).
    sqlx::query(
        "UPDATE branch_rules SET needs_attention_at = now(), consecutive_failures = 3, \
             needs_attention_reason = 'failed 3 times in a row (last: shelf camera dark)' \
         WHERE id = ANY($1)",
    )
    .bind([stock, camera])
    .execute(&system.pool)
    .await
    .expect("flag stock count and camera health");

    // An admin key of the brand, for the notification channel examples.
    let brand: uuid::Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(system.branch)
        .fetch_one(&system.pool)
        .await
        .expect("the brand");
    let brand_admin = super::system::functions_cli(
        system.database_url(),
        &[
            "create-api-key",
            "--name",
            "brand-admin",
            "--role",
            "admin",
            "--brand",
            &brand.to_string(),
        ],
    );

    let (bin_dir, path) = built_binaries_first();
    let server = base
        .trim_end_matches(res_shared::wire::FUNCTIONS_PREFIX)
        .to_owned();
    let markdown =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operate.md"))
            .expect("docs/operate.md");
    let mut outputs = String::new();
    let mut ran = 0;
    let examples = blocks(&markdown);
    for block in examples.iter().filter(|b| b.lang == "sh") {
        let output = Command::new("sh")
            .args(["-ec", &block.text])
            .env("PATH", &path)
            .env("RES_URL", &server)
            .env("RES_TOKEN", &system.operator)
            .env("RES_ADMIN_TOKEN", &brand_admin)
            .env("METRICS", format!("http://{metrics_bind}"))
            .env("DATABASE_URL", system.database_url())
            .env("XDG_CONFIG_HOME", "/nonexistent")
            .output()
            .expect("sh runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success() && !stdout.trim().is_empty(),
            "docs/operate.md:{}: exit {}: {stdout}{}",
            block.line,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        outputs.push_str(&stdout);
        ran += 1;
    }
    assert!(ran >= 9, "only {ran} examples found in docs/operate.md");
    // The config file example, as written: resctl reads it (a file it cannot read is exit
    // 2) and, pointed at a closed local port instead of the example's host, gets as far as
    // finding nobody there (exit 5).
    let configs: Vec<&Block> = examples.iter().filter(|b| b.lang == "toml").collect();
    assert_eq!(configs.len(), 1, "one config example in docs/operate.md");
    let config = system.dir.join("operate-config.toml");
    std::fs::write(&config, &configs[0].text).expect("config written");
    let output = Command::new(bin_dir.join("resctl"))
        .args(["--url", "http://127.0.0.1:9", "keys", "list"])
        .env("RESCTL_CONFIG", &config)
        .env_remove("RES_URL")
        .env_remove("RES_TOKEN")
        .output()
        .expect("resctl runs");
    assert_eq!(
        output.status.code(),
        Some(5),
        "docs/operate.md:{}: {}",
        configs[0].line,
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "wall-screen",
        "site-17",
        "state: idle",
        "run requested",
        "paused",
        "resumed",
        "cancel requested",
        "camera 3 did not answer",
        "last 24 hours: 1 run, 0.0 % succeeded",
        "rules: 1 running, 1 idle, 1 needs attention (0 overdue) at 1 branch\n",
        "Camera health at Branch 17 of ",
        "acknowledged by alice, ends in 3 h: vendor replacing the camera",
        "acknowledged at 1 of 1 branches: Camera health of ",
        "queue_too_long",
        "connecting to camera 3\ncamera 3 did not answer",
        "signing secret (shown once; verify res-signature with it): whsec_",
        "ops-slack  slack    https://hooks.slack.com/…",
        "res_functions_live_executions",
    ] {
        assert!(
            outputs.contains(expected),
            "{expected:?} in the examples' output:\n{outputs}"
        );
    }
}

/// The directory of this build's binaries, and `PATH` with it first: the documented
/// commands run the binaries under test.
pub(super) fn built_binaries_first() -> (std::path::PathBuf, String) {
    let bin_dir = res_tests::processes::binary("res-functions")
        .parent()
        .map(std::path::Path::to_path_buf)
        .expect("the target directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (bin_dir, path)
}

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                sources(&path)
            } else if path.extension().is_some_and(|e| e == "rs") {
                vec![path]
            } else {
                Vec::new()
            }
        })
        .collect()
}

/// docs/faults.md backs each promise with a test named `module::test`: each named test
/// exists, in a file of that module, in a crate's `tests/` directory.
#[test]
fn every_test_docs_faults_md_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let faults = std::fs::read_to_string(root.join("docs/faults.md")).expect("docs/faults.md");
    let tests: Vec<(String, String)> = ["tests/tests", "functions/tests", "runner/tests"]
        .iter()
        .flat_map(|dir| sources(&root.join(dir)))
        .filter_map(|path| {
            let module = path.file_stem()?.to_str()?.to_owned();
            Some((module, std::fs::read_to_string(&path).ok()?))
        })
        .collect();
    let named: Vec<&str> = faults
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| {
            name.split_once("::").is_some_and(|(module, test)| {
                !module.is_empty()
                    && module.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    && !test.is_empty()
                    && test
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            })
        })
        .collect();
    assert!(
        named.len() >= 10,
        "test names found in docs/faults.md: {named:?}"
    );
    for name in named {
        let (module, test) = name.split_once("::").expect("module::test");
        assert!(
            tests
                .iter()
                .any(|(m, text)| m == module && text.contains(&format!("fn {test}("))),
            "docs/faults.md names {name}, which is not a test"
        );
    }
}
