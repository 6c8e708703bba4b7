//! The demo's data: one brand, two branches in different zones, eight branch rules with
//! different schedules (an overnight window, a failing camera, a degenerate schedule).

use std::path::Path;

use anyhow::Context;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

/// One demo branch rule.
struct Spec {
    branch: usize,
    name: &'static str,
    cron: &'static str,
    window: Option<(&'static str, &'static str)>,
    detector: &'static str,
}

const BRANCHES: [(&str, Option<&str>); 2] = [
    ("Riyadh Olaya", None),
    ("Berlin Mitte", Some("Europe/Berlin")),
];

const SPECS: [Spec; 8] = [
    Spec {
        branch: 0,
        name: "Queue length",
        cron: "*/20 * * * * *",
        window: None,
        detector: "queue",
    },
    Spec {
        branch: 1,
        name: "Queue length",
        cron: "*/30 * * * * *",
        window: Some(("07:00", "23:00")),
        detector: "queue",
    },
    Spec {
        branch: 0,
        name: "Empty shelves",
        cron: "0,45 * * * * *",
        window: Some(("06:00", "23:59")),
        detector: "shelf",
    },
    Spec {
        branch: 1,
        name: "Cashier idle",
        cron: "15,45 * * * * *",
        window: None,
        detector: "queue",
    },
    Spec {
        branch: 1,
        name: "Night security sweep",
        cron: "0 * * * * *",
        window: Some(("22:00", "06:00")),
        detector: "queue",
    },
    Spec {
        branch: 0,
        name: "Night security sweep",
        cron: "30 */2 * * * *",
        window: Some(("20:00", "04:00")),
        detector: "queue",
    },
    Spec {
        branch: 0,
        name: "Camera health",
        cron: "*/40 * * * * *",
        window: None,
        detector: "broken",
    },
    // 03:00 falls in the window's only gap (02:00-04:00): the functions report the rule as
    // degenerate, and it runs only when the window opens.
    Spec {
        branch: 1,
        name: "Morning stock count",
        cron: "0 3 * * *",
        window: Some(("04:00", "02:00")),
        detector: "shelf",
    },
];

/// What the demo created.
pub struct Seeded {
    /// Branch ids.
    pub branches: Vec<Uuid>,
    /// Branch rule ids with their branch and rule names.
    pub rules: Vec<(Uuid, String)>,
}

/// Loads the demo data; `detector` is the demo detector script.
pub async fn seed(pool: &PgPool, detector: &Path) -> anyhow::Result<Seeded> {
    let mut tx = pool.begin().await?;
    let brand: Uuid = sqlx::query_scalar(
        "INSERT INTO brands (name, timezone) VALUES ('Demo Retail', 'Asia/Riyadh') RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await
    .context("brand")?;
    let mut branches = Vec::new();
    for (name, timezone) in BRANCHES {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO branches (brand_id, name, timezone) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(brand)
        .bind(name)
        .bind(timezone)
        .fetch_one(&mut *tx)
        .await
        .context("branch")?;
        branches.push(id);
    }
    let violation: Uuid = sqlx::query_scalar(
        "INSERT INTO action_templates (name, kind, config) VALUES ('Record violation', 'business', '{}') RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await
    .context("violation template")?;
    let mut rules = Vec::new();
    for spec in &SPECS {
        let template: Uuid = sqlx::query_scalar(
            "INSERT INTO action_templates (name, kind, config) VALUES ($1, 'detection', $2) RETURNING id",
        )
        .bind(format!("{} detector", spec.name))
        .bind(json!({"executor": "command", "program": detector, "args": [spec.detector], "timeout_seconds": 30}))
        .fetch_one(&mut *tx)
        .await
        .context("detector template")?;
        let rule: Uuid = sqlx::query_scalar(
            "INSERT INTO rules (name, status, cron_expression) VALUES ($1, 'active', $2) RETURNING id",
        )
        .bind(spec.name)
        .bind(spec.cron)
        .fetch_one(&mut *tx)
        .await
        .context("rule")?;
        let workflow = json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": template},
                "violation": {"type": "business", "action": "create_violation", "action_template_id": violation}
            },
            "edges": [{"from": "detect", "to": "violation", "condition": "feature_result == 'detection_complete' and violations > 0"}],
            "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
        });
        sqlx::query(
            "INSERT INTO action_template_connections (rule_id, workflow_config) VALUES ($1, $2)",
        )
        .bind(rule)
        .bind(&workflow)
        .execute(&mut *tx)
        .await
        .context("workflow")?;
        let (from, to) = spec.window.unzip();
        let branch_rule: Uuid = sqlx::query_scalar(
            "INSERT INTO branch_rules (branch_id, rule_id, operation_time_from, operation_time_to) \
             VALUES ($1, $2, $3::time, $4::time) RETURNING id",
        )
        .bind(branches[spec.branch])
        .bind(rule)
        .bind(from)
        .bind(to)
        .fetch_one(&mut *tx)
        .await
        .context("branch rule")?;
        let camera = |n: u32| {
            format!(
                "{}-cam-{n}",
                BRANCHES[spec.branch].0.to_lowercase().replace(' ', "-")
            )
        };
        sqlx::query("INSERT INTO action_details (branch_rule_id, action_template_id, config) VALUES ($1, $2, $3)")
            .bind(branch_rule)
            .bind(template)
            .bind(json!({"camera_ids": [camera(1), camera(2)], "stream_urls": ["rtsp://10.0.0.21:554/stream", "rtsp://10.0.0.22:554/stream"]}))
            .execute(&mut *tx)
            .await
            .context("action detail")?;
        rules.push((
            branch_rule,
            format!("{} / {}", BRANCHES[spec.branch].0, spec.name),
        ));
    }
    tx.commit().await?;
    Ok(Seeded { branches, rules })
}
