//! The secrets section of docs/configure.md and the key rotation of docs/deploy.md, run as
//! written. The console example's commands run one by one with this system's brand and branch
//! ids put in for the example's, and each answer is compared with the documented lines (ids,
//! times and ages aside). The rotation runs its commands as the steps give them and restarts
//! the functions with the keyrings in the steps' order.

use std::process::Command;

use uuid::Uuid;

use super::docs::{blocks, built_binaries_first};
use super::system::{System, functions_cli};

/// The example's placeholders for the brand's and the branch's ids.
const BRAND_PLACEHOLDER: &str = "0b7e4a52-...";
const BRANCH_PLACEHOLDER: &str = "3b9e7d2a-...";

/// The text under `heading` (a whole heading line) up to the next heading of its level or
/// higher.
fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = markdown
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{heading:?} in the document"));
    let body = &markdown[start + heading.len() + 2..];
    let end = body
        .match_indices("\n#")
        .find(|(at, _)| {
            let hashes = body[at + 1..].chars().take_while(|c| *c == '#').count();
            hashes <= level && body[at + 1 + hashes..].starts_with(' ')
        })
        .map_or(body.len(), |(at, _)| at);
    &body[..end]
}

/// A token with what changes from run to run replaced: an id (whole, or its first eight
/// digits and an ellipsis) is `<id>`, an instant `<time>`.
fn token(word: &str) -> String {
    let core = word.trim_end_matches([')', ',', ':']);
    let tail = &word[core.len()..];
    let bytes = core.as_bytes();
    if bytes.len() >= 9 && bytes[8] == b'-' && bytes[..8].iter().all(u8::is_ascii_hexdigit) {
        return format!("<id>{tail}");
    }
    if core.len() == 20 && core.ends_with('Z') && bytes[4] == b'-' && bytes[10] == b'T' {
        return format!("<time>{tail}");
    }
    word.to_owned()
}

/// A line as compared: tokens normalised, ages ("now", "3 min ago") as `<age>`, any run of
/// spaces as one (table columns are as wide as their longest cell).
fn normalised(line: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for word in line.split_whitespace() {
        if word == "ago" && out.len() >= 2 && out[out.len() - 2].parse::<f64>().is_ok() {
            out.truncate(out.len() - 2);
            out.push("<age>".into());
        } else if word == "now" {
            out.push("<age>".into());
        } else {
            out.push(token(word));
        }
    }
    out.join(" ")
}

/// The inline code spans of `text`, in order.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

fn read_doc(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../docs/{name}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("docs/{name}: {e}"))
}

fn run_sh(script: &str, envs: &[(&str, &str)], dir: &std::path::Path) -> std::process::Output {
    let (_, path) = built_binaries_first();
    Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .envs(envs.iter().copied())
        .output()
        .expect("sh runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_secrets_section_and_the_key_rotation_in_the_docs_run_as_written() {
    let mut system = System::start().await;
    let brand: Uuid = sqlx::query_scalar(
        "UPDATE brands SET name = 'Demo Retail' \
         WHERE id = (SELECT brand_id FROM branches WHERE id = $1) RETURNING id",
    )
    .bind(system.branch)
    .fetch_one(&system.pool)
    .await
    .expect("the brand, named as in the example");
    let ada = functions_cli(
        system.database_url(),
        &[
            "create-api-key",
            "--name",
            "ada",
            "--role",
            "admin",
            "--brand",
            &brand.to_string(),
        ],
    );
    let dir = system.dir.join("docs-secrets");
    std::fs::create_dir_all(&dir).expect("a working directory");
    std::fs::write(dir.join("token.txt"), "first analytics token\n").expect("token.txt");
    std::fs::write(dir.join("new-token.txt"), "second analytics token\n").expect("new-token.txt");
    let url = system
        .functions
        .url()
        .trim_end_matches(res_shared::wire::FUNCTIONS_PREFIX)
        .to_owned();
    let env = [
        ("RES_URL", url.as_str()),
        ("RES_TOKEN", ada.as_str()),
        ("CAMERA_PASSWORD", "camera password 1"),
    ];

    // configure.md, "Secrets": the example documents (the catalogue's, the brand's) are
    // ones `config validate` accepts; they are applied below.
    let configure = read_doc("configure.md");
    let examples: Vec<_> = blocks(section(&configure, "## Secrets"))
        .into_iter()
        .filter(|b| b.lang == "yaml")
        .collect();
    assert_eq!(examples.len(), 2, "the catalogue's and the brand's example");
    for (name, example) in ["catalogue.yaml", "brand.yaml"].iter().zip(&examples) {
        std::fs::write(dir.join(name), &example.text).expect("example written");
        let validated = run_sh(&format!("resctl config validate -f {name}"), &env, &dir);
        assert!(
            validated.status.success(),
            "configure.md:{}: {validated:?}",
            example.line
        );
    }

    // configure.md, "Setting them": every command, as written.
    let setting = section(&configure, "### Setting them");
    let console: Vec<_> = blocks(setting)
        .into_iter()
        .filter(|b| b.lang == "console")
        .collect();
    assert_eq!(console.len(), 1, "one console example under 'Setting them'");
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in console[0].text.lines() {
        match line.strip_prefix("$ ") {
            Some(command) => steps.push((command.to_owned(), Vec::new())),
            None => steps
                .last_mut()
                .expect("output after a command")
                .1
                .push(line.to_owned()),
        }
    }
    assert!(steps.len() >= 6, "{} commands", steps.len());
    for (command, documented) in &steps {
        let command = command
            .replace(BRAND_PLACEHOLDER, &brand.to_string())
            .replace(BRANCH_PLACEHOLDER, &system.branch.to_string());
        let output = run_sh(&command, &env, &dir);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "configure.md: `{command}` exit {}: {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let got: Vec<String> = stdout.lines().map(normalised).collect();
        let want: Vec<String> = documented.iter().map(|l| normalised(l)).collect();
        assert_eq!(got, want, "configure.md: `{command}` answers as documented");
    }

    // deploy.md, "Rotating the sealing key". Two values sealed under the tests' key (OLD).
    for (name, value) in [
        ("analytics-token", "a token"),
        ("olaya-cam-1", "a password"),
    ] {
        let set = run_sh(
            &format!("printf '%s' '{value}' | resctl secrets set {name} --brand {brand}"),
            &env,
            &dir,
        );
        assert!(set.status.success(), "{set:?}");
    }
    let deploy = read_doc("deploy.md");
    let secrets = section(&deploy, "## Secrets");
    let making = secrets
        .split("**Making a key.**")
        .nth(1)
        .expect("the paragraph on making a key");
    let new_key_command = code_spans(making)
        .into_iter()
        .find(|span| span.contains("secrets new-key"))
        .expect("the new-key command");
    let made = run_sh(
        new_key_command,
        &[("DATABASE_URL", system.database_url())],
        &dir,
    );
    let new = String::from_utf8_lossy(&made.stdout).trim().to_owned();
    let (new_id, _) = new.split_once(':').expect("ID:BASE64");
    assert!(
        made.status.success() && new_id == "2026-11",
        "`{new_key_command}`: {made:?}"
    );
    let old = res_tests::secrets_keys();
    let rotation = secrets
        .split("**Rotating the sealing key**")
        .nth(1)
        .and_then(|rest| rest.split("\nA leaked sealing key").next())
        .expect("the rotation steps");
    let spelled = |span: &str| span.replace("OLD", old).replace("NEW", &new);
    let mut keyrings = 0;
    let mut rewrapped = false;
    for span in code_spans(rotation) {
        let is_keyring =
            !span.is_empty() && span.split(',').all(|part| part == "OLD" || part == "NEW");
        if is_keyring {
            // "… and deploy": every process restarted with this keyring serves, and holds
            // every value (a rewrap under its first key finds nothing it cannot open).
            let keyring = spelled(span);
            system.functions.stop();
            system.functions.use_keyring(&keyring);
            system.functions.restart().await;
            let listed = run_sh("resctl secrets list", &env, &dir);
            assert!(
                listed.status.success(),
                "deploy.md keyring `{span}`: {listed:?}"
            );
            keyrings += 1;
        } else if span.contains("res-functions secrets rewrap") {
            let ran = run_sh(
                &spelled(span),
                &[("DATABASE_URL", system.database_url())],
                &dir,
            );
            let said = String::from_utf8_lossy(&ran.stdout).trim().to_owned();
            let documented = code_spans(rotation)
                .into_iter()
                .find(|s| s.contains("rewrapped under key"))
                .expect("the rewrap's documented answer");
            assert!(ran.status.success(), "`{span}`: {ran:?}");
            assert_eq!(
                said,
                documented.replace("'NEW'", &format!("'{new_id}'")),
                "deploy.md: `{span}` answers as documented"
            );
            rewrapped = true;
        }
    }
    assert!(keyrings >= 3 && rewrapped, "the steps: {keyrings} keyrings");
    // Only the new key is held now, and every value opens under it.
    let again = run_sh(
        "res-functions secrets rewrap",
        &[
            ("DATABASE_URL", system.database_url()),
            ("RES_SECRETS_KEYS", &new),
        ],
        &dir,
    );
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        format!("0 secrets rewrapped under key '{new_id}'; 0 changed meanwhile"),
        "{again:?}"
    );
    // The example document applies as written (a platform key: it has a catalogue part),
    // and the runner of its branch is sent both secrets.
    let platform = functions_cli(
        system.database_url(),
        &[
            "create-api-key",
            "--name",
            "platform",
            "--role",
            "admin",
            "--all-brands",
        ],
    );
    let as_platform = [("RES_URL", url.as_str()), ("RES_TOKEN", platform.as_str())];
    for (token, name) in [
        (&as_platform[..], "catalogue.yaml"),
        (&env[..], "brand.yaml"),
    ] {
        let applied = run_sh(
            &format!("resctl apply -f {name} -m 'the secrets example'"),
            token,
            &dir,
        );
        assert!(
            applied.status.success(),
            "configure.md, {name}: {applied:?}"
        );
    }
    let olaya: Uuid = sqlx::query_scalar("SELECT id FROM branches WHERE name = 'Riyadh Olaya'")
        .fetch_one(&system.pool)
        .await
        .expect("the example's branch");
    let runner = functions_cli(
        system.database_url(),
        &[
            "create-api-key",
            "--name",
            "olaya",
            "--role",
            "runner",
            "--branch",
            &olaya.to_string(),
        ],
    );
    let plan_url = format!("{}/get-execution-plan-v2", system.functions.url());
    let plan = || async {
        let reply = res_tests::functions::client()
            .post(&plan_url)
            .bearer_auth(&runner)
            .json(&serde_json::json!({"runner_id": "olaya-1", "format": 4}))
            .send()
            .await
            .expect("a plan answer");
        assert!(reply.status().is_success(), "{}", reply.status());
        let body: serde_json::Value = reply.json().await.expect("JSON");
        let mut names: Vec<String> = body["secrets"]
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|s| s["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    assert_eq!(plan().await, ["analytics-token", "olaya-cam-1"]);
    // Functions whose keys open neither: the plan leaves them out, and the log names them.
    let stranger = res_functions::secrets::Keyring::new_key("stranger").expect("a key");
    system.functions.stop();
    system.functions.use_keyring(&stranger);
    system.functions.restart().await;
    assert!(plan().await.is_empty(), "nothing it cannot open is sent");
    let log = std::fs::read_to_string(system.dir.join("functions.log")).expect("the log");
    for name in ["analytics-token", "olaya-cam-1"] {
        assert!(
            log.lines()
                .any(|l| l.contains("cannot open a secret for a plan") && l.contains(name)),
            "the log names {name}"
        );
    }

    // A value under a key the functions do not hold is named as the step says.
    let refused = run_sh(
        "res-functions secrets rewrap",
        &[
            ("DATABASE_URL", system.database_url()),
            ("RES_SECRETS_KEYS", &format!("{stranger},{old}")),
        ],
        &dir,
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    let documented = rotation
        .split('"')
        .find(|s| s.contains("do not hold"))
        .map(|s| s.replace("'OLD'", &format!("'{new_id}'")))
        .expect("the message for a value under a dropped key");
    assert!(
        !refused.status.success() && said.contains(&documented),
        "{documented:?} in {said}"
    );
}
