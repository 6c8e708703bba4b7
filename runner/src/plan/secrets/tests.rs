use res_shared::wire::{PlanEntry, PlanLookups, PlanSecret, SecretValue};
use serde_json::json;
use uuid::Uuid;

use super::SiteSecrets;

struct Site {
    brand: Uuid,
    branches: [Uuid; 2],
    lookups: PlanLookups,
    /// One rule at each branch; both use the template that refers to `token`, and the
    /// first's action details refer to `cam-a`.
    entries: [PlanEntry; 2],
}

fn site() -> Site {
    let brand = Uuid::new_v4();
    let branches = [Uuid::new_v4(), Uuid::new_v4()];
    let template = Uuid::new_v4();
    let ids = [Uuid::new_v4(), Uuid::new_v4()];
    let lookups: PlanLookups = serde_json::from_value(json!({
        "branches": {
            branches[0].to_string(): {"id": branches[0], "brand_id": brand, "name": "A", "is_active": true, "timezone": null},
            branches[1].to_string(): {"id": branches[1], "brand_id": brand, "name": "B", "is_active": true, "timezone": null},
        },
        "rules": {}, "brands": {}, "brand_rules": {},
        "action_details": {
            Uuid::nil().to_string(): {"id": Uuid::nil(), "branch_rule_id": ids[0], "action_template_id": template,
                                        "config": {"stream_urls": ["rtsp://v:${secret:cam-a}@10.0.0.7/s"]}},
        },
        "action_templates": {
            template.to_string(): {"id": template, "name": "Detect", "kind": "detection",
                                   "config": {"executor": "http", "url": "http://d/",
                                              "headers": {"Authorization": "Bearer ${secret:token}"}}},
        },
    }))
    .expect("lookups");
    let entry = |id: Uuid, branch: Uuid| -> PlanEntry {
        serde_json::from_value(json!({
            "id": id, "branch_id": branch, "rule_id": Uuid::nil(), "brand_rule_id": null,
            "is_active": true, "cron_expression": "*/5 * * * *", "timezone": "UTC",
            "workflow_config": {"start_node": "d", "nodes": {"d": {"type": "detection", "action_template_id": template}}},
            "updated_at": "2026-03-02T10:00:00Z"
        }))
        .expect("an entry")
    };
    Site {
        brand,
        branches,
        entries: [entry(ids[0], branches[0]), entry(ids[1], branches[1])],
        lookups,
    }
}

fn secret(brand: Uuid, name: &str, version: i32, branches: Option<Vec<Uuid>>) -> PlanSecret {
    PlanSecret {
        brand_id: brand,
        name: name.into(),
        version,
        value: SecretValue(format!("{name}-value-v{version}")),
        branch_ids: branches,
    }
}

fn names(secrets: &SiteSecrets) -> Vec<(String, i32)> {
    secrets
        .stored()
        .into_iter()
        .map(|s| (s.name, s.version))
        .collect()
}

/// The site's secrets after a full answer of `answer`.
fn after_full_answer(site: &Site, answer: Vec<PlanSecret>) -> SiteSecrets {
    let mut secrets = SiteSecrets::default();
    secrets.take_answer(
        answer,
        true,
        site.entries.iter(),
        site.entries.iter(),
        &site.lookups,
    );
    secrets
}

#[test]
fn a_full_answer_replaces_a_delta_updates_what_its_rules_use_and_unused_ones_go() {
    let site = site();
    let all = || site.entries.iter();
    let mut secrets = after_full_answer(
        &site,
        vec![
            secret(site.brand, "token", 1, None),
            secret(site.brand, "cam-a", 1, Some(vec![site.branches[0]])),
            secret(site.brand, "stray", 1, None),
        ],
    );
    assert_eq!(names(&secrets), [("cam-a".into(), 1), ("token".into(), 1)]);
    let generation = secrets.generation();

    // A delta of the first rule: a new token, and cam-a gone (deleted in the cloud).
    secrets.take_answer(
        vec![secret(site.brand, "token", 2, None)],
        false,
        site.entries[..1].iter(),
        all(),
        &site.lookups,
    );
    assert_eq!(names(&secrets), [("token".into(), 2)]);
    assert!(secrets.generation() > generation);

    // A delta naming no rule that uses them changes nothing.
    let generation = secrets.generation();
    secrets.take_answer(Vec::new(), false, [].iter(), all(), &site.lookups);
    assert_eq!(secrets.generation(), generation);
}

#[test]
fn a_run_gets_only_the_secrets_of_its_brand_that_serve_its_branch() {
    let site = site();
    let secrets = after_full_answer(
        &site,
        vec![
            secret(site.brand, "token", 1, None),
            secret(site.brand, "cam-a", 1, Some(vec![site.branches[0]])),
        ],
    );
    let first = secrets.for_entry(&site.entries[0], &site.lookups);
    let second = secrets.for_entry(&site.entries[1], &site.lookups);
    let referring = json!(["${secret:token}", "${secret:cam-a}"]);
    assert_eq!(
        first.resolve(&referring).expect("both").into_owned(),
        json!(["token-value-v1", "cam-a-value-v1"])
    );
    assert!(second.resolve(&referring).is_err(), "cam-a is branch A's");
    assert_eq!(
        second
            .resolve(&json!("${secret:token}"))
            .expect("token")
            .into_owned(),
        json!("token-value-v1")
    );
}
