//! Configuring in the console, in a real headless Chromium against `res-functions serve`:
//! a brand configured with `resctl apply` (documents, no SQL), its rule's configuration
//! read as a person reads it, a window changed through the edit form (the diff with next
//! runs before Save, nothing written until then, the revision recording who and why), a
//! bad value refused naming its field, and another brand's admin answered as unknown.

use res_tests::browser::Browser;
use uuid::Uuid;

use super::system::{System, functions_cli};

const WAIT: std::time::Duration = std::time::Duration::from_secs(40);

async fn resctl_apply(system: &System, token: &str, document: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(document);
    let path = path.to_str().expect("a UTF-8 path");
    resctl_ok(
        system,
        token,
        &["apply", "-f", path, "-m", "set up by the test"],
    )
    .await;
}

async fn sign_in(browser: &Browser, console: &str, key: &str) {
    browser.open(&format!("{console}/")).await;
    browser.fill("#key", key).await;
    browser
        .click("form[action='/console/sign-in'] button")
        .await;
    assert_eq!(browser.path().await, "/console/");
}

async fn window_from(system: &System, rule: Uuid) -> String {
    sqlx::query_scalar("SELECT operation_time_from::text FROM branch_rules WHERE id = $1")
        .bind(rule)
        .fetch_one(&system.pool)
        .await
        .expect("the window")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_brand_admin_reads_and_changes_a_rule_in_a_real_browser() {
    let system = System::start().await;
    let admin = |args: &[&str]| {
        let mut all = vec!["create-api-key", "--role", "admin"];
        all.extend_from_slice(args);
        functions_cli(system.database_url(), &all)
    };
    let platform = admin(&["--name", "platform", "--all-brands"]);
    resctl_apply(&system, &platform, "docs/config/catalogue.yaml").await;
    resctl_apply(&system, &platform, "docs/config/brand.yaml").await;
    let (brand, rule): (Uuid, Uuid) = sqlx::query_as(
        "SELECT b.brand_id, x.id FROM branch_rules x JOIN branches b ON b.id = x.branch_id \
         JOIN rules r ON r.id = x.rule_id WHERE b.name = 'Riyadh Olaya' AND r.name = 'Queue length'",
    )
    .fetch_one(&system.pool)
    .await
    .expect("the configured rule");
    let ada = admin(&["--name", "ada", "--brand", &brand.to_string()]);
    let console = system.functions.url().replace("/functions/v1", "/console");
    let browser = Browser::start(1280, 900).await;
    sign_in(&browser, &console, &ada).await;

    // The rule page leads to its configuration, read as a person reads it.
    browser.open(&format!("{console}/rules/{rule}")).await;
    browser.click("#configuration-link").await;
    assert_eq!(
        browser.path().await,
        format!("/console/rules/{rule}/configuration")
    );
    let schedule = browser.text("#config-schedule").await;
    assert!(
        schedule.contains("the brand's schedule for this rule"),
        "{schedule}"
    );
    assert_eq!(browser.text("#config-window").await, "08:00–24:00");
    let nodes = browser.text("#workflow-nodes").await;
    let order: Vec<&str> = nodes.lines().collect();
    assert_eq!(
        order,
        [
            "detect detection: Queue detector",
            "violation business: create_violation with Record violation",
            "tell business: notify with Tell the manager"
        ],
        "{nodes}"
    );
    assert!(browser.text("#workflow-edges").await.contains("is_success"));

    // A window opening at nine: the diff and next runs first, nothing written yet.
    browser.fill("#config-from", "09:00").await;
    browser.fill("#config-message", "open at nine").await;
    browser.click("#config-preview").await;
    let diff = browser.text("#config-diff").await;
    assert!(
        diff.contains("window: 08:00-24:00 → 09:00-24:00")
            && diff.contains("next runs (Asia/Riyadh)"),
        "{diff}"
    );
    assert_eq!(window_from(&system, rule).await, "08:00:00");
    browser.click("#config-save-button").await;
    browser
        .wait_for_text("#config-saved", WAIT, |t| t.starts_with("Saved"))
        .await;
    assert_eq!(window_from(&system, rule).await, "09:00:00");
    assert_eq!(browser.text("#config-window").await, "09:00–24:00");
    let history = browser.text("#config-history").await;
    assert!(
        history.contains("ada") && history.contains("open at nine"),
        "{history}"
    );

    // A bad value is refused at its field, and nothing changes.
    browser.fill("#config-to", "25:00").await;
    browser.fill("#config-message", "a typo").await;
    browser.click("#config-preview").await;
    let problems = browser.text("#config-problems").await;
    assert!(problems.contains("window.to"), "{problems}");
    assert_eq!(browser.count("#config-save-button").await, 0);
    assert_eq!(window_from(&system, rule).await, "09:00:00");

    // Another brand's admin: the page is as unknown as a rule that does not exist.
    let other_brand: Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(system.branch)
        .fetch_one(&system.pool)
        .await
        .expect("the other brand");
    let eve = admin(&["--name", "eve", "--brand", &other_brand.to_string()]);
    let other = Browser::start(1280, 900).await;
    sign_in(&other, &console, &eve).await;
    let unknown = Uuid::new_v4();
    for id in [rule, unknown] {
        other
            .open(&format!("{console}/rules/{id}/configuration"))
            .await;
        let text = other.text("main").await;
        assert!(
            text.contains(&format!("branch rule {id} not found")),
            "{text}"
        );
    }
    assert_eq!(window_from(&system, rule).await, "09:00:00");
}

/// The node ids an execution's result records, in the order they ran.
async fn nodes_run(system: &System, execution: Uuid) -> Vec<String> {
    let result: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT result FROM executions WHERE id = $1")
            .bind(execution)
            .fetch_one(&system.pool)
            .await
            .expect("the execution");
    result
        .and_then(|r| r["nodes"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n["node_id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_in_flight_keeps_the_workflow_it_started_with_and_the_next_takes_the_new_one() {
    let system = System::start().await;
    let rule = system
        .rule(
            res_tests::functions::RuleSpec {
                cron: Some("*/10 * * * * *"),
                next_run_time: Some(chrono::Utc::now()),
                ..res_tests::functions::RuleSpec::default()
            },
            &super::system::detector(3.0, 1),
        )
        .await;
    let _runner = system.runner("site-1", &[]);
    res_tests::processes::eventually("the first run started", WAIT, || async {
        system.statuses(rule).await.first().map(String::as_str) == Some("running")
    })
    .await;
    // Mid-run, the workflow loses its violation node (the plan's long poll brings it to
    // the runner within a second).
    let stored: serde_json::Value = sqlx::query_scalar(
        "SELECT c.workflow_config FROM action_template_connections c \
         JOIN branch_rules x ON x.rule_id = c.rule_id WHERE x.id = $1",
    )
    .bind(rule)
    .fetch_one(&system.pool)
    .await
    .expect("the workflow");
    let detect_only = serde_json::json!({
        "start_node": "detect",
        "nodes": {"detect": stored["nodes"]["detect"].clone()},
    });
    res_tests::functions::Seed::new(&system.pool)
        .workflow(rule, &detect_only)
        .await;
    res_tests::processes::eventually("two runs ended", WAIT, || async {
        let ended = system.executions(rule).await;
        ended.len() >= 2 && ended[..2].iter().all(|e| e.1 == "completed")
    })
    .await;
    let runs = system.executions(rule).await;
    assert_eq!(
        nodes_run(&system, runs[0].0).await,
        ["detect", "violation"],
        "the run in flight kept its workflow"
    );
    assert_eq!(
        nodes_run(&system, runs[1].0).await,
        ["detect"],
        "the next run took the new one"
    );
    assert_eq!(system.violations(rule).await, 1);
}

/// `resctl` with `token`, which must succeed; its standard output.
pub(super) async fn resctl_ok(system: &System, token: &str, args: &[&str]) -> String {
    let output = system.resctl(token, args).await;
    assert!(
        output.status.success(),
        "resctl {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Executions of `rule` that ended.
async fn ended(system: &System, rule: Uuid) -> usize {
    system
        .executions(rule)
        .await
        .iter()
        .filter(|e| e.1 != "running" && e.1 != "scheduled")
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_archived_then_rolled_back_runs_its_rules_at_its_site_again() {
    let system = System::start().await;
    let rule = system
        .rule(
            res_tests::functions::RuleSpec {
                cron: Some("*/2 * * * * *"),
                next_run_time: Some(chrono::Utc::now()),
                ..res_tests::functions::RuleSpec::default()
            },
            &super::system::detector(0.1, 0),
        )
        .await;
    let _runner = system.runner("site-1", &[]);
    system.completes(rule, "a run before the archive").await;
    let brand: Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(system.branch)
        .fetch_one(&system.pool)
        .await
        .expect("the brand");
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
    let export = resctl_ok(
        &system,
        &platform,
        &["export", "--brand", &brand.to_string()],
    )
    .await;
    let exported = res_config::parse(&export).expect("the export parses");
    let write = |name: &str, document: &res_config::Document| {
        let path = system.dir.join(name);
        let text = res_config::to_yaml(document, "by the test").expect("yaml");
        std::fs::write(&path, text).expect("written");
        path.to_str().expect("a UTF-8 path").to_owned()
    };
    // Revision 1 keeps the branch (a higher failure threshold); revision 2 archives it.
    let mut kept = exported.clone();
    kept.base_revision = None;
    for rule in kept.brand.iter_mut().flat_map(|b| b.rules.values_mut()) {
        rule.failure_threshold = Some(5);
    }
    let kept = write("kept.yaml", &kept);
    resctl_ok(
        &system,
        &platform,
        &["apply", "-f", &kept, "-m", "threshold 5"],
    )
    .await;
    let mut archived = exported.clone();
    archived.base_revision = None;
    if let Some(b) = archived.brand.as_mut() {
        b.branches.clear();
    }
    let archived = write("archived.yaml", &archived);
    let out = resctl_ok(
        &system,
        &platform,
        &["apply", "-f", &archived, "-m", "close it"],
    )
    .await;
    assert!(out.contains("- branch 'Branch' (archived"), "{out}");

    // The site stops running it: after the run in flight, nothing more ends.
    res_tests::processes::eventually("the run in flight ended", WAIT, || async {
        system
            .statuses(rule)
            .await
            .iter()
            .all(|s| s != "running" && s != "scheduled")
    })
    .await;
    let before = ended(&system, rule).await;
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert_eq!(ended(&system, rule).await, before, "an archived rule ran");

    // Revision 1's document applied again: the branch and its rule come back under their
    // ids, and the site (whose key names that branch) runs the rule again.
    let old = resctl_ok(&system, &platform, &["config", "show", "1", "--document"]).await;
    let path = system.dir.join("revision-1.yaml");
    std::fs::write(&path, old).expect("written");
    let out = resctl_ok(
        &system,
        &platform,
        &["apply", "-f", path.to_str().expect("path"), "-m", "reopen"],
    )
    .await;
    assert!(
        out.contains("+ branch 'Branch' (restored: back under its id, with its history)")
            && out.contains("Applied as configuration revision 3."),
        "{out}"
    );
    res_tests::processes::eventually("the restored rule ran at the site", WAIT, || async {
        ended(&system, rule).await >= before + 2
    })
    .await;
}
