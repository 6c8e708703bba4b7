//! `cargo xtask screenshots`: every console page of the running demo, photographed by a
//! real headless Chromium at desktop width and at 375 px, for docs/console.md.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use res_tests::browser::Browser;
use sqlx::PgPool;
use uuid::Uuid;

const DESKTOP: (u32, u32) = (1280, 1400);
const PHONE: (u32, u32) = (375, 1400);

/// Waits for the demo to have some history, then photographs each page.
pub async fn take(pool: &PgPool, console: &str, key: &str, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    println!("letting the demo run for 40 s so the pages have something to show …");
    tokio::time::sleep(Duration::from_secs(40)).await;
    // The failing camera's latest run has an error and a retry; the rule page shows its rule.
    let (execution, rule): (Uuid, Uuid) = sqlx::query_as(
        "SELECT id, branch_rule_id FROM executions \
         ORDER BY (status = 'failed') DESC, scheduled_at DESC LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .context("the demo ran nothing in 40 s")?;
    stage_a_failing_group(pool).await?;
    let pages = [
        ("fleet", String::new()),
        ("rules", "rules".to_owned()),
        ("rule", format!("rules/{rule}")),
        ("execution", format!("executions/{execution}")),
        ("history", "executions".to_owned()),
        ("runners", "runners".to_owned()),
    ];
    let browser = Browser::start(DESKTOP.0, DESKTOP.1).await;
    browser.open(console).await;
    browser.fill("#key", key).await;
    browser
        .click("form[action='/console/sign-in'] button")
        .await;
    for ((width, height), size) in [(DESKTOP, "desktop"), (PHONE, "375")] {
        browser.resize(width, height).await;
        for (name, path) in &pages {
            browser.open(&format!("{console}{path}")).await;
            let file = dir.join(format!("{name}-{size}.png"));
            browser.screenshot(&file).await;
            println!("  {}", file.display());
        }
    }
    Ok(())
}

/// The demo's detectors rarely fail three times in a row, so the fleet page would show no
/// group: "Queue length" is marked as failing at both branches, as the runner's reports
/// would mark it, so the pictures show a group with its form and reasons.
async fn stage_a_failing_group(pool: &PgPool) -> anyhow::Result<()> {
    let staged = sqlx::query(
        "UPDATE branch_rules br SET consecutive_failures = 3, \
             needs_attention_at = now() - interval '25 minutes', \
             needs_attention_reason = 'failed 3 times in a row (last: camera ' || \
                 lower(replace(b.name, ' ', '-')) || '-cam-2 did not answer)' \
         FROM branches b, rules r \
         WHERE b.id = br.branch_id AND r.id = br.rule_id AND r.name = 'Queue length'",
    )
    .execute(pool)
    .await
    .context("staging a failing group")?;
    anyhow::ensure!(
        staged.rows_affected() >= 2,
        "the demo has no 'Queue length' at two branches"
    );
    Ok(())
}
