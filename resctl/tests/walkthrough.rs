//! docs/configure.md's walkthrough, run as written: every `$` line of its section in order
//! through `sh` with `resctl` on the PATH, against real functions and PostgreSQL, and each
//! documented output line found in what the command printed, in order (`…` stands for what
//! differs from run to run).

use std::path::{Path, PathBuf};
use std::process::Command;

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_tests::functions::TestApp;
use uuid::Uuid;

const SECTION: &str = "## From an empty brand to rules running at two branches";
const HOURS: &str = "## Opening hours";

/// A documented command and the output the page shows for it.
struct Step {
    command: String,
    output: Vec<String>,
}

/// The `$` lines of the walkthrough's console blocks, each with the lines after it.
fn steps(page: &str, heading: &str) -> Vec<Step> {
    let start = page.find(heading).expect("the walkthrough section");
    let section = &page[start + heading.len()..];
    let section = section.find("\n## ").map_or(section, |end| &section[..end]);
    let mut steps: Vec<Step> = Vec::new();
    let mut in_block = false;
    for line in section.lines() {
        if line.starts_with("```") {
            in_block = line.starts_with("```console");
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                command: command.to_owned(),
                output: Vec::new(),
            });
        } else if let Some(step) = steps.last_mut() {
            step.output.push(line.to_owned());
        }
    }
    steps
}

/// Whether `actual` is the documented `expected`, `…` matching any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split('…').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return expected == actual;
    };
    if parts.len() == 1 {
        return expected == actual;
    }
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The documented lines not found in order in `printed` (a line of only `…` is a gap).
fn missing(documented: &[String], printed: &str) -> Vec<String> {
    let mut lines = printed.lines();
    let mut missing = Vec::new();
    for expected in documented.iter().filter(|l| l.trim() != "…") {
        if !lines.any(|actual| line_matches(expected, actual)) {
            missing.push(expected.clone());
            lines = printed.lines();
        }
    }
    missing
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Shell {
    dir: PathBuf,
    url: String,
    platform: String,
    admin: Option<String>,
}

impl Shell {
    fn run(&self, command: &str) -> (bool, String) {
        let resctl = PathBuf::from(env!("CARGO_BIN_EXE_resctl"));
        let bin = resctl.parent().unwrap_or(Path::new("."));
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = Command::new("sh")
            .args(["-c", command])
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("RES_URL", &self.url)
            .env(
                "RES_TOKEN",
                self.admin.as_deref().unwrap_or("no admin key yet"),
            )
            .env("PLATFORM_TOKEN", &self.platform)
            // No config file of the machine's: a home of its own.
            .env("HOME", &self.dir)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("RESCTL_CONFIG")
            .output()
            .expect("sh runs");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), printed)
    }
}

#[test]
fn line_matching_reads_the_ellipsis_as_any_text() {
    assert!(line_matches("a…c", "abbbc"));
    assert!(line_matches(
        "…Olaya…Queue…",
        "  x Riyadh Olaya  Queue length 3"
    ));
    assert!(!line_matches("a…c", "abbbd"));
    // A table's columns widen with what is in them ("in 2 h", "in 58 min").
    let header = "RULE           BRANCH        STATE  NEXT RUN…LAST RUN  ID …ATTENTION OR CAUSE";
    for printed in [
        "RULE           BRANCH        STATE  NEXT RUN  LAST RUN  ID                                    ATTENTION OR CAUSE",
        "RULE           BRANCH        STATE  NEXT RUN   LAST RUN  ID                                    ATTENTION OR CAUSE",
    ] {
        assert!(line_matches(header, printed), "{printed}");
    }
    assert!(line_matches("exact", "exact"));
    assert!(!line_matches("exact", "exactly"));
    let printed = "one\ntwo\nthree\n";
    assert!(missing(&["one".into(), "…".into(), "three".into()], printed).is_empty());
    assert_eq!(missing(&["three".into(), "one".into()], printed), ["one"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configure_walkthrough_runs_as_written() {
    let app = walk(SECTION, "Demo Retail", 10).await;
    // The walkthrough ends where it started the window: back at eight.
    let window: String = sqlx::query_scalar(
        "SELECT x.operation_time_from::text FROM branch_rules x \
         JOIN branches b ON b.id = x.branch_id JOIN rules r ON r.id = x.rule_id \
         WHERE b.name = 'Riyadh Olaya' AND r.name = 'Queue length'",
    )
    .fetch_one(&app.pool)
    .await
    .expect("the window");
    assert_eq!(window, "08:00:00");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_opening_hours_section_runs_as_written() {
    let app = walk(HOURS, "Hours Retail", 6).await;
    // Olaya's hours as applied: its calendars resolved, Ramadan's range kept whole.
    let hours: serde_json::Value =
        sqlx::query_scalar("SELECT opening_hours FROM branches WHERE name = 'Riyadh Olaya'")
            .fetch_one(&app.pool)
            .await
            .expect("hours");
    let text = hours.to_string();
    for part in [
        "\"sat-thu\"",
        "National Day",
        "saudi-holidays-2026-2027",
        "\"until\":\"2027-03-09\"",
        "Stocktake",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
}

/// Runs the `$` lines of `heading`'s section in order, a key of `brand`'s admin in
/// `RES_TOKEN` once a platform engineer has made it; answers the app it ran against.
async fn walk(heading: &str, brand: &str, at_least: usize) -> TestApp {
    let page = std::fs::read_to_string(repo().join("docs/configure.md")).expect("the page");
    let steps = steps(&page, heading);
    assert!(steps.len() >= at_least, "found {} steps", steps.len());
    let app = TestApp::start().await;
    let platform = app.all_brands_token("platform", Role::Admin).await;
    let dir = std::env::temp_dir().join(format!("res-walkthrough-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("a directory");
    std::os::unix::fs::symlink(repo().join("docs"), dir.join("docs")).expect("docs");
    let mut shell = Shell {
        dir: dir.clone(),
        url: app.base.clone(),
        platform,
        admin: None,
    };
    for step in &steps {
        // The brand admin's key is made once the platform engineer has made the brand.
        if shell.admin.is_none() && !step.command.starts_with("RES_TOKEN=$PLATFORM_TOKEN") {
            let brand: Option<Uuid> = sqlx::query_scalar("SELECT id FROM brands WHERE name = $1")
                .bind(brand)
                .fetch_optional(&app.pool)
                .await
                .expect("brands");
            if let Some(brand) = brand {
                let scope = KeyScope {
                    brand_ids: vec![brand],
                    ..KeyScope::default()
                };
                shell.admin = Some(app.token("ada", Role::Admin, &scope).await);
            }
        }
        let command = step.command.clone();
        let (ran, printed) = {
            let shell = &shell;
            tokio::task::block_in_place(|| shell.run(&command))
        };
        // A command documented with an error fails; every other succeeds.
        let refused = step.output.iter().any(|line| line.contains("error:"));
        assert_eq!(ran, !refused, "$ {command}\n{printed}");
        let missing = missing(&step.output, &printed);
        assert!(
            missing.is_empty(),
            "$ {command}\nnot printed (in order): {missing:#?}\nprinted:\n{printed}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    app
}
