//! RES configuration as documents a person edits: the catalogue (action templates and
//! rules) and a brand (branches, the rules it uses, which run where), in YAML or JSON.
//!
//! Pure: [`parse`] reads a document within fixed budgets, [`validate`] checks it with the
//! code that will run it (schedules and windows by `res-shared`, workflows by
//! `res-workflow`) and lists every problem at once with its path in the document, plus
//! warnings that do not refuse. No I/O: the functions and `resctl` are the shells.

mod diff;
mod document;
pub mod generate;
mod names;
mod outline;
mod parse;
mod path;
mod print;
mod stored;
mod timing;
mod validate;

pub use diff::{
    Archived, Change, ChangeAction, Diff, FieldChange, RunPreview, brand_ids, catalogue_ids,
    changed_objects, diff, next_run_at, pair_branches, pair_rules, pair_templates,
    unknown_catalogue_ids, unknown_ids,
};
pub use document::{
    ActionTemplate, Branch, BranchRule, Brand, BrandRule, Catalogue, CatchUpDoc, DayDoc, Document,
    EdgeDoc, NodeDoc, NodeKind, Rule, RuleSettings, TemplateKind, WhileOpenDoc, Window,
    WorkflowDoc,
};
pub use names::resolve_names;
pub use outline::node_order;
pub use parse::{MAX_DOCUMENT_BYTES, MAX_OBJECTS, parse};
pub use print::to_yaml;
pub use res_workflow::Problem;
pub use stored::{stored_workflow, workflow_from_stored};
pub use timing::{
    BranchHoursDoc, BrandHoursDoc, TimingProblem, branch_hours, branch_plan_hours,
    branch_rule_timing, brand_calendars, brand_rule_timing, effective_timing,
    restore_branch_rule_timing, restore_brand_rule_timing,
};
pub use validate::{KnownSecret, Report, check_secret_references, secret_names, validate};

/// The published JSON Schema of a document (`resctl config schema`), for editors.
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Document);
    serde_json::to_value(schema).unwrap_or_default()
}
