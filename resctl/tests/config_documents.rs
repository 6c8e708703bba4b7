//! `resctl config validate|schema` as a child process: documents are checked with no token
//! and no functions, every problem printed with its path, exit 2 when there are any.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// `resctl` with no token, URL or config file, `stdin` as its input.
fn resctl(args: &[&str], stdin: Option<&str>) -> Output {
    resctl_bytes(args, stdin.unwrap_or("").as_bytes())
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_documented_examples_are_valid_without_a_token() {
    let catalogue = repo("docs/config/catalogue.yaml");
    let brand = repo("docs/config/brand.yaml");
    let catalogue = catalogue.to_str().expect("utf-8 path");
    let brand = brand.to_str().expect("utf-8 path");
    let out = resctl(&["config", "validate", "-f", catalogue], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).ends_with("is valid (0 warnings)\n"),
        "{}",
        text(&out)
    );
    let out = resctl(
        &["config", "validate", "-f", brand, "--catalogue", catalogue],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).ends_with("is valid (0 warnings)\n"),
        "{}",
        text(&out)
    );
}

#[test]
fn every_problem_is_printed_with_its_path_and_the_exit_code_is_2() {
    let catalogue = repo("docs/config/catalogue.yaml");
    let broken = r#"
brand:
  name: Demo Retail
  zone: Asia/Riyad
  rules:
    Queue length: {schedule: "*/15 * * *"}
  branches:
    - name: Riyadh Olaya
      rules:
        Queue length:
          window: {from: "08:00", to: "8pm"}
        Empty shelves: {}
"#;
    let out = resctl(
        &[
            "config",
            "validate",
            "-f",
            "-",
            "--catalogue",
            catalogue.to_str().expect("utf-8 path"),
        ],
        Some(broken),
    );
    assert_eq!(out.status.code(), Some(2));
    let printed = text(&out);
    for line in [
        "error: brand.zone: unknown time zone 'Asia/Riyad'",
        "error: brand.rules[\"Queue length\"].schedule: invalid cron '*/15 * * *'",
        "error: brand.branches[0].rules[\"Empty shelves\"]: 'Empty shelves' is not among the brand's rules",
        "error: brand.branches[0].rules[\"Queue length\"].window.to: '8pm' is not a time",
        "- has 4 problems; nothing was checked against the functions",
    ] {
        assert!(printed.contains(line), "missing {line:?} in\n{printed}");
    }

    let out = resctl(&["config", "validate", "-f", "-", "--json"], Some(broken));
    assert_eq!(out.status.code(), Some(2));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(answer["valid"], false);
    assert_eq!(answer["errors"][0]["path"], "brand.zone");
    assert!(answer["warnings"].is_array());
}

#[test]
fn unreadable_documents_are_refused_with_their_place() {
    let out = resctl(
        &["config", "validate", "-f", "-"],
        Some("brand:\n  name: A\n  name: B\n"),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out)
            .starts_with("error: brand: the key 'name' appears twice here (line 3, column 3)\n"),
        "{}",
        text(&out)
    );

    let out = resctl(
        &["config", "validate", "-f", "/nonexistent/brand.yaml"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot read /nonexistent/brand.yaml"),
        "{stderr}"
    );
}

#[test]
fn the_published_schema_is_the_one_resctl_prints() {
    let out = resctl(&["config", "schema"], None);
    assert_eq!(out.status.code(), Some(0));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo("docs/config/schema.json")).expect("docs/config/schema.json"),
    )
    .expect("json");
    assert_eq!(
        printed, published,
        "regenerate: resctl config schema > docs/config/schema.json"
    );
    for top in ["catalogue", "brand", "base_revision"] {
        assert!(printed["properties"].get(top).is_some(), "{top}");
    }
    assert_eq!(printed["additionalProperties"], false);
}

#[test]
fn compare_shows_each_change_and_when_the_branch_rule_runs_before_and_after() {
    let catalogue = repo("docs/config/catalogue.yaml");
    let brand = repo("docs/config/brand.yaml");
    let moved = std::env::temp_dir().join(format!("resctl-compare-{}.yaml", std::process::id()));
    let original = std::fs::read_to_string(&brand).expect("brand.yaml");
    std::fs::write(
        &moved,
        original.replace(
            "from: \"07:00\", to: \"23:00\"",
            "from: \"10:00\", to: \"23:00\"",
        ),
    )
    .expect("write");
    let args = [
        "config",
        "compare",
        "--from",
        brand.to_str().expect("utf-8 path"),
        "-f",
        moved.to_str().expect("utf-8 path"),
        "--catalogue",
        catalogue.to_str().expect("utf-8 path"),
    ];
    let out = resctl(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = text(&out);
    assert!(
        printed.starts_with(
            "~ branch rule 'Berlin Mitte / Queue length'\n    window: 07:00-23:00 → 10:00-23:00\n    next runs (Europe/Berlin):\n      before: "
        ),
        "{printed}"
    );
    assert!(
        printed.ends_with("0 to create, 1 to change, 0 to archive or delete.\n"),
        "{printed}"
    );

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = resctl(&json_args, None);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(answer["changes"][0]["kind"], "branch rule");
    assert_eq!(answer["changes"][0]["fields"][0]["after"], "10:00-23:00");
    assert_eq!(answer["changes"][0]["runs"]["zone"], "Europe/Berlin");

    // Nothing is compared unless both documents are valid.
    std::fs::write(
        &moved,
        original.replace("zone: Europe/Berlin", "zone: Europe/Berlinn"),
    )
    .expect("write");
    let out = resctl(&args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("error: brand.branches[1].zone: unknown time zone 'Europe/Berlinn'"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_file(&moved);
}

/// [`resctl`] with any bytes as its input.
fn resctl_bytes(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_resctl"))
        .args(args)
        .env_remove("RES_TOKEN")
        .env_remove("RES_URL")
        .env_remove("RESCTL_CONFIG")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("resctl starts");
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin).expect("stdin");
    }
    child.wait_with_output().expect("resctl ends")
}

/// Every command that reads a file or standard input exits 2 (bad usage) on one it cannot
/// read or that is not UTF-8 text, naming it, before anything is sent anywhere.
#[test]
fn every_command_that_reads_a_file_exits_2_when_it_cannot_read_or_decode_it() {
    let dir = std::env::temp_dir().join(format!("resctl-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let latin1 = dir.join("latin1.yaml");
    std::fs::write(&latin1, b"brand:\n  name: M\xfcnchen\n").expect("written");
    let latin1 = latin1.to_str().expect("a UTF-8 path").to_owned();
    let missing = dir.join("missing.yaml").to_str().expect("path").to_owned();
    let good = repo("docs/config/brand.yaml");
    let good = good.to_str().expect("path");
    // Online commands read the file first: a closed port proves nothing was sent.
    let online = ["--url", "http://127.0.0.1:9", "--token", "res_unused"];
    for bad in [&latin1, &missing] {
        let commands: Vec<Vec<&str>> = vec![
            vec!["config", "validate", "-f", bad],
            vec!["config", "validate", "-f", good, "--catalogue", bad],
            vec!["config", "compare", "--from", bad, "-f", good],
            vec!["config", "compare", "--from", good, "-f", bad],
            [&online[..], &["apply", "-f", bad]].concat(),
            [&online[..], &["diff", "-f", bad]].concat(),
        ];
        for args in commands {
            let out = resctl_bytes(&args, b"");
            let all = format!("{}{}", text(&out), String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.status.code(), Some(2), "{args:?}: {all}");
            assert!(all.contains(bad.as_str()), "{args:?} names the file: {all}");
            if bad == &latin1 {
                assert!(
                    all.contains("is not UTF-8 text (at byte offset 16)"),
                    "{args:?}: {all}"
                );
            }
        }
    }
    for args in [
        vec!["config", "validate", "-f", "-"],
        [&online[..], &["apply", "-f", "-"]].concat(),
    ] {
        let out = resctl_bytes(&args, b"brand: {name: \xff}\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("standard input is not UTF-8 text"),
            "{args:?}: {stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
