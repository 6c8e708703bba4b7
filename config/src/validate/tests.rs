//! Validation: every problem at once, at its path, and the warnings.

use crate::{Document, Problem, parse, validate};

const CATALOGUE: &str = r#"
catalogue:
  action_templates:
    - name: Queue detector
      kind: detection
      config: {executor: http, url: "http://127.0.0.1:9100/detect", parameters: {max_queue: 5}}
    - name: Queue violation
      kind: business
      config: {kind: queue_too_long}
  rules:
    - name: Queue length
      schedule: "*/30 * * * *"
      workflow:
        start_node: detect
        nodes:
          detect: {type: detection, template: Queue detector}
          violation: {type: business, action: create_violation, template: Queue violation}
        edges:
          - {from: detect, to: violation, condition: "result['queue'] > 5"}
"#;

const BRAND: &str = r#"
brand:
  name: Acme Coffee
  zone: Asia/Riyadh
  defaults: {failure_threshold: 3, overlap_policy: skip}
  rules:
    Queue length: {jitter_seconds: 30}
  branches:
    - name: Branch 17
      rules:
        Queue length:
          window: {from: "08:00", to: "24:00"}
          actions:
            Queue detector: {cameras: [cam-1, cam-2]}
    - name: Branch 18
      zone: Europe/Berlin
      rules:
        Queue length: {window: {from: "22:00", to: "06:00"}}
"#;

fn paths(problems: &[Problem]) -> Vec<String> {
    problems
        .iter()
        .map(|p| format!("{}: {}", p.path, p.message))
        .collect()
}

fn both() -> Document {
    parse(&format!("{CATALOGUE}{BRAND}")).expect("the example parses")
}

#[test]
fn the_example_is_valid_and_warns_of_nothing() {
    let report = validate(&both(), None);
    assert_eq!(paths(&report.errors), Vec::<String>::new());
    assert_eq!(paths(&report.warnings), Vec::<String>::new());
}

#[test]
fn a_brand_alone_resolves_names_against_the_stored_catalogue() {
    let brand = parse(BRAND).expect("parses");
    let stored = both().catalogue;
    let report = validate(&brand, stored.as_ref());
    assert!(report.is_valid(), "{:?}", report.errors);
    let unchecked = validate(&brand, None);
    assert!(unchecked.is_valid());
    assert_eq!(
        paths(&unchecked.warnings),
        [
            "brand.rules: rule and template names were not checked: no catalogue to check them against"
        ]
    );
}

#[test]
fn every_problem_of_a_brand_is_listed_at_once_with_its_path() {
    let text = format!(
        "{CATALOGUE}{}",
        r#"
brand:
  name: Acme Coffee
  zone: Asia/Ryadh
  defaults: {failure_threshold: 0, overlap_policy: queue}
  rules:
    Queue length: {schedule: "*/0 * * * *", jitter_seconds: 7200}
    Queue lenght: {}
  branches:
    - name: Branch 17
      zone: Mars/Olympus
      rules:
        Queue length:
          window: {from: "08:00", to: "25:00"}
          actions:
            Door detector: {cameras: [cam-1]}
            Queue detector: [cam-1]
        Footfall: {}
    - name: branch 17
      rules: {}
"#
    );
    let report = validate(&parse(&text).expect("parses"), None);
    assert_eq!(
        paths(&report.errors),
        [
            "brand.zone: unknown time zone 'Asia/Ryadh' (expected an IANA name such as Asia/Riyadh)",
            "brand.defaults.failure_threshold: must be 1-1000 failures in a row",
            "brand.defaults.overlap_policy: overlap_policy must be skip or buffer_one, not 'queue'",
            "brand.rules[\"Queue lenght\"]: no rule called 'Queue lenght' in the catalogue",
            "brand.rules[\"Queue length\"].schedule: invalid cron '*/0 * * * *': minute step must be >= 1",
            "brand.rules[\"Queue length\"].jitter_seconds: must be 0-3600 seconds",
            "brand.branches[0].zone: unknown time zone 'Mars/Olympus' (expected an IANA name such as Asia/Riyadh)",
            "brand.branches[0].rules[\"Footfall\"]: 'Footfall' is not among the brand's rules (add it under brand.rules)",
            "brand.branches[0].rules[\"Queue length\"].actions[\"Door detector\"]: the workflow of 'Queue length' uses no template called 'Door detector' (it uses: Queue detector, Queue violation)",
            "brand.branches[0].rules[\"Queue length\"].actions[\"Queue detector\"]: must be a mapping of this branch's settings for the action",
            "brand.branches[0].rules[\"Queue length\"].window.to: '25:00' is not a time: hour must be 00-23 (24:00 is allowed as the end of the day)",
            "brand.branches[1].name: another branch is already called 'branch 17' (brand.branches[0].name)",
        ]
    );
    assert_eq!(
        paths(&report.warnings),
        ["brand.rules[\"Queue lenght\"]: runs at no branch"]
    );
}

#[test]
fn workflow_problems_come_from_the_runner_s_checker_at_document_paths() {
    let text = r#"
catalogue:
  action_templates:
    - name: Queue detector
      kind: detection
      config: {executor: http, url: "ftp://camera"}
    - name: Unused
      kind: business
      config: {}
  rules:
    - name: Queue length
      workflow:
        start_node: detect
        nodes:
          detect: {type: detection, template: Queue detector}
          alert: {type: business, action: notify, template: Queue detectr}
          wait: {type: delay, seconds: 999999999}
        edges:
          - {from: detect, to: nowhere}
          - {from: detect, to: alert, condition: "result["}
    - name: Queue length
      schedule: "0 0 30 2 *"
      workflow:
        start_node: detect
        nodes:
          detect: {type: detection, template: Queue detector}
"#;
    let report = validate(&parse(text).expect("parses"), None);
    let found = paths(&report.errors);
    let expected = [
        "catalogue.action_templates[0].config: url: 'ftp://camera' is not an http(s) URL",
        "catalogue.rules[0].workflow.nodes[\"alert\"].template: no action template called 'Queue detectr' in the catalogue",
        "catalogue.rules[0].workflow.nodes[\"wait\"].seconds: must be a whole number of seconds, at most 604800 (7 days)",
        "catalogue.rules[0].workflow.edges[0].to: unknown node 'nowhere'",
        "catalogue.rules[1].schedule: cron '0 0 30 2 *' never matches any date (e.g. 30 February) and there is no operation window to fall back on",
        "catalogue.rules[1].name: another rule is already called 'Queue length' (catalogue.rules[0].name)",
    ];
    for line in expected {
        assert!(
            found.iter().any(|f| f == line),
            "missing {line}\nin {found:#?}"
        );
    }
    assert!(
        found
            .iter()
            .any(|f| f.starts_with("catalogue.rules[0].workflow.edges[1].condition: ")),
        "{found:#?}"
    );
    // The bad template is reported once, not once per node and rule that use it.
    assert_eq!(
        found
            .iter()
            .filter(|f| f.starts_with("catalogue.action_templates[0].config"))
            .count(),
        1,
        "{found:#?}"
    );
    assert_eq!(
        paths(&report.warnings),
        ["catalogue.action_templates[1]: 'Unused' is used by no rule"]
    );
}

#[test]
fn schedules_that_cannot_fire_in_their_window_are_warned_of_not_refused() {
    let text = format!(
        "{CATALOGUE}{}",
        r#"
brand:
  name: Acme Coffee
  rules:
    Queue length: {schedule: "0 3 * * *"}
  branches:
    - name: Branch 17
      rules:
        Queue length: {window: {from: "08:00", to: "18:00"}}
    - name: Branch 18
      rules: {}
"#
    );
    let report = validate(&parse(&text).expect("parses"), None);
    assert!(report.is_valid(), "{:?}", report.errors);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert_eq!(
        report.warnings[0].path,
        "brand.branches[0].rules[\"Queue length\"]"
    );
    assert!(
        report.warnings[0]
            .message
            .starts_with("never fires in its window")
    );

    let interval = text.replace("0 3 * * *", "@every 12h");
    let report = validate(&parse(&interval).expect("parses"), None);
    assert_eq!(
        paths(&report.warnings),
        [
            "brand.branches[0].rules[\"Queue length\"]: runs every 720 minutes but its window is 600 minutes long, so once per window"
        ]
    );
}

#[test]
fn an_empty_document_says_what_it_needs() {
    let report = validate(&parse("{}").expect("parses"), None);
    assert_eq!(
        paths(&report.errors),
        ["$: a document needs a `catalogue`, a `brand`, or both"]
    );
}

#[test]
fn a_secret_limited_to_a_branch_named_without_its_id_is_its_runners() {
    let desired = parse(&format!(
        "{CATALOGUE}{}",
        BRAND.replace(
            "Queue detector: {cameras: [cam-1, cam-2]}",
            "Queue detector: {token: \"${secret:alpha-token}\"}"
        )
    ))
    .expect("parses");
    let mut stored = desired.clone();
    let alpha = uuid::Uuid::from_u128(17);
    let other = uuid::Uuid::from_u128(18);
    let (Some(brand), Some(catalogue), Some(stored_brand)) =
        (&desired.brand, &desired.catalogue, stored.brand.as_mut())
    else {
        panic!("both parts");
    };
    stored_brand.branches[0].id = Some(alpha);
    stored_brand.branches[1].id = Some(other);
    let limited = |ids: Vec<uuid::Uuid>| {
        vec![crate::KnownSecret {
            name: "alpha-token".into(),
            branch_ids: Some(ids),
        }]
    };
    let report =
        crate::check_secret_references(brand, Some(stored_brand), catalogue, &limited(vec![alpha]));
    assert_eq!(
        paths(&report.warnings),
        Vec::<String>::new(),
        "Branch 17 receives it"
    );
    let report =
        crate::check_secret_references(brand, Some(stored_brand), catalogue, &limited(vec![other]));
    assert_eq!(report.warnings.len(), 1, "{:?}", paths(&report.warnings));
    assert!(
        report.warnings[0]
            .message
            .contains("the runner of 'Branch 17' will not receive it")
    );
    // A branch not stored yet cannot be in a secret's scope.
    let report = crate::check_secret_references(brand, None, catalogue, &limited(vec![alpha]));
    assert_eq!(report.warnings.len(), 1);
}
