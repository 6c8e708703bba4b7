//! Secrets in a real run: a `command` detector gets them resolved in its arguments, its
//! environment and its job, prints them back on stdout and stderr and in its result, and
//! the report carries none of them; a reference to a secret the site lacks fails the node
//! before the program starts.

use std::collections::BTreeMap;

use crate::support::*;
use res_shared::wire::ExecutionStatus;
use serde_json::{Value, json};

const PASSWORD: &str = "Cam-p@ss/17";
const TOKEN: &str = "tok_5e3f9a1c77";

#[tokio::test]
async fn an_action_gets_its_secrets_and_the_report_shows_none_of_them() {
    let dir = scratch();
    let script = write_script(
        &dir,
        "echo-secrets.sh",
        &format!(
            "cat > '{dir}/job.json'\n\
             printf '%s\\n' \"$1\" > '{dir}/arg.txt'\n\
             printf '%s\\n' \"$ANALYTICS_TOKEN\" > '{dir}/env.txt'\n\
             echo \"connecting to $1 with $ANALYTICS_TOKEN\" >&2\n\
             echo \"stdout says $ANALYTICS_TOKEN\"\n\
             printf '{{\"people\": 1, \"seen\": \"%s\"}}\\n' \"$ANALYTICS_TOKEN\"\n",
            dir = dir.display()
        ),
    );
    let (table, ids) = templates(&[(
        "Detector",
        "detection",
        json!({"executor": "command", "program": script,
               "args": ["rtsp://viewer:${secret:cam-17}@10.0.0.7/stream"],
               "env": {"ANALYTICS_TOKEN": "${secret:analytics-token}"},
               "parameters": {"auth": "Bearer ${secret:analytics-token}"}}),
    )]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    run.details.insert(
        ids[0],
        json!({"stream_urls": ["rtsp://viewer:${secret:cam-17}@10.0.0.7/stream"]}),
    );
    run.secrets = BTreeMap::from([
        ("cam-17".to_owned(), PASSWORD.to_owned()),
        ("analytics-token".to_owned(), TOKEN.to_owned()),
    ]);
    let report = run.go(&engine).await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    // The program had the values.
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("written");
    assert_eq!(
        read("arg.txt").trim(),
        format!("rtsp://viewer:{PASSWORD}@10.0.0.7/stream")
    );
    assert_eq!(read("env.txt").trim(), TOKEN);
    let job: Value = serde_json::from_str(&read("job.json")).expect("the job");
    assert_eq!(
        job["action"]["parameters"]["auth"],
        format!("Bearer {TOKEN}")
    );
    assert_eq!(
        job["details"]["stream_urls"][0],
        format!("rtsp://viewer:{PASSWORD}@10.0.0.7/stream")
    );
    // Nothing it said back carries them.
    assert_eq!(
        report.aggregated_actions_details,
        [json!({"people": 1, "seen": "***"})]
    );
    let reported = serde_json::to_string(&report.next_run_request(uuid::Uuid::new_v4(), "t"))
        .expect("the report as sent");
    for value in [PASSWORD, TOKEN, "Cam-p%40ss%2F17"] {
        assert!(!reported.contains(value), "{value} in {reported}");
    }
    let output: Vec<&str> = report.output.iter().map(|o| o.text.as_str()).collect();
    assert_eq!(
        output,
        [
            "stdout says ***\n{\"people\": 1, \"seen\": \"***\"}\n",
            "connecting to rtsp://viewer:***@10.0.0.7/stream with ***\n"
        ]
    );
}

#[tokio::test]
async fn a_secret_the_site_lacks_fails_the_node_before_the_program_starts() {
    let dir = scratch();
    let script = write_script(
        &dir,
        "never.sh",
        &format!("touch '{}/started'\necho '{{}}'\n", dir.display()),
    );
    let (table, ids) = templates(&[(
        "Detector",
        "detection",
        json!({"executor": "command", "program": script,
               "env": {"TOKEN": "${secret:not-given}"}}),
    )]);
    let engine = engine();
    let run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    let report = run.go(&engine).await;
    assert_eq!(report.status, ExecutionStatus::Failed);
    let error = report.error.expect("an error").message;
    assert!(
        error.contains("secret 'not-given' is not available here"),
        "{error}"
    );
    assert!(!dir.join("started").exists(), "the program never ran");
}
