//! What a run's programs printed: stored with the report, read with `executions_show`,
//! refused by name when malformed, behind the same walls as the execution, and deleted
//! with it.

use res_functions::auth::Role;
use res_functions::metrics::Metrics;
use res_functions::sweeper::{SweepSettings, Sweeper};
use res_shared::wire::{Call, MAX_OUTPUT_BYTES, SetNextRunTimeRequest, ShowExecutionRequest};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{Reply, RuleSpec, Seed, TestApp};
use uuid::Uuid;

/// A claimed run at a branch of one brand, an operator of that brand and one of another.
struct Run {
    app: TestApp,
    rule: Uuid,
    runner: String,
    execution: Uuid,
    token: String,
    operator: String,
    stranger: String,
}

async fn claimed() -> Run {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let (branch, rule) = seed.due_rule(RuleSpec::default()).await;
    let brand: Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(branch)
        .fetch_one(&app.pool)
        .await
        .expect("the branch's brand");
    let other = seed.brand("UTC").await;
    let runner = app.runner_token(&[branch]).await;
    let claim = app.claim(&runner, rule, "site-1").await;
    Run {
        operator: app.brand_token("alice", Role::Operator, brand).await,
        stranger: app.brand_token("mallory", Role::Operator, other).await,
        app,
        rule,
        runner,
        execution: claim.execution,
        token: claim.token,
    }
}

impl Run {
    fn report(&self, output: Value) -> Value {
        json!({"branch_rule_id": self.rule, "is_last_run_failed": true,
               "execution_id": self.execution, "claim_token": self.token,
               "status": "failed", "error": "node 'detect': exited with status 3",
               "output": output})
    }

    async fn send(&self, body: Value) -> Reply {
        self.app
            .call(SetNextRunTimeRequest::NAME, &self.runner, body)
            .await
    }

    async fn show(&self, token: &str, body: Value) -> Reply {
        self.app.call(ShowExecutionRequest::NAME, token, body).await
    }
}

fn entry(node: &str, visit: u32, stream: &str, text: &str, cut: u64) -> Value {
    json!({"node_id": node, "visit": visit, "stream": stream, "text": text, "cut_bytes": cut})
}

#[tokio::test]
async fn a_reports_output_is_stored_and_read_in_order_whole_or_by_node() {
    let run = claimed().await;
    let tail = format!("{}last line\n", "x".repeat(MAX_OUTPUT_BYTES - 10));
    let hostile = "<script>alert(1)</script>\u{1b}[31m\r\nforged INFO line\n";
    let output = json!([
        entry("detect", 1, "stdout", "{\"people\": 2}\n", 0),
        entry("detect", 1, "stderr", &tail, 983_040),
        entry("notify", 1, "stderr", hostile, 0),
    ]);
    let reply = run.send(run.report(output.clone())).await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    // Not asked: no output in the answer.
    let plain = run
        .show(&run.operator, json!({"execution_id": run.execution}))
        .await;
    assert_eq!(plain.status, 200, "{}", plain.body);
    assert!(plain.body.get("output").is_none(), "{}", plain.body);
    // The report's result does not carry it either.
    assert!(plain.body["result"].get("output").is_none());

    let all = run
        .show(
            &run.operator,
            json!({"execution_id": run.execution, "output": true}),
        )
        .await;
    assert_eq!(all.status, 200, "{}", all.body);
    assert_eq!(
        all.body["output"], output,
        "as reported, in order, byte for byte"
    );

    let one = run
        .show(
            &run.operator,
            json!({"execution_id": run.execution, "output_node": "notify"}),
        )
        .await;
    assert_eq!(one.body["output"], json!([output[2]]), "{}", one.body);
    let none = run
        .show(
            &run.operator,
            json!({"execution_id": run.execution, "output_node": "nobody"}),
        )
        .await;
    assert_eq!(none.body["output"], json!([]), "{}", none.body);

    // The same report again is answered as before and stores nothing twice.
    let again = run.send(run.report(output)).await;
    assert_eq!(again.status, 200, "{}", again.body);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM execution_output")
        .fetch_one(&run.app.pool)
        .await
        .expect("count");
    assert_eq!(rows, 3);
}

#[tokio::test]
async fn another_brands_operator_gets_an_unknown_executions_answer_word_for_word() {
    let run = claimed().await;
    let reply = run
        .send(run.report(json!([entry(
            "detect",
            1,
            "stderr",
            "secret camera url",
            0
        )])))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let unknown = Uuid::new_v4();
    for body in [
        json!({"output": true}),
        json!({"output_node": "detect"}),
        json!({}),
    ] {
        let ask = |id: Uuid| {
            let mut body = body.clone();
            body["execution_id"] = json!(id);
            body
        };
        let theirs = run.show(&run.stranger, ask(run.execution)).await;
        let nobodys = run.show(&run.stranger, ask(unknown)).await;
        assert_eq!(theirs.status, 404, "{}", theirs.body);
        assert_eq!(
            theirs
                .body
                .to_string()
                .replace(&run.execution.to_string(), "ID"),
            nobodys.body.to_string().replace(&unknown.to_string(), "ID"),
        );
        assert!(!theirs.body.to_string().contains("secret"));
    }
    // A runner key reads no history at all.
    let runner = run
        .show(
            &run.runner,
            json!({"execution_id": run.execution, "output": true}),
        )
        .await;
    assert_eq!(runner.status, 403, "{}", runner.body);
}

#[tokio::test]
async fn malformed_output_is_refused_by_name_and_the_report_changes_nothing() {
    let run = claimed().await;
    let before = run.app.fingerprint().await;
    let cases = [
        (
            json!([entry("detect", 1, "stdin", "x", 0)]),
            400,
            "output[0].stream",
        ),
        (
            json!([entry("", 1, "stderr", "x", 0)]),
            422,
            "output[0].node_id",
        ),
        (
            json!([entry("detect", 0, "stderr", "x", 0)]),
            422,
            "output[0].visit",
        ),
        (
            json!([entry("detect", 1, "stderr", "a\u{0}b", 0)]),
            422,
            "output[0].text: text in the request body must not contain the NUL",
        ),
        (
            json!([entry(
                "detect",
                1,
                "stderr",
                &"y".repeat(MAX_OUTPUT_BYTES + 1),
                0
            )]),
            422,
            "output[0].text must be at most 65536 bytes",
        ),
        (
            json!([{"node_id": "detect", "visit": 1, "stream": "stderr", "text": "x", "colour": "red"}]),
            400,
            "unknown field `colour`",
        ),
        (
            Value::Array(vec![entry("loop", 1, "stderr", "x", 0); 65]),
            422,
            "at most 64 entries",
        ),
    ];
    for (output, status, named) in cases {
        let reply = run.send(run.report(output)).await;
        assert_eq!(reply.status, status, "{named}: {}", reply.body);
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{named}: {message}");
    }
    assert_eq!(run.app.fingerprint().await, before, "nothing was written");
    // The run is still the runner's to report.
    let reply = run.send(run.report(json!([]))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test]
async fn the_largest_output_a_runner_sends_fits_even_as_escapes_and_goes_with_its_execution() {
    let run = claimed().await;
    // Eight full streams of ESC: 512 KiB of text, six bytes each as JSON (3 MiB).
    let escapes = "\u{1b}".repeat(MAX_OUTPUT_BYTES);
    let output: Vec<Value> = (1..=8)
        .map(|visit| entry("detect", visit, "stderr", &escapes, 1_000_000))
        .collect();
    let body = run.report(Value::Array(output));
    assert!(body.to_string().len() > 3 * 1024 * 1024);
    let reply = run.send(body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let stored: i64 = sqlx::query_scalar(
        "SELECT sum(octet_length(text)) FROM execution_output WHERE execution_id = $1",
    )
    .bind(run.execution)
    .fetch_one(&run.app.pool)
    .await
    .expect("sum");
    assert_eq!(stored, 8 * MAX_OUTPUT_BYTES as i64);

    // Retention deletes the output with its execution.
    sqlx::query(
        "UPDATE executions SET scheduled_at = scheduled_at - interval '100 days' WHERE id = $1",
    )
    .bind(run.execution)
    .execute(&run.app.pool)
    .await
    .expect("aged");
    let swept = Sweeper::new(SweepSettings::default())
        .sweep_once(&run.app.pool, &Metrics::default())
        .await
        .expect("sweeps")
        .expect("nobody else sweeps");
    assert_eq!(swept.executions_deleted, 1, "{swept:?}");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM execution_output")
        .fetch_one(&run.app.pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
    let gone = run
        .show(
            &run.operator,
            json!({"execution_id": run.execution, "output": true}),
        )
        .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
}

#[tokio::test]
async fn a_late_report_of_a_retried_execution_keeps_its_output() {
    let run = claimed().await;
    // The lease ran out and a retry took the rule.
    run.app
        .exec(
            "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[run.execution],
        )
        .await;
    let swept = Sweeper::new(SweepSettings::default())
        .sweep_once(&run.app.pool, &Metrics::default())
        .await
        .expect("sweeps");
    assert!(swept.is_some());
    run.app
        .exec(
            "UPDATE branch_rules SET next_run_time = now() - interval '1 second' WHERE id = $1",
            &[run.rule],
        )
        .await;
    let retry = run.app.claim(&run.runner, run.rule, "site-1").await;
    assert_ne!(retry.execution, run.execution);
    let late = run
        .send(run.report(json!([entry("detect", 1, "stderr", "it did finish", 0)])))
        .await;
    assert_eq!(late.status, 409, "{}", late.body);
    assert_eq!(late.body["error"]["code"], json!("superseded"));
    let shown = run
        .show(
            &run.operator,
            json!({"execution_id": run.execution, "output": true}),
        )
        .await;
    assert_eq!(
        shown.body["output"][0]["text"],
        json!("it did finish"),
        "{}",
        shown.body
    );
}
