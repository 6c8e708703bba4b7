//! The demo's configuration, applied as a brand admin would: `resctl apply -f` of the
//! documents in infra/local/demo/ (the catalogue, then the brand), through the running
//! functions. Nothing is written with SQL.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use sqlx::PgPool;
use uuid::Uuid;

/// The documents, applied in this order.
pub const DOCUMENTS: [&str; 2] = [
    "infra/local/demo/catalogue.yaml",
    "infra/local/demo/brand.yaml",
];

/// What the documents made.
pub struct Configured {
    /// Branch ids.
    pub branches: Vec<Uuid>,
    /// Branch rule ids with their branch and rule names.
    pub rules: Vec<(Uuid, String)>,
}

/// Applies each document with `resctl` (a platform-wide admin `token`), printing what
/// `resctl` says about each.
pub fn apply(resctl: &Path, root: &Path, url: &str, token: &str) -> anyhow::Result<()> {
    for document in DOCUMENTS {
        let output = Command::new(resctl)
            .current_dir(root)
            .args(["apply", "-f", document, "-m", "cargo xtask demo"])
            .env("RES_URL", url)
            .env("RES_TOKEN", token)
            .env_remove("RESCTL_CONFIG")
            .output()
            .context("cannot run resctl")?;
        if !output.status.success() {
            bail!(
                "resctl apply -f {document} failed:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let said = String::from_utf8_lossy(&output.stdout);
        let last = said
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        println!("  resctl apply -f {document}: {last}");
        let warned = String::from_utf8_lossy(&output.stderr);
        for warning in said
            .lines()
            .chain(warned.lines())
            .filter(|l| l.starts_with("warning:"))
        {
            println!("    {warning}");
        }
    }
    Ok(())
}

/// The branches and branch rules the documents made (read back for the runner's key and
/// the listing).
pub async fn read(pool: &PgPool) -> anyhow::Result<Configured> {
    let branches: Vec<Uuid> = sqlx::query_scalar(
        "SELECT b.id FROM branches b JOIN brands d ON d.id = b.brand_id \
         WHERE d.name = 'Demo Retail' ORDER BY b.name DESC",
    )
    .fetch_all(pool)
    .await
    .context("branches")?;
    let rules: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT x.id, b.name || ' / ' || r.name FROM branch_rules x \
         JOIN branches b ON b.id = x.branch_id JOIN rules r ON r.id = x.rule_id \
         WHERE b.id = ANY($1) ORDER BY b.name DESC, r.name",
    )
    .bind(&branches)
    .fetch_all(pool)
    .await
    .context("branch rules")?;
    if rules.is_empty() {
        bail!("the demo documents made no branch rules");
    }
    Ok(Configured { branches, rules })
}
