//! The secrets of a plan answer: for each branch rule answered, the secrets its actions
//! refer to, as its brand holds them and only where their scope covers its branch. A
//! secret that cannot be opened is left out and logged by name (the action using it then
//! fails at the site saying which secret it lacks); a plan is never refused for it.

use std::collections::{BTreeMap, BTreeSet};

use res_shared::wire::{PlanEntry, PlanLookups, PlanSecret, SecretValue};
use sqlx::PgPool;
use uuid::Uuid;

use super::Keyring;
use crate::db;

/// The secrets `workflows` refer to, opened with `keyring`.
pub(crate) async fn for_answer(
    pool: &PgPool,
    keyring: Option<&Keyring>,
    workflows: &[PlanEntry],
    lookups: &PlanLookups,
) -> Result<Vec<PlanSecret>, sqlx::Error> {
    if workflows.is_empty() || !lookups.mentions_secrets() {
        return Ok(Vec::new());
    }
    let wanted = wanted(workflows, lookups);
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let Some(keyring) = keyring else {
        tracing::error!(
            secrets = %named(wanted.keys()),
            "a plan's rules refer to secrets, but these functions hold no sealing key: none is sent"
        );
        return Ok(Vec::new());
    };
    let pairs: Vec<(Uuid, String)> = wanted.keys().cloned().collect();
    let mut secrets = Vec::new();
    for row in db::secrets::sealed(pool, &pairs).await? {
        let Some(branches) = wanted.get(&(row.brand_id, row.name.clone())) else {
            continue;
        };
        let branch_ids = match &row.branch_ids {
            None => None,
            Some(scope) => {
                let served: Vec<Uuid> = branches
                    .iter()
                    .filter(|b| scope.contains(b))
                    .copied()
                    .collect();
                if served.is_empty() {
                    continue;
                }
                Some(served)
            }
        };
        match keyring.open(row.brand_id, &row.name, &row.sealed()) {
            Ok(value) => secrets.push(PlanSecret {
                brand_id: row.brand_id,
                name: row.name,
                version: row.version,
                value: SecretValue(value),
                branch_ids,
            }),
            Err(error) => tracing::error!(
                brand_id = %row.brand_id,
                secret = %row.name,
                %error,
                "cannot open a secret for a plan: it is not sent"
            ),
        }
    }
    Ok(secrets)
}

/// The secrets left out, by brand and name (at most [`NAMED_AT_MOST`], then how many more).
fn named<'a>(secrets: impl ExactSizeIterator<Item = &'a (Uuid, String)>) -> String {
    let total = secrets.len();
    let mut text: Vec<String> = secrets
        .take(NAMED_AT_MOST)
        .map(|(brand, name)| format!("{name} (brand {brand})"))
        .collect();
    if total > NAMED_AT_MOST {
        text.push(format!("and {} more", total - NAMED_AT_MOST));
    }
    text.join(", ")
}

/// How many secrets one log line names.
const NAMED_AT_MOST: usize = 20;

/// `(brand, name)` → the answered branches whose rules refer to it.
fn wanted(
    workflows: &[PlanEntry],
    lookups: &PlanLookups,
) -> BTreeMap<(Uuid, String), BTreeSet<Uuid>> {
    let mut wanted: BTreeMap<(Uuid, String), BTreeSet<Uuid>> = BTreeMap::new();
    for (entry, names) in lookups.secret_references(workflows) {
        let Some(brand) = lookups.branches.get(&entry.branch_id).map(|b| b.brand_id) else {
            continue;
        };
        for name in names {
            wanted
                .entry((brand, name))
                .or_default()
                .insert(entry.branch_id);
        }
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secrets_left_out_are_named_up_to_twenty_then_counted() {
        let brand = Uuid::from_u128(1);
        let few: Vec<(Uuid, String)> = vec![(brand, "api-token".into()), (brand, "cam-1".into())];
        assert_eq!(
            named(few.iter()),
            format!("api-token (brand {brand}), cam-1 (brand {brand})")
        );
        let many: Vec<(Uuid, String)> = (0..23).map(|i| (brand, format!("cam-{i:02}"))).collect();
        let text = named(many.iter());
        assert!(
            text.contains("cam-19 (brand") && !text.contains("cam-20"),
            "{text}"
        );
        assert!(text.ends_with(", and 3 more"), "{text}");
    }
}
