//! The operator console in a real headless Chromium, against `res-functions serve` and a
//! real `res-runner` with a command detector: sign in, the fleet's needs-attention rule,
//! run now to completion, pause, cancel a running execution, a retry chain, a viewer, another
//! brand's ids, a script-named rule and a stale form; a rule failing at 15 branches as one
//! group, paused at all of them with one reason.

use std::time::Duration;

use res_tests::browser::Browser;
use res_tests::functions::{RuleSpec, Seed};
use res_tests::processes::eventually;
use uuid::Uuid;

use super::system::{System, functions_cli};

const WAIT: Duration = Duration::from_secs(40);
const SCRIPT_NAME: &str = "<script>alert(1)</script>";

pub(super) fn console_url(system: &System) -> String {
    system.functions.url().replace("/functions/v1", "/console")
}

/// A rule due tomorrow (only run-now runs it today), named, whose detector takes `seconds`.
async fn tomorrows_rule(system: &System, name: &str, seconds: f64) -> Uuid {
    let rule = system.tomorrows_rule(seconds).await;
    Seed::new(&system.pool).name_rule(rule, name).await;
    rule
}

pub(super) async fn sign_in(browser: &Browser, system: &System, key: &str) {
    browser.open(&format!("{}/", console_url(system))).await;
    assert!(
        browser.path().await.starts_with("/console/sign-in"),
        "signed out first"
    );
    browser.fill("#key", key).await;
    browser
        .click("form[action='/console/sign-in'] button")
        .await;
    assert_eq!(browser.path().await, "/console/", "back where it started");
}

/// Fills the reason of `action`'s form on a rule page and submits it.
async fn act(browser: &Browser, action: &str, reason: &str) {
    browser.fill(&format!("#reason-{action}"), reason).await;
    browser
        .click(&format!("form[action$='/{action}'] button"))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_runs_pauses_and_cancels_rules_in_a_real_browser() {
    let system = System::start_with(&["--sweep-interval", "1"]).await;
    let quick = tomorrows_rule(&system, "Queue length", 0.3).await;
    let slow = tomorrows_rule(&system, "Shelf scan", 60.0).await;
    let flagged = tomorrows_rule(&system, SCRIPT_NAME, 0.1).await;
    sqlx::query(
        "UPDATE branch_rules SET needs_attention_at = now(), consecutive_failures = 3, \
             needs_attention_reason = 'failed 3 times in a row: camera 3 did not answer' \
         WHERE id = $1",
    )
    .bind(flagged)
    .execute(&system.pool)
    .await
    .expect("flag the rule");
    let _runner = system.runner("site-1", &[]);
    let browser = Browser::start(1280, 900).await;
    sign_in(&browser, &system, &system.operator).await;

    // The fleet: the flagged rule first, with its reason, its name as text.
    let attention = browser.text("#attention").await;
    assert!(
        attention.contains("failed 3 times in a row: camera 3 did not answer"),
        "{attention}"
    );
    assert!(
        attention.contains(SCRIPT_NAME),
        "the name shows as text: {attention}"
    );
    assert!(
        browser.client.get_alert_text().await.is_err(),
        "no script ran"
    );

    // Run now: the page shows the run start and complete, refreshing by itself.
    let base = console_url(&system);
    browser.open(&format!("{base}/rules/{quick}")).await;
    // Why it is not running, on the branch's clock with its zone, not in raw UTC.
    let why = browser.text("#blockers").await;
    assert!(
        why.starts_with("due ") && why.contains(" Asia/Riyadh") && !why.contains('Z'),
        "{why}"
    );
    act(&browser, "run-now", "checking the queue camera").await;
    assert!(browser.text("main").await.contains("Run requested"));
    let runs = browser
        .wait_for_text("#runs", WAIT, |text| text.contains("completed"))
        .await;
    assert!(runs.contains("manual by alice"), "{runs}");

    // Pause: shown paused, and a due rule does not run.
    act(&browser, "pause", "camera moved").await;
    browser
        .wait_for_text("#rule-state", WAIT, |text| text.contains("paused"))
        .await;
    // Its upcoming runs will not happen while it is paused, and the page says so.
    let state = browser.text("#state").await;
    assert!(state.contains("none while the rule is paused"), "{state}");
    let ran = system.statuses(quick).await.len();
    sqlx::query(
        "UPDATE branch_rules SET next_run_time = now() - interval '1 second' WHERE id = $1",
    )
    .bind(quick)
    .execute(&system.pool)
    .await
    .expect("make it due");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        system.statuses(quick).await.len(),
        ran,
        "a paused rule does not run"
    );
    assert!(
        browser
            .text("#state")
            .await
            .contains("paused by an operator")
    );

    // Cancel a running execution from its page.
    browser.open(&format!("{base}/rules/{slow}")).await;
    act(&browser, "run-now", "long scan").await;
    eventually("the slow rule runs", WAIT, || async {
        system.statuses(slow).await.iter().any(|s| s == "running")
    })
    .await;
    // The fleet counts it running (judged by its holder, as rules_describe judges it).
    browser.open(&format!("{base}/")).await;
    let branches = browser.text("#branches").await;
    assert!(
        branches.contains("1 running") && branches.contains("1 paused"),
        "{branches}"
    );
    let execution = system.executions(slow).await[0].0;
    browser
        .open(&format!("{base}/executions/{execution}"))
        .await;
    browser.fill("#reason-cancel", "wrong camera").await;
    browser.click("form[action$='/cancel'] button").await;
    browser
        .wait_for_text("#execution-status", WAIT, |text| text.contains("cancelled"))
        .await;
    // Made with SQL, the rule has no configuration revision to name.
    browser
        .wait_for_text("#execution-configuration", WAIT, |text| {
            text == "from before any configuration apply"
        })
        .await;
    assert_eq!(system.statuses(slow).await, ["cancelled"]);

    // A stale form: a token from an earlier session is refused, and nothing happens.
    browser.open(&format!("{base}/rules/{quick}")).await;
    let stale = browser
        .script("return document.querySelector(\"input[name='csrf']\").value")
        .await;
    browser.click(".who button").await;
    assert!(browser.path().await.starts_with("/console/sign-in"));
    sign_in(&browser, &system, &system.operator).await;
    browser.open(&format!("{base}/rules/{quick}")).await;
    let set_stale = format!(
        "document.querySelectorAll(\"input[name='csrf']\").forEach(function (i) {{ i.value = {stale}; }});"
    );
    browser.script(&set_stale).await;
    act(&browser, "resume", "stale form").await;
    assert!(
        browser.text("main").await.contains("stale"),
        "refused as stale"
    );
    assert!(
        sqlx::query_scalar::<_, bool>(
            "SELECT paused_at IS NOT NULL FROM branch_rules WHERE id = $1"
        )
        .bind(quick)
        .fetch_one(&system.pool)
        .await
        .expect("the rule"),
        "still paused"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn viewers_other_brands_and_retry_chains_in_a_real_browser() {
    let system = System::start().await;
    let rule = tomorrows_rule(&system, "Queue length", 0.1).await;
    // A failed run and its retry: the chain the execution page links.
    let (first, retry) = (Uuid::new_v4(), Uuid::new_v4());
    for (id, attempt, retry_of, status, trigger, ago) in [
        (first, 1, None, "failed", "schedule", 600),
        (retry, 2, Some(first), "completed", "retry", 300),
    ] {
        sqlx::query(
            "INSERT INTO executions (id, branch_rule_id, runner_id, status, attempt, retry_of, \
                 root_id, claim_token, lease_seconds, lease_expires_at, trigger, scheduled_at, \
                 started_at, finished_at, error) \
             VALUES ($1, $2, 'site-1', $3, $4, $5, $6, 'seeded', 60, now(), $7, \
                 now() - make_interval(secs => $8), now() - make_interval(secs => $8), \
                 now() - make_interval(secs => $8 - 2), \
                 CASE WHEN $3 = 'failed' THEN 'camera 3 did not answer: ' || \
                      repeat('the stream at rtsp://10.0.0.3/stream1 reset the connection; ', 8) END)",
        )
        .bind(id)
        .bind(rule)
        .bind(status)
        .bind(attempt)
        .bind(retry_of)
        .bind(first)
        .bind(trigger)
        .bind(f64::from(ago))
        .execute(&system.pool)
        .await
        .expect("an execution");
    }
    let viewer = functions_cli(
        system.database_url(),
        &[
            "create-api-key",
            "--name",
            "vera",
            "--role",
            "viewer",
            "--branch",
            &system.branch.to_string(),
        ],
    );
    let seed = Seed::new(&system.pool);
    let other_branch = seed.branch(seed.brand("Europe/Berlin").await, None).await;
    let theirs = seed.branch_rule(other_branch, RuleSpec::default()).await;

    let browser = Browser::start(1280, 900).await;
    sign_in(&browser, &system, &viewer).await;
    let base = console_url(&system);

    // Follow the chain from the retry back to the failed attempt.
    browser.open(&format!("{base}/executions/{retry}")).await;
    assert!(browser.text("#chain").await.contains("attempt 1"));
    browser.click("#chain a").await;
    assert_eq!(browser.path().await, format!("/console/executions/{first}"));
    assert!(
        browser
            .text("#summary")
            .await
            .contains("camera 3 did not answer")
    );

    // A viewer reads but has no action controls.
    browser.open(&format!("{base}/rules/{rule}")).await;
    assert_eq!(
        browser.count("form.action").await,
        0,
        "no action forms for a viewer"
    );
    assert_eq!(browser.count("button[value='run-now']").await, 0);
    // Its two runs as a strip, oldest (the failure) first, styled under the page's CSP:
    // both took 2 s, the longest, so both stand at full height.
    assert_eq!(browser.count("ol.strip .cell").await, 2);
    let styled = browser
        .script(
            "var c = document.querySelectorAll('ol.strip .cell'); return [c[0].textContent, c[0].className, getComputedStyle(c[0]).height, getComputedStyle(c[0]).backgroundColor === getComputedStyle(c[1]).backgroundColor].join(' ');",
        )
        .await;
    assert_eq!(
        styled.as_str(),
        Some("F cell bad h5 40px false"),
        "{styled}"
    );
    assert!(
        browser
            .text("#run-figures")
            .await
            .contains("Last 24 hours: 2 runs, 50.0 % succeeded")
    );
    browser.click("ol.strip .cell").await;
    assert_eq!(browser.path().await, format!("/console/executions/{first}"));
    browser.open(&format!("{base}/rules/{rule}")).await;

    // Another brand's rule reads exactly as an id nobody has.
    browser.open(&format!("{base}/rules/{theirs}")).await;
    let other = browser
        .text("main")
        .await
        .replace(&theirs.to_string(), "ID");
    let unknown = Uuid::new_v4();
    browser.open(&format!("{base}/rules/{unknown}")).await;
    let none = browser
        .text("main")
        .await
        .replace(&unknown.to_string(), "ID");
    assert_eq!(other, none);
    assert!(none.contains("404"), "{none}");

    // At 375 px every page still fits, with a 60-character branch name (one word, the
    // worst case): nothing scrolls sideways but the tables' own boxes.
    sqlx::query("UPDATE branches SET name = $2 WHERE id = $1")
        .bind(system.branch)
        .bind(format!("Branch{}", "Olaya".repeat(11)))
        .execute(&system.pool)
        .await
        .expect("a long branch name");
    // Beside a long error, a long branch name and a long runner id, the history's short
    // columns keep their words whole at 1280 px:
    // no cell has more lines than words ("sched" / "ule" was two lines of one word).
    sqlx::query("UPDATE executions SET runner_id = $2 WHERE branch_rule_id = $1")
        .bind(rule)
        .bind(format!("site-{}", "riyadh-olaya-camera-host-".repeat(6)))
        .execute(&system.pool)
        .await
        .expect("a long runner id");
    browser
        .open(&format!("{base}/executions?rule={rule}"))
        .await;
    assert_eq!(browser.count("td.words").await, 4);
    let broken = browser
        .script(
            "var bad = []; document.querySelectorAll('td.words').forEach(function (td) { \
               var r = document.createRange(); r.selectNodeContents(td); \
               var lines = new Set(Array.from(r.getClientRects()).map(function (x) { return Math.round(x.top); })); \
               var words = td.textContent.trim().split(/\\s+/).length; \
               if (lines.size > words) bad.push(td.textContent.trim() + ' on ' + lines.size + ' lines'); }); \
             return bad.join(' | ');",
        )
        .await;
    assert_eq!(broken.as_str(), Some(""), "words broken mid-word: {broken}");

    browser.resize(375, 800).await;
    for page in [
        "/".to_owned(),
        "/rules".to_owned(),
        format!("/rules/{rule}"),
        "/executions".to_owned(),
        format!("/executions?branch={}", system.branch),
        format!("/executions/{first}"),
        "/runners".to_owned(),
    ] {
        browser.open(&format!("{base}{page}")).await;
        let overflow = browser
            .script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
            )
            .await;
        let wide = browser
            .script(
                "var out = []; document.querySelectorAll('body *').forEach(function (e) { var r = e.getBoundingClientRect(); if (r.right > 380 && !e.closest('.scroll')) out.push(e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(r.right)); }); return out.slice(0, 12).join(' | ');",
            )
            .await;
        assert_eq!(
            overflow.as_i64(),
            Some(0),
            "{page}: the page is no wider than the phone: {wide}"
        );
    }
    // The icon browsers ask for is there.
    let icon = reqwest::get(format!("{}/favicon.ico", base.trim_end_matches("/console")))
        .await
        .expect("an answer");
    assert_eq!(icon.status(), 200);
    assert_eq!(
        icon.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("image/svg+xml")
    );
}

/// Refuses new connections to database `name` and ends its open ones (the functions' pool
/// among them), or lets them in again: PostgreSQL going away and coming back.
async fn database_reachable(admin: &mut sqlx::PgConnection, name: &str, reachable: bool) {
    let alter = format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS {reachable}");
    sqlx::query(sqlx::AssertSqlSafe(alter))
        .execute(&mut *admin)
        .await
        .expect("alter database");
    if !reachable {
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
            .bind(name)
            .execute(&mut *admin)
            .await
            .expect("connections ended");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_page_says_it_is_stale_recovers_by_itself_and_an_ended_session_signs_in() {
    use sqlx::Connection as _;
    let system = System::start().await;
    let rule = tomorrows_rule(&system, "Queue length", 0.1).await;
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&system.pool)
        .await
        .expect("the database's name");
    let mut admin = sqlx::PgConnection::connect(&res_tests::postgres::server().url("postgres"))
        .await
        .expect("an admin connection");
    let browser = Browser::start(1280, 900).await;
    sign_in(&browser, &system, &system.operator).await;
    let base = console_url(&system);

    // The rule page refreshes every 5 s: with the database gone it says it is stale, and
    // since when; with the database back it is live again without a reload.
    browser.open(&format!("{base}/rules/{rule}")).await;
    browser.script("window.notReloaded = true;").await;
    database_reachable(&mut admin, &name, false).await;
    let stale = browser
        .wait_for_text("#stale", WAIT, |text| {
            text.starts_with("Not updated since ")
        })
        .await;
    assert!(stale.contains("503"), "{stale}");
    database_reachable(&mut admin, &name, true).await;
    browser
        .wait_for_text("main", WAIT, |text| {
            !text.is_empty() && !text.contains("Not updated since")
        })
        .await;
    assert_eq!(
        browser.script("return window.notReloaded === true").await,
        serde_json::Value::Bool(true),
        "resumed in place"
    );

    // A page first served as a 503 (the database gone) turns into the page once it is back.
    database_reachable(&mut admin, &name, false).await;
    browser.open(&format!("{base}/")).await;
    assert!(browser.text("main").await.contains("503"), "a 503 page");
    database_reachable(&mut admin, &name, true).await;
    browser
        .wait_for_text("main", WAIT, |text| {
            text.contains("Queue length") || text.contains("Branches")
        })
        .await;
    assert_eq!(browser.path().await, "/console/");

    // The key is revoked elsewhere: the open page goes to sign-in, and back here after.
    browser.open(&format!("{base}/rules/{rule}")).await;
    sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE role = 'operator'")
        .execute(&system.pool)
        .await
        .expect("revoked");
    let deadline = std::time::Instant::now() + WAIT;
    while !browser.path().await.starts_with("/console/sign-in") {
        assert!(
            std::time::Instant::now() < deadline,
            "never sent to sign-in"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        browser.path().await,
        format!("/console/sign-in?next=%2Fconsole%2Frules%2F{rule}")
    );
}

/// A rule failing at 15 branches is one group on the fleet page; opened, its form pauses all
/// 15 with one reason, in a real browser.
#[tokio::test(flavor = "multi_thread")]
async fn a_rule_failing_at_fifteen_branches_is_one_group_paused_at_once_in_a_real_browser() {
    let system = System::start().await;
    let brand: Uuid = sqlx::query_scalar("SELECT brand_id FROM branches WHERE id = $1")
        .bind(system.branch)
        .fetch_one(&system.pool)
        .await
        .expect("the brand");
    let failing = Seed::new(&system.pool)
        .failing_rule(brand, "Camera check", 15)
        .await;
    let key = functions_cli(
        system.database_url(),
        &[
            "create-api-key",
            "--name",
            "bob",
            "--role",
            "operator",
            "--brand",
            &brand.to_string(),
        ],
    );
    let browser = Browser::start(1280, 900).await;
    sign_in(&browser, &system, &key).await;
    let attention = browser.text("#attention").await;
    assert!(
        attention
            .contains("Camera check at 15 branches of Brand: failed 3 to 4 times in a row, since "),
        "{attention}"
    );
    assert_eq!(browser.count("details.group").await, 1, "{attention}");
    // Closed at first (more than 3 branches): the branches show once it is opened (by
    // script: the driver's click helper waits for a new page).
    assert!(!attention.contains("Branch 15"), "{attention}");
    browser
        .script("document.querySelector('details.group').open = true; return true;")
        .await;
    let opened = browser.text("#attention").await;
    assert!(opened.contains("camera 15 offline"), "{opened}");
    browser.fill("#reason-1", "camera firmware update").await;
    browser
        .click("form[action='/console/fleet/group'] button")
        .await;
    let outcome = browser.text("#group-outcome").await;
    assert!(outcome.contains("Pause: 15 of 15 done."), "{outcome}");
    let paused: Vec<(Option<String>, Option<String>)> =
        sqlx::query_as("SELECT paused_by, pause_reason FROM branch_rules WHERE id = ANY($1)")
            .bind(&failing)
            .fetch_all(&system.pool)
            .await
            .expect("the rules");
    assert_eq!(
        paused,
        vec![
            (
                Some("bob".to_owned()),
                Some("camera firmware update".to_owned())
            );
            15
        ]
    );
}
