//! Secrets end to end (issue 46): a brand document refers to two secrets; a brand admin
//! sets them with `resctl secrets set` (standard input, a file); a real runner's detector
//! receives both values, prints them on stdout and stderr and in its result; and then every
//! place a person or a file could see them — `resctl` output (export, diff, history,
//! revisions, secrets list, executions, logs), the console's pages, the functions' and the
//! runners' logs, the runners' state directories (`plan.json` and the rest), every table
//! of the database — is searched for both values, and holds neither. Another brand's admin,
//! a viewer and an operator cannot read or change them, and the runner of another branch
//! never receives them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use res_tests::console::Console;
use res_tests::processes::{Runner, RunnerSpec, binary, eventually};
use uuid::Uuid;

use super::configure::resctl_ok;
use super::system::{System, functions_cli};

const WAIT: Duration = Duration::from_secs(60);
/// The camera's password: URL-special characters, so its percent-encoded form is searched too.
const CAMERA: &str = "Cam-p@ss/17+x";
const TOKEN: &str = "tok_a81f55e0c2d94b";
/// The token's second value, set while the runner runs.
const ROTATED: &str = "tok_rotated_77b1";

/// Every form a value could be stored or printed in.
fn forms(value: &str) -> Vec<String> {
    vec![
        value.to_owned(),
        percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            .to_string(),
        serde_json::to_string(value)
            .unwrap_or_default()
            .trim_matches('"')
            .to_owned(),
    ]
}

/// Fails naming `what` if `text` holds either value in any form.
fn holds_neither(what: &str, text: &str) {
    for value in [CAMERA, TOKEN, ROTATED] {
        for form in forms(value) {
            assert!(
                !text.contains(&form),
                "{what} holds a secret value ({form})"
            );
        }
    }
}

/// Every file under `dir`, read as text (lossily: the sealed file is binary).
fn files_under(dir: &Path, skip: &Path, into: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.starts_with(skip) {
            continue;
        }
        if path.is_dir() {
            files_under(&path, skip, into);
        } else if let Ok(bytes) = std::fs::read(&path) {
            into.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
}

/// `resctl` reading `stdin`, with `token`.
fn resctl_with_input(
    system: &System,
    token: &str,
    args: &[&str],
    stdin: &str,
) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(binary("resctl"))
        .args(args)
        .env("RES_URL", system.functions.url())
        .env("RES_TOKEN", token)
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("resctl runs");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("stdin written");
    }
    child.wait_with_output().expect("resctl ends")
}

/// The catalogue: a command detector that writes what it was given to `seen` and prints
/// it everywhere it can, then a violation.
fn catalogue(seen: &Path) -> String {
    let script = format!(
        "cat > /dev/null; printf '%s\\n%s\\n' \"$1\" \"$API_TOKEN\" > '{seen}/given.txt'; \
         echo \"connecting to $1 with $API_TOKEN\" >&2; echo \"token $API_TOKEN\"; \
         printf '{{\"violations\": 1, \"echo\": \"%s\"}}\\n' \"$API_TOKEN\"",
        seen = seen.display()
    );
    format!(
        r#"catalogue:
  action_templates:
    - name: Secret detector
      kind: detection
      config:
        executor: command
        program: sh
        args: ["-c", {script}, "sh", "rtsp://viewer:${{secret:camera-pass}}@10.0.0.7/stream"]
        env: {{API_TOKEN: "${{secret:analytics-token}}"}}
    - name: Record
      kind: business
      config: {{kind: secret_seen}}
    - name: Plain detector
      kind: detection
      config: {{executor: command, program: sh, args: ["-c", "cat > /dev/null; echo '{{}}'"]}}
  rules:
    - name: Secret watch
      schedule: "*/3 * * * * *"
      workflow:
        start_node: detect
        nodes:
          detect: {{type: detection, template: Secret detector}}
          record: {{type: business, action: create_violation, template: Record}}
        edges: [{{from: detect, to: record, condition: "violations > 0"}}]
    - name: Plain watch
      schedule: "*/3 * * * * *"
      workflow:
        start_node: detect
        nodes: {{detect: {{type: detection, template: Plain detector}}}}
"#,
        script = serde_json::to_string(&script).unwrap_or_default()
    )
}

/// The brand: the secret rule at the system's branch (its details refer to the camera
/// password too), the plain one at a second branch.
fn brand(brand: Uuid, branch: Uuid) -> String {
    format!(
        r#"brand:
  id: {brand}
  name: Brand
  zone: Asia/Riyadh
  rules: {{Secret watch: {{}}, Plain watch: {{}}}}
  branches:
    - name: Branch
      id: {branch}
      rules:
        Secret watch:
          actions:
            Secret detector: {{stream_urls: ["rtsp://viewer:${{secret:camera-pass}}@10.0.0.7/stream"]}}
    - name: Second
      rules:
        Plain watch: {{}}
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn two_secrets_reach_the_detector_and_nowhere_else() {
    let mut owned = System::start().await;
    let system = &owned;
    let seen = std::env::temp_dir().join(format!("res-secrets-seen-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&seen).expect("a directory for what the detector saw");
    let brand_id: Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(system.branch)
        .fetch_one(&system.pool)
        .await
        .expect("the brand");
    let database_url = system.database_url().to_owned();
    let key = |args: &[&str]| {
        let mut all = vec!["create-api-key"];
        all.extend_from_slice(args);
        functions_cli(&database_url, &all)
    };
    let platform = key(&["--name", "platform", "--role", "admin", "--all-brands"]);
    let admin = key(&[
        "--name",
        "ada",
        "--role",
        "admin",
        "--brand",
        &brand_id.to_string(),
    ]);
    let viewer = key(&[
        "--name",
        "vic",
        "--role",
        "viewer",
        "--brand",
        &brand_id.to_string(),
    ]);
    let files = system.dir.join("documents");
    std::fs::create_dir_all(&files).expect("documents");
    let catalogue_path = files.join("catalogue.yaml");
    std::fs::write(&catalogue_path, catalogue(&seen)).expect("catalogue written");
    let brand_path = files.join("brand.yaml");
    std::fs::write(&brand_path, brand(brand_id, system.branch)).expect("brand written");
    let path = |p: &Path| p.to_str().unwrap_or_default().to_owned();
    resctl_ok(
        system,
        &platform,
        &["apply", "-f", &path(&catalogue_path), "-m", "catalogue"],
    )
    .await;

    // Refused while the secrets do not exist, naming them.
    let refused = system
        .resctl(
            &admin,
            &["apply", "-f", &path(&brand_path), "-m", "too early"],
        )
        .await;
    let said = String::from_utf8_lossy(&refused.stdout).into_owned()
        + &String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("secret 'camera-pass', which the brand does not have"),
        "{said}"
    );

    // Set: one from standard input (scoped to the branch), one from a file.
    let brand_arg = brand_id.to_string();
    let branch_arg = system.branch.to_string();
    let set = resctl_with_input(
        system,
        &admin,
        &[
            "secrets",
            "set",
            "camera-pass",
            "--brand",
            &brand_arg,
            "--branch",
            &branch_arg,
        ],
        &format!("{CAMERA}\n"),
    );
    assert!(set.status.success(), "{set:?}");
    let token_file = seen.join("token.txt");
    std::fs::write(&token_file, TOKEN).expect("token file");
    let set_file = resctl_ok(
        system,
        &admin,
        &[
            "secrets",
            "set",
            "analytics-token",
            "--brand",
            &brand_arg,
            "--from-file",
            &path(&token_file),
        ],
    )
    .await;
    std::fs::remove_file(&token_file).expect("the token file goes");
    assert!(
        set_file.contains("created secret 'analytics-token' (version 1"),
        "{set_file}"
    );
    // Bad input is refused before it travels, naming the field.
    for (input, args, expected) in [
        (
            "\n",
            vec!["secrets", "set", "empty-one", "--brand", &brand_arg],
            "value: the value is shorter",
        ),
        (
            "abcdefgh",
            vec!["secrets", "set", "with space", "--brand", &brand_arg],
            "name: 'with space' is not a secret name",
        ),
    ] {
        let output = resctl_with_input(system, &admin, &args, input);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }

    let diff = resctl_ok(system, &admin, &["diff", "-f", &path(&brand_path)]).await;
    let applied = resctl_ok(
        system,
        &admin,
        &["apply", "-f", &path(&brand_path), "-m", "secrets in"],
    )
    .await;
    let second: Uuid = sqlx::query_scalar("SELECT id FROM branches WHERE name = 'Second'")
        .fetch_one(&system.pool)
        .await
        .expect("the second branch");
    let (rule, plain): (Uuid, Uuid) = sqlx::query_as(
        "SELECT (SELECT x.id FROM branch_rules x JOIN rules r ON r.id = x.rule_id \
                 WHERE r.name = 'Secret watch' AND NOT x.is_archived), \
                (SELECT x.id FROM branch_rules x JOIN rules r ON r.id = x.rule_id \
                 WHERE r.name = 'Plain watch' AND NOT x.is_archived)",
    )
    .fetch_one(&system.pool)
    .await
    .expect("the rules");

    // Two runners: the branch's, and another branch's.
    let runner = system.runner("site-1", &[]);
    let other_token = key(&[
        "--name",
        "second site",
        "--role",
        "runner",
        "--branch",
        &second.to_string(),
    ]);
    let other = Runner::start(
        RunnerSpec {
            binary: &binary("res-runner"),
            dir: &system.dir,
            name: "site-2",
            functions_url: &system.functions.url(),
            token: &other_token,
        },
        &[],
        &[],
    );
    eventually("both rules completed a run", WAIT, || async move {
        let mut done = true;
        for rule in [rule, plain] {
            done &= system
                .executions(rule)
                .await
                .iter()
                .any(|e| e.1 == "completed");
        }
        done
    })
    .await;
    let given = std::fs::read_to_string(seen.join("given.txt")).expect("the detector ran");
    assert_eq!(
        given,
        format!("rtsp://viewer:{CAMERA}@10.0.0.7/stream\n{TOKEN}\n"),
        "the detector received both values"
    );
    assert!(system.violations(rule).await >= 1);

    assert!(
        diff.contains("secrets it refers to (values are never shown):\n    analytics-token: version 1, set by ada"),
        "{diff}"
    );
    let exported = resctl_ok(system, &admin, &["export", "--brand", &brand_arg]).await;
    let exported_path = files.join("exported.yaml");
    std::fs::write(&exported_path, &exported).expect("export written");

    // A new value reaches the site without a restart.
    let rotated = resctl_with_input(
        system,
        &admin,
        &["secrets", "set", "analytics-token", "--brand", &brand_arg],
        ROTATED,
    );
    assert!(rotated.status.success(), "{rotated:?}");
    eventually("the detector got the new token", WAIT, || async {
        std::fs::read_to_string(seen.join("given.txt")).is_ok_and(|g| g.contains(ROTATED))
    })
    .await;

    // A diff of the export says which secret has a new value since, by version.
    let since = resctl_ok(system, &admin, &["diff", "-f", &path(&exported_path)]).await;
    assert!(
        since.contains("    analytics-token: version 2, set by ada")
            && since.contains("(a new value since the revision this document was exported at)")
            && since.contains("    camera-pass: version 1, set by ada"),
        "{since}"
    );
    assert_eq!(since.matches("a new value since").count(), 1, "{since}");
    holds_neither("diff of the export", &since);

    // The functions go away and the runner restarts: its offline runs still have the
    // values, from secrets.sealed.
    let mut runner = runner;
    assert!(owned.functions.stop(), "the functions stop cleanly");
    runner.kill();
    std::fs::remove_file(seen.join("given.txt")).expect("the detector's last word goes");
    runner.restart();
    eventually(
        "an offline run after the restart got both values",
        WAIT,
        || async {
            std::fs::read_to_string(seen.join("given.txt"))
                .is_ok_and(|g| g == format!("rtsp://viewer:{CAMERA}@10.0.0.7/stream\n{ROTATED}\n"))
        },
    )
    .await;
    owned.functions.restart().await;
    let system = &owned;
    eventually("the offline runs are delivered", WAIT, || async {
        runner.delivered_everything().await
    })
    .await;

    // Walls: another brand's admin, a viewer, an operator.
    let other_brand = res_tests::functions::Seed::new(&system.pool)
        .brand("UTC")
        .await;
    let stranger = key(&[
        "--name",
        "eve",
        "--role",
        "admin",
        "--brand",
        &other_brand.to_string(),
    ]);
    for (token, code) in [(&stranger, 4), (&viewer, 3), (&system.operator, 3)] {
        for args in [
            vec!["secrets", "list", "--brand", &brand_arg],
            vec!["secrets", "delete", "camera-pass", "--brand", &brand_arg],
        ] {
            let output = system.resctl(token, &args).await;
            assert_eq!(output.status.code(), Some(code), "{args:?}: {output:?}");
        }
        let output = resctl_with_input(
            system,
            token,
            &["secrets", "set", "camera-pass", "--brand", &brand_arg],
            "stolen-value",
        );
        assert_eq!(output.status.code(), Some(code), "{output:?}");
    }
    let theirs = resctl_ok(system, &stranger, &["secrets", "list"]).await;
    assert_eq!(theirs, "no secrets\n");
    let history = resctl_ok(
        system,
        &admin,
        &[
            "secrets",
            "history",
            "analytics-token",
            "--brand",
            &brand_arg,
        ],
    )
    .await;
    let changes: Vec<Vec<&str>> = history
        .lines()
        .skip(1)
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words[words.len().saturating_sub(3)..].to_vec()
        })
        .collect();
    assert_eq!(
        changes,
        [vec!["set", "2", "ada"], vec!["created", "1", "ada"]],
        "{history}"
    );

    // Everything a person sees.
    let execution: Uuid = sqlx::query_scalar(
        "SELECT id FROM executions WHERE branch_rule_id = $1 AND status = 'completed' LIMIT 1",
    )
    .bind(rule)
    .fetch_one(&system.pool)
    .await
    .expect("a run");
    let logs = resctl_ok(
        system,
        &admin,
        &["executions", "logs", &execution.to_string()],
    )
    .await;
    assert!(
        logs.contains("connecting to rtsp://viewer:***@10.0.0.7/stream with ***"),
        "{logs}"
    );
    let mut shown = vec![("diff", diff), ("apply", applied), ("logs", logs)];
    for args in [
        vec!["export", "--brand", brand_arg.as_str()],
        vec!["export", "--catalogue"],
        vec!["config", "history", "--brand", brand_arg.as_str()],
        vec!["secrets", "list"],
        vec!["secrets", "list", "--json"],
        vec!["executions", "show", &execution.to_string()],
        vec!["executions", "list", "--json"],
        vec!["rules", "describe", &rule.to_string()],
        vec!["violations", "list", "--json"],
    ] {
        let token = if args[..2] == ["export", "--catalogue"] {
            &platform
        } else {
            &admin
        };
        shown.push((args.join(" ").leak(), resctl_ok(system, token, &args).await));
    }
    let revisions: Vec<(i64, bool)> =
        sqlx::query_as("SELECT id, brand_id IS NULL FROM config_revisions ORDER BY id")
            .fetch_all(&system.pool)
            .await
            .expect("the revisions");
    assert!(revisions.len() >= 2, "{revisions:?}");
    for (revision, catalogue) in revisions {
        let token = if catalogue { &platform } else { &admin };
        let revision = revision.to_string();
        for args in [
            vec!["config", "show", revision.as_str(), "--document"],
            vec!["config", "show", revision.as_str()],
        ] {
            shown.push((args.join(" ").leak(), resctl_ok(system, token, &args).await));
        }
    }
    let mut console = Console::new(&system.functions.url().replace("/functions/v1", ""));
    assert_eq!(console.sign_in(&admin).await.status, 303);
    for page in [
        "/console/".to_owned(),
        "/console/rules".to_owned(),
        format!("/console/rules/{rule}"),
        format!("/console/rules/{rule}/configuration"),
        "/console/executions".to_owned(),
        format!("/console/executions/{execution}"),
        "/console/runners".to_owned(),
    ] {
        let answer = console.get(&page).await;
        assert_eq!(answer.status, 200, "{page}");
        shown.push((page.leak(), answer.body));
    }
    for (what, text) in &shown {
        holds_neither(what, text);
    }

    // Every file: logs, plan.json, outboxes, journals; the sealed file holds no value.
    let runner_dirs = [&runner.state_dir, &other.state_dir];
    assert!(
        runner_dirs[0].join("secrets.sealed").exists(),
        "the site keeps them sealed"
    );
    assert!(
        !runner_dirs[1].join("secrets.sealed").exists(),
        "another branch's site has none"
    );
    let status = other.status().await.unwrap_or_default();
    assert_eq!(status["secrets"], 0, "{status}");
    let status = runner.status().await.unwrap_or_default();
    assert_eq!(status["secrets"], 2, "{status}");
    let mut files = Vec::new();
    files_under(&system.dir, &seen, &mut files);
    assert!(
        files.iter().any(|(p, _)| p.ends_with("functions.log")),
        "{files:?}"
    );
    assert!(files.iter().any(|(p, _)| p.ends_with("plan.json")));
    assert!(files.iter().any(|(p, _)| p.ends_with("secrets.sealed")));
    // The detector's stderr went through the runner's log, masked.
    assert!(
        runner
            .log()
            .contains("connecting to rtsp://viewer:***@10.0.0.7/stream with ***"),
        "{}",
        runner.log()
    );
    for (file, text) in &files {
        holds_neither(&file.display().to_string(), text);
    }

    // Every table of the database, as a dump would show it.
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT quote_ident(table_name) FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&system.pool)
    .await
    .expect("the tables");
    assert!(tables.len() > 20, "{tables:?}");
    for table in tables {
        let rows: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT string_agg(t::text, E'\\n') FROM {table} t"
        )))
        .fetch_one(&system.pool)
        .await
        .expect("a table's rows");
        holds_neither(&format!("table {table}"), &rows.unwrap_or_default());
    }
    drop(other);
    drop(runner);
    std::fs::remove_dir_all(&seen).ok();
}
