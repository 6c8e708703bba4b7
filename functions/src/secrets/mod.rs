//! A brand's secrets: sealed at rest (`seal`), given to the sites whose rules refer to them
//! (`plan`).

pub(crate) mod plan;
pub mod seal;

pub use seal::{Keyring, SealError, Sealed};

/// What a rewrap did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rewrapped {
    pub rewrapped: u64,
    /// Given a new value (sealed under the active key) between the read and the write.
    pub skipped: u64,
}

/// Rewraps every secret's data key under `keyring`'s active key. Each row is written only
/// if it is unchanged since it was read, so a value set meanwhile is never overwritten.
pub async fn rewrap_all(pool: &sqlx::PgPool, keyring: &Keyring) -> anyhow::Result<Rewrapped> {
    let mut done = Rewrapped::default();
    for row in crate::db::secrets::not_under(pool, keyring.active_id()).await? {
        let sealed = keyring
            .rewrap(row.brand_id, &row.name, &row.sealed())
            .map_err(|e| anyhow::anyhow!("secret '{}' of brand {}: {e}", row.name, row.brand_id))?;
        if crate::db::secrets::rewrapped(pool, &row, &sealed).await? {
            done.rewrapped += 1;
        } else {
            done.skipped += 1;
        }
    }
    Ok(done)
}
