//! Diffs over the documented examples (docs/config/).

use chrono::{DateTime, Utc};

use super::*;
use crate::parse;

const CATALOGUE: &str = include_str!("../../../docs/config/catalogue.yaml");
const BRAND: &str = include_str!("../../../docs/config/brand.yaml");

fn catalogue() -> Catalogue {
    parse(CATALOGUE)
        .expect("parses")
        .catalogue
        .expect("a catalogue")
}

fn brand(edit: impl Fn(String) -> String) -> Document {
    parse(&edit(BRAND.to_owned())).expect("parses")
}

/// 08:00 in Riyadh, 06:00 in Berlin.
fn now() -> DateTime<Utc> {
    "2026-11-26T05:00:00Z".parse().expect("a time")
}

fn changed(current: &Document, desired: &Document, prune: bool) -> Diff {
    diff(current, desired, Some(&catalogue()), now(), prune)
}

#[test]
fn a_document_that_says_what_is_stored_changes_nothing() {
    let stored = brand(|b| b);
    let found = changed(&stored, &stored, false);
    assert_eq!(found, Diff::default());
    assert_eq!(
        found.to_string(),
        "No changes: the document says what is stored.\n"
    );
}

#[test]
fn a_window_change_shows_the_field_and_the_next_runs_before_and_after() {
    let stored = brand(|b| b);
    let desired = brand(|b| {
        b.replace(
            "from: \"08:00\", to: \"24:00\"",
            "from: \"09:00\", to: \"24:00\"",
        )
    });
    let found = changed(&stored, &desired, false);
    assert_eq!(found.changes.len(), 1, "{found}");
    let change = &found.changes[0];
    assert_eq!(
        (change.kind.as_str(), change.name.as_str()),
        ("branch rule", "Riyadh Olaya / Queue length")
    );
    assert_eq!(change.action, ChangeAction::Update);
    assert_eq!(
        change.fields,
        [FieldChange {
            field: "window".into(),
            before: Some("08:00-24:00".into()),
            after: Some("09:00-24:00".into()),
        }]
    );
    let runs = change.runs.as_ref().expect("a preview");
    assert_eq!(runs.zone, "Asia/Riyadh");
    assert_eq!(
        runs.before,
        [
            "Thu 2026-11-26 08:15:00",
            "Thu 2026-11-26 08:30:00",
            "Thu 2026-11-26 08:45:00",
            "each up to 30 s later (jitter)"
        ]
    );
    assert_eq!(
        runs.after[..3],
        [
            "Thu 2026-11-26 09:00:00",
            "Thu 2026-11-26 09:15:00",
            "Thu 2026-11-26 09:30:00"
        ]
    );
    assert_eq!(
        found.to_string(),
        "~ branch rule 'Riyadh Olaya / Queue length'\n    \
         window: 08:00-24:00 → 09:00-24:00\n    \
         next runs (Asia/Riyadh):\n      \
         before: Thu 2026-11-26 08:15:00, Thu 2026-11-26 08:30:00, Thu 2026-11-26 08:45:00, each up to 30 s later (jitter)\n      \
         after:  Thu 2026-11-26 09:00:00, Thu 2026-11-26 09:15:00, Thu 2026-11-26 09:30:00, each up to 30 s later (jitter)\n\
         0 to create, 1 to change, 0 to archive or delete.\n"
    );
}

#[test]
fn a_change_above_a_branch_rule_lists_each_branch_rule_it_moves() {
    let stored = brand(|b| b);
    let desired = brand(|b| b.replace("  zone: Asia/Riyadh\n", "  zone: Asia/Dubai\n"));
    let found = changed(&stored, &desired, false);
    let names: Vec<(&str, &str, bool)> = found
        .changes
        .iter()
        .map(|c| (c.kind.as_str(), c.name.as_str(), c.runs.is_some()))
        .collect();
    // Berlin Mitte keeps its own zone, so its rule does not move.
    assert_eq!(
        names,
        [
            ("brand", "Demo Retail", false),
            ("branch rule", "Riyadh Olaya / Empty shelves", true),
            ("branch rule", "Riyadh Olaya / Queue length", true),
        ]
    );
    let moved = found.changes[2].runs.as_ref().expect("a preview");
    assert_eq!(moved.zone, "Asia/Dubai");
    // Now is 08:00 in Riyadh and 09:00 in Dubai: the window keeps its hours in the new zone.
    assert_eq!(moved.before[0], "Thu 2026-11-26 08:15:00");
    assert_eq!(moved.after[0], "Thu 2026-11-26 09:15:00");

    let rescheduled = brand(|b| b.replace("\"*/15 * * * *\"", "\"0 * * * *\""));
    let found = changed(&stored, &rescheduled, false);
    let names: Vec<&str> = found.changes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Queue length",
            "Riyadh Olaya / Queue length",
            "Berlin Mitte / Queue length"
        ]
    );
    assert_eq!(found.changes[0].fields[0].field, "schedule");
}

#[test]
fn objects_left_out_are_archived_or_with_prune_deleted_and_new_ones_created() {
    let stored = brand(|b| b);
    let without_berlin = brand(|b| {
        let cut = b.find("    - name: Berlin Mitte").expect("berlin");
        b[..cut].to_owned()
    });
    // A branch is archived with its rules: one change, not one per rule.
    let found = changed(&stored, &without_berlin, false);
    assert_eq!(found.changes.len(), 1, "{found}");
    assert_eq!(
        (
            found.changes[0].kind.as_str(),
            found.changes[0].name.as_str(),
            found.changes[0].action
        ),
        ("branch", "Berlin Mitte", ChangeAction::Archive)
    );
    assert_eq!(found.counts(), (0, 0, 1));
    let pruned = changed(&stored, &without_berlin, true);
    assert_eq!(pruned.changes[0].action, ChangeAction::Delete);

    let created = changed(&without_berlin, &stored, false);
    assert_eq!(created.changes[0].action, ChangeAction::Create);
    assert_eq!(created.changes[0].name, "Berlin Mitte");
    assert_eq!(
        created.changes[0].fields[0],
        FieldChange {
            field: "name".into(),
            before: None,
            after: Some("Berlin Mitte".into())
        }
    );
    let rule = &created.changes[1];
    assert_eq!(
        (rule.kind.as_str(), rule.action),
        ("branch rule", ChangeAction::Create)
    );
    let runs = rule.runs.as_ref().expect("a preview");
    assert!(runs.before.is_empty());
    assert_eq!(runs.zone, "Europe/Berlin");
    assert_eq!(runs.after[0], "Thu 2026-11-26 07:00:00");
}

#[test]
fn an_object_with_an_id_is_renamed_not_replaced() {
    let id = "5b0c6a5e-2f7e-4a39-9d2a-8d1f4c1c0a11";
    let stored = brand(|b| {
        b.replace(
            "    - name: Berlin Mitte\n",
            &format!("    - name: Berlin Mitte\n      id: {id}\n"),
        )
    });
    let renamed = brand(|b| {
        b.replace(
            "    - name: Berlin Mitte\n",
            &format!("    - name: Berlin Alexanderplatz\n      id: {id}\n"),
        )
    });
    let found = changed(&stored, &renamed, false);
    assert_eq!(found.changes[0].action, ChangeAction::Update, "{found}");
    assert_eq!(
        found.changes[0].fields,
        [FieldChange {
            field: "name".into(),
            before: Some("Berlin Mitte".into()),
            after: Some("Berlin Alexanderplatz".into()),
        }]
    );
    assert!(
        found
            .changes
            .iter()
            .all(|c| c.action != ChangeAction::Archive),
        "{found}"
    );
}

#[test]
fn catalogue_changes_are_per_template_and_rule() {
    let stored = parse(CATALOGUE).expect("parses");
    let desired = parse(&CATALOGUE.replace("max_attempts: 3", "max_attempts: 5")).expect("parses");
    let found = diff(&stored, &desired, None, now(), false);
    assert_eq!(found.changes.len(), 1, "{found}");
    assert_eq!(
        (
            found.changes[0].kind.as_str(),
            found.changes[0].name.as_str()
        ),
        ("action template", "Tell the manager")
    );
    let field = &found.changes[0].fields[0];
    assert_eq!(field.field, "config");
    assert!(
        field
            .before
            .as_deref()
            .is_some_and(|b| b.contains("\"max_attempts\":3"))
    );
    assert!(
        field
            .after
            .as_deref()
            .is_some_and(|a| a.contains("\"max_attempts\":5"))
    );

    let brand_only = brand(|b| b);
    let untouched = diff(&stored, &brand_only, Some(&catalogue()), now(), false);
    assert!(
        untouched
            .changes
            .iter()
            .all(|c| c.kind != "rule" && c.kind != "action template"),
        "a brand document leaves the catalogue alone"
    );
}

#[test]
fn a_document_is_compared_as_it_will_be_stored() {
    let stored = brand(|b| b);
    let mut loose = brand(|b| {
        b.replace(
            "from: \"08:00\", to: \"24:00\"",
            "from: \"8:00\", to: \"24:00:00\"",
        )
        .replace(
            "from: \"06:00\", to: \"23:00\"",
            "from: \"06:00:00\", to: \"23:00\"",
        )
    });
    loose.normalize();
    let mut stored_normal = stored.clone();
    stored_normal.normalize();
    // The defaults move into the rules on both sides; the times read alike.
    assert_eq!(changed(&stored_normal, &loose, false), Diff::default());
    let rules = &loose.brand.as_ref().expect("brand").rules;
    assert_eq!(rules["Empty shelves"].failure_threshold, Some(3));
    assert_eq!(
        rules["Queue length"].overlap_policy.as_deref(),
        Some("skip")
    );
}

#[test]
fn ids_must_be_the_brand_s_own_and_each_names_one_object() {
    let id = uuid::Uuid::new_v4();
    let with_ids = brand(|b| {
        b.replace(
            "    - name: Berlin Mitte\n",
            &format!("    - name: Berlin Mitte\n      id: {id}\n"),
        )
    });
    let current = with_ids.brand.as_ref().expect("brand");
    assert!(crate::unknown_ids(current, current, &Archived::default()).is_empty());
    let twice = brand(|b| {
        b.replace(
            "    - name: Berlin Mitte\n",
            &format!("    - name: Berlin Mitte\n      id: {id}\n"),
        )
        .replace(
            "    - name: Riyadh Olaya\n",
            &format!("    - name: Riyadh Olaya\n      id: {id}\n"),
        )
    });
    let problems = crate::unknown_ids(
        current,
        twice.brand.as_ref().expect("brand"),
        &Archived::default(),
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].path, "brand.branches[1].id");
    assert!(problems[0].message.contains("another object"));
    let stranger = brand(|b| {
        b.replace(
            "    - name: Berlin Mitte\n",
            &format!(
                "    - name: Berlin Mitte\n      id: {}\n",
                uuid::Uuid::new_v4()
            ),
        )
    });
    let problems = crate::unknown_ids(
        current,
        stranger.brand.as_ref().expect("brand"),
        &Archived::default(),
    );
    assert_eq!(problems[0].path, "brand.branches[1].id");
    assert!(
        problems[0]
            .message
            .contains("is not the id of one of this brand's branches")
    );
}

/// The documented brand with an id for every branch and branch rule.
fn with_ids() -> Document {
    let mut document = brand(|b| b);
    if let Some(brand) = document.brand.as_mut() {
        for branch in &mut brand.branches {
            branch.id = Some(uuid::Uuid::new_v4());
            for rule in branch.rules.values_mut() {
                rule.id = Some(uuid::Uuid::new_v4());
            }
        }
    }
    document
}

#[test]
fn an_archived_branch_named_by_its_id_is_restored_with_its_rules_where_they_were() {
    let before = with_ids();
    let brand = before.brand.as_ref().expect("brand");
    let mitte = brand.branches[1].clone();
    let mut after = before.clone();
    if let Some(b) = after.brand.as_mut() {
        b.branches.truncate(1);
    }
    // Berlin Mitte was archived: the stored brand no longer has it.
    let stored = after.brand.as_ref().expect("brand");
    let archived = Archived {
        branches: [mitte.id.expect("id")].into(),
        branch_rules: mitte
            .rules
            .iter()
            .map(|(name, r)| (r.id.expect("id"), (mitte.id.expect("id"), name.clone())))
            .collect(),
        ..Archived::default()
    };
    assert!(
        crate::unknown_ids(stored, brand, &Archived::default())
            .iter()
            .all(|p| p.message.contains("is not the id of one of this brand's")),
        "without the archive, its ids are unknown ones"
    );
    assert_eq!(crate::unknown_ids(stored, brand, &archived), []);
    let mut found = changed(&after, &before, false);
    found.mark_restored(&before, &archived);
    let restored: Vec<(&str, &str)> = found
        .changes
        .iter()
        .filter(|c| c.restored)
        .map(|c| (c.kind.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        restored,
        [
            ("branch", "Berlin Mitte"),
            ("branch rule", "Berlin Mitte / Queue length")
        ]
    );
    let text = found.to_string();
    assert!(
        text.contains("+ branch 'Berlin Mitte' (restored: back under its id, with its history)")
            && text.contains("2 to create (2 restored), 0 to change"),
        "{text}"
    );

    // A branch rule comes back only at its own branch, under its own rule, and not beside
    // the one that runs there now.
    let olaya_rule = brand.branches[0].rules["Queue length"].id.expect("id");
    let mut elsewhere = before.clone();
    if let Some(b) = elsewhere.brand.as_mut() {
        let id = b.branches[1].rules["Queue length"].id;
        b.branches[0]
            .rules
            .get_mut("Queue length")
            .expect("rule")
            .id = id;
        b.branches[1]
            .rules
            .get_mut("Queue length")
            .expect("rule")
            .id = None;
    }
    let problems = crate::unknown_ids(stored, elsewhere.brand.as_ref().expect("brand"), &archived);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0].path,
        "brand.branches[0].rules[\"Queue length\"].id"
    );
    assert!(
        problems[0].message.contains("another branch"),
        "{problems:?}"
    );
    let beside = Archived {
        branch_rules: [(
            uuid::Uuid::new_v4(),
            (brand.branches[0].id.expect("id"), "Queue length".to_owned()),
        )]
        .into(),
        ..Archived::default()
    };
    let mut doubled = after.clone();
    if let Some(b) = doubled.brand.as_mut() {
        let archived_id = beside.branch_rules.keys().next().copied();
        b.branches[0]
            .rules
            .get_mut("Queue length")
            .expect("rule")
            .id = archived_id;
    }
    let problems = crate::unknown_ids(stored, doubled.brand.as_ref().expect("brand"), &beside);
    assert!(
        problems.len() == 1
            && problems[0]
                .message
                .contains(&format!("runs at this branch as {olaya_rule} now")),
        "{problems:?}"
    );
}

#[test]
fn an_id_pairs_only_with_its_own_object_or_one_without_an_id() {
    let before = with_ids();
    let mut after = before.clone();
    if let Some(b) = after.brand.as_mut() {
        // Another object of the same name: not the stored one.
        b.branches[1].id = Some(uuid::Uuid::new_v4());
    }
    let found = changed(&before, &after, false);
    let actions: Vec<(&str, ChangeAction)> = found
        .changes
        .iter()
        .filter(|c| c.kind == "branch")
        .map(|c| (c.name.as_str(), c.action))
        .collect();
    assert_eq!(
        actions,
        [
            ("Berlin Mitte", ChangeAction::Create),
            ("Berlin Mitte", ChangeAction::Archive)
        ]
    );
    let mut unnamed = before.clone();
    if let Some(b) = unnamed.brand.as_mut() {
        b.branches[1].id = None;
    }
    assert_eq!(changed(&before, &unnamed, false), Diff::default());
}

#[test]
fn a_document_without_ids_moves_no_jittered_rule_it_leaves_as_it_is() {
    let mut stored = brand(|b| b);
    let id = uuid::Uuid::new_v4();
    if let Some(brand) = stored.brand.as_mut() {
        for rule in brand.branches.iter_mut().flat_map(|b| b.rules.values_mut()) {
            rule.id = Some(id);
            rule.jitter_seconds = Some(30);
        }
    }
    let mut without_ids = stored.clone();
    if let Some(brand) = without_ids.brand.as_mut() {
        for rule in brand.branches.iter_mut().flat_map(|b| b.rules.values_mut()) {
            rule.id = None;
        }
    }
    let found = changed(&stored, &without_ids, false);
    assert!(found.changes.is_empty(), "{found}");
}

#[test]
fn a_brand_wide_change_previews_every_branch_rule_in_document_order() {
    // 2,000 moved branch rules: enough for the previews to be computed on every core.
    let catalogue = parse(&crate::generate::catalogue_text(20))
        .expect("catalogue")
        .catalogue;
    let before =
        parse(&crate::generate::brand_text("Wide", "Asia/Riyadh", 100, 20)).expect("brand");
    let mut after = before.clone();
    if let Some(brand) = after.brand.as_mut() {
        brand.zone = "Asia/Dubai".into();
    }
    let found = diff(&before, &after, catalogue.as_ref(), now(), false);
    let previewed: Vec<&str> = found
        .changes
        .iter()
        .filter(|c| c.runs.is_some())
        .map(|c| c.name.as_str())
        .collect();
    let expected: Vec<String> = after
        .brand
        .iter()
        .flat_map(|b| &b.branches)
        .flat_map(|branch| {
            branch
                .rules
                .keys()
                .map(move |rule| format!("{} / {rule}", branch.name))
        })
        .collect();
    assert_eq!(previewed, expected);
    assert!(
        found
            .changes
            .iter()
            .filter_map(|c| c.runs.as_ref())
            .all(|r| r.zone == "Asia/Dubai" && r.before != r.after)
    );
}
