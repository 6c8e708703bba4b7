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

/// Every run of eight characters of `value`.
fn pieces_of(value: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = value.char_indices().collect();
    (0..chars.len().saturating_sub(8))
        .map(|i| {
            let end = chars.get(i + 8).map_or(value.len(), |(at, _)| *at);
            &value[chars[i].0..end]
        })
        .collect()
}

#[tokio::test]
async fn a_long_secret_and_other_spellings_are_masked_before_anything_cuts_them() {
    // A 4,096-character token, printed whole as stderr's last line and cut by the output
    // window on stdout; a password in the spellings Python's json.dumps and the WHATWG URL
    // standard print; a key with line breaks.
    let token: String = (0..4096)
        .map(|i| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[(i * 7 + i / 36) % 36]))
        .collect();
    let password = "pässwört€ a.b*c+(d)|";
    let key = "-----BEGIN TEST KEY-----\nMIIEowIBAAKCAQEA7\n-----END TEST KEY-----";
    let dir = scratch();
    let mut stdout = token.clone();
    stdout.push_str(&".".repeat(63_000));
    stdout.push_str("\n{\"seen\": \"p\\u00e4ssw\\u00f6rt\\u20ac a.b*c+(d)|\", ");
    stdout
        .push_str("\"url\": \"rtsp://viewer:p%C3%A4ssw%C3%B6rt%E2%82%AC%20a.b*c+(d)%7C@cam/\"}\n");
    std::fs::write(dir.join("stdout.txt"), &stdout).expect("stdout");
    std::fs::write(
        dir.join("stderr.txt"),
        format!("the key:\n{key}\nlogin failed: token={token}\n"),
    )
    .expect("stderr");
    let script = write_script(
        &dir,
        "leaky.sh",
        &format!(
            "cat '{dir}/stdout.txt'\ncat '{dir}/stderr.txt' >&2\nexit 1\n",
            dir = dir.display()
        ),
    );
    let (table, ids) = templates(&[(
        "Detector",
        "detection",
        json!({"executor": "command", "program": script,
               "env": {"T": "${secret:token}", "P": "${secret:password}", "K": "${secret:key}"}}),
    )]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    run.secrets = BTreeMap::from([
        ("token".to_owned(), token.clone()),
        ("password".to_owned(), password.to_owned()),
        ("key".to_owned(), key.to_owned()),
    ]);
    let report = run.go(&engine).await;
    assert_eq!(report.status, ExecutionStatus::Failed);
    let error = report.error.clone().expect("an error").message;
    assert!(
        error.ends_with("exited with status 1: login failed: token=***"),
        "{}",
        &error[..error.len().min(200)]
    );
    let stdout_tail = &report.output[0];
    assert!(stdout_tail.cut_bytes > 0, "the window cut into the token");
    assert!(
        stdout_tail.text.starts_with("***."),
        "{}",
        &stdout_tail.text[..40]
    );
    let reported = serde_json::to_string(&report.next_run_request(uuid::Uuid::new_v4(), "t"))
        .expect("the report as sent");
    for piece in pieces_of(&token)
        .into_iter()
        .chain(["MIIEowIB", "ssw\\u00f6", "%C3%A4ssw"])
    {
        assert!(!reported.contains(piece), "{piece} in the report");
    }
    assert!(
        reported.contains("the key:\\n***\\nlogin failed"),
        "the key masked across its lines"
    );
}
