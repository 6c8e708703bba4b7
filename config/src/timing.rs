//! Opening hours and rule timing as a brand document writes them, turned into what
//! res-shared reads (and the functions store): each branch's hours with its calendars
//! resolved, each branch rule's timing over its brand rule's. Validation, diff, apply and
//! export all go through here, so they read a document alike.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use res_shared::schedule::{
    CatchUp, DaySpec, HoursSpec, MAX_OFFSET_SECONDS, TimingSpec, WhileOpen, duration_text,
    parse_duration,
};
use serde::{Deserialize, Serialize};

use crate::document::{Branch, BranchRule, Brand, BrandRule, CatchUpDoc, DayDoc, WhileOpenDoc};

/// What is wrong, and where below the object that was read (`valid_from`,
/// `calendars.ramadan[2].until`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingProblem {
    /// The place, relative to the object.
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

fn problem(field: impl Into<String>, reason: impl Into<String>) -> TimingProblem {
    TimingProblem {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The brand's hours as stored in `brands.hours`: as the document writes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BrandHoursDoc {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub week: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calendars: BTreeMap<String, Vec<DayDoc>>,
}

/// A branch's hours as stored in `branches.hours`: as the document writes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BranchHoursDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub week: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calendars: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DayDoc>,
}

impl BrandHoursDoc {
    /// The brand's, or none when it gives no hours.
    pub fn of(brand: &Brand) -> Option<BrandHoursDoc> {
        let doc = BrandHoursDoc {
            week: brand.hours.clone(),
            calendars: brand.calendars.clone(),
        };
        (doc != BrandHoursDoc::default()).then_some(doc)
    }

    /// Puts stored hours back into the brand.
    pub fn restore(self, brand: &mut Brand) {
        brand.hours = self.week;
        brand.calendars = self.calendars;
    }
}

impl BranchHoursDoc {
    /// The branch's, or none when it gives no hours of its own.
    pub fn of(branch: &Branch) -> Option<BranchHoursDoc> {
        let doc = BranchHoursDoc {
            week: branch.hours.clone(),
            calendars: branch.calendars.clone(),
            days: branch.days.clone(),
        };
        (doc != BranchHoursDoc::default()).then_some(doc)
    }

    /// Puts stored hours back into the branch.
    pub fn restore(self, branch: &mut Branch) {
        branch.hours = self.week;
        branch.calendars = self.calendars;
        branch.days = self.days;
    }
}

/// `YYYY-MM-DD`.
pub fn parse_date(field: &str, text: &str) -> Result<NaiveDate, TimingProblem> {
    NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").map_err(|_| {
        problem(
            field,
            format!("'{text}' is not a date (write YYYY-MM-DD, e.g. 2026-09-23)"),
        )
    })
}

/// A special day of the document as res-shared reads it; `calendar` names where it came from.
pub fn day_spec(
    field: &str,
    day: &DayDoc,
    calendar: Option<&str>,
) -> Result<DaySpec, TimingProblem> {
    Ok(DaySpec {
        date: parse_date(&format!("{field}.date"), &day.date)?,
        until: day
            .until
            .as_deref()
            .map(|u| parse_date(&format!("{field}.until"), u))
            .transpose()?,
        name: day.name.clone(),
        calendar: calendar.map(str::to_owned),
        hours: day.hours.clone(),
    })
}

/// The brand's calendars as res-shared reads them (and a plan sends them, once per brand).
pub fn brand_calendars(brand: &Brand) -> Result<BTreeMap<String, Vec<DaySpec>>, TimingProblem> {
    brand
        .calendars
        .iter()
        .map(|(name, days)| {
            let days = days
                .iter()
                .enumerate()
                .map(|(i, day)| day_spec(&format!("calendars.{name}[{i}]"), day, None))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((name.clone(), days))
        })
        .collect()
}

/// A branch's opening hours as a plan sends them: its own week or the brand's, its own
/// days, and the names of the brand calendars it keeps (each sent once, with its brand).
/// `None` when it has neither a week nor special days.
pub fn branch_plan_hours(
    brand: &Brand,
    branch: &Branch,
) -> Result<Option<HoursSpec>, TimingProblem> {
    let days = branch
        .days
        .iter()
        .enumerate()
        .map(|(i, day)| day_spec(&format!("days[{i}]"), day, None))
        .collect::<Result<Vec<_>, _>>()?;
    for (c, name) in branch.calendars.iter().enumerate() {
        if !brand.calendars.contains_key(name) {
            return Err(problem(
                format!("calendars[{c}]"),
                format!("the brand has no calendar called '{name}'"),
            ));
        }
    }
    let spec = HoursSpec {
        week: branch.hours.clone().unwrap_or_else(|| brand.hours.clone()),
        days,
        calendars: branch.calendars.clone(),
    };
    Ok((!spec.is_empty()).then_some(spec))
}

/// A branch's opening hours with its calendars resolved (res-shared's
/// [`HoursSpec::resolved`], as a runner resolves them from its plan): what the functions'
/// schedules read. `None` when it has neither a week nor special days.
pub fn branch_hours(brand: &Brand, branch: &Branch) -> Result<Option<HoursSpec>, TimingProblem> {
    let Some(spec) = branch_plan_hours(brand, branch)? else {
        return Ok(None);
    };
    Ok(Some(spec.resolved(&brand_calendars(brand)?)))
}

/// A duration such as `30m`; `0s` (or `0m`) is none.
fn offset(field: &str, text: &str) -> Result<u32, TimingProblem> {
    let zero = text.trim().trim_end_matches(['h', 'm', 's']);
    if !zero.is_empty() && zero.bytes().all(|b| b == b'0') {
        return Ok(0);
    }
    parse_duration(text.trim())
        .ok()
        .and_then(|s| u32::try_from(s).ok())
        .ok_or_else(|| {
            problem(
                field,
                format!("'{text}' is not a duration such as 30m, 1h or 1h30m"),
            )
        })
}

/// A `while_open` offset: a duration of at most 12 h.
fn widening(field: &str, text: &str) -> Result<u32, TimingProblem> {
    let seconds = offset(field, text)?;
    if seconds > MAX_OFFSET_SECONDS {
        return Err(problem(
            field,
            format!("'{text}' is more than 12h, the widest a window may open around the hours"),
        ));
    }
    Ok(seconds)
}

fn catch_up(field: &str, doc: &CatchUpDoc) -> Result<CatchUp, TimingProblem> {
    match (doc.policy.as_str(), doc.max_age.as_deref()) {
        ("skip", None) => Ok(CatchUp::Skip),
        ("skip", Some(_)) => Err(problem(
            format!("{field}.max_age"),
            "is for policy once only (skip makes no missed run at all)",
        )),
        ("once", Some(age)) => Ok(CatchUp::Once {
            max_age_seconds: offset(&format!("{field}.max_age"), age)?,
        }),
        ("once", None) => Err(problem(
            format!("{field}.max_age"),
            "is needed with policy once: how old may the latest missed time be (e.g. 2h)",
        )),
        (other, _) => Err(problem(
            format!("{field}.policy"),
            format!("must be skip or once, not '{other}'"),
        )),
    }
}

fn dates(
    from: Option<&str>,
    until: Option<&str>,
) -> Result<(Option<NaiveDate>, Option<NaiveDate>), TimingProblem> {
    Ok((
        from.map(|t| parse_date("valid_from", t)).transpose()?,
        until.map(|t| parse_date("valid_until", t)).transpose()?,
    ))
}

/// What a brand rule stores in `brand_rules.timing`: its dates and catch-up.
pub fn brand_rule_timing(rule: &BrandRule) -> Result<TimingSpec, TimingProblem> {
    let (valid_from, valid_until) = dates(rule.valid_from.as_deref(), rule.valid_until.as_deref())?;
    Ok(TimingSpec {
        valid_from,
        valid_until,
        catch_up: rule
            .catch_up
            .as_ref()
            .map(|c| catch_up("catch_up", c))
            .transpose()?,
        ..TimingSpec::default()
    })
}

/// What a branch rule stores in `branch_rules.timing`: its own keys only (its brand rule's
/// apply where it gives none).
pub fn branch_rule_timing(rule: &BranchRule) -> Result<TimingSpec, TimingProblem> {
    let (valid_from, valid_until) = dates(rule.valid_from.as_deref(), rule.valid_until.as_deref())?;
    let while_open = rule
        .while_open
        .as_ref()
        .map(|open| -> Result<WhileOpen, TimingProblem> {
            Ok(WhileOpen {
                before_seconds: open
                    .before
                    .as_deref()
                    .map_or(Ok(0), |t| widening("while_open.before", t))?,
                after_seconds: open
                    .after
                    .as_deref()
                    .map_or(Ok(0), |t| widening("while_open.after", t))?,
            })
        })
        .transpose()?;
    Ok(TimingSpec {
        while_open,
        week: rule.week.clone(),
        valid_from,
        valid_until,
        catch_up: rule
            .catch_up
            .as_ref()
            .map(|c| catch_up("catch_up", c))
            .transpose()?,
    })
}

/// A branch rule's timing as the functions read it: its own keys over its brand rule's
/// (the `||` of the two stored objects).
pub fn effective_timing(
    brand_rule: Option<&BrandRule>,
    rule: &BranchRule,
) -> Result<TimingSpec, TimingProblem> {
    let own = branch_rule_timing(rule)?;
    let inherited = brand_rule
        .map(brand_rule_timing)
        .transpose()?
        .unwrap_or_default();
    Ok(TimingSpec {
        while_open: own.while_open.or(inherited.while_open),
        week: if own.week.is_empty() {
            inherited.week
        } else {
            own.week
        },
        valid_from: own.valid_from.or(inherited.valid_from),
        valid_until: own.valid_until.or(inherited.valid_until),
        catch_up: own.catch_up.or(inherited.catch_up),
    })
}

/// Stored timing back into a brand rule's fields.
pub fn restore_brand_rule_timing(spec: TimingSpec, rule: &mut BrandRule) {
    rule.valid_from = spec.valid_from.map(|d| d.to_string());
    rule.valid_until = spec.valid_until.map(|d| d.to_string());
    rule.catch_up = spec.catch_up.map(catch_up_doc);
}

/// Stored timing back into a branch rule's fields.
pub fn restore_branch_rule_timing(spec: TimingSpec, rule: &mut BranchRule) {
    rule.while_open = spec.while_open.map(|open| WhileOpenDoc {
        before: (open.before_seconds > 0).then(|| duration_text(open.before_seconds)),
        after: (open.after_seconds > 0).then(|| duration_text(open.after_seconds)),
    });
    rule.week = spec.week;
    rule.valid_from = spec.valid_from.map(|d| d.to_string());
    rule.valid_until = spec.valid_until.map(|d| d.to_string());
    rule.catch_up = spec.catch_up.map(catch_up_doc);
}

fn catch_up_doc(policy: CatchUp) -> CatchUpDoc {
    match policy {
        CatchUp::Skip => CatchUpDoc {
            policy: "skip".into(),
            max_age: None,
        },
        CatchUp::Once { max_age_seconds } => CatchUpDoc {
            policy: "once".into(),
            max_age: Some(duration_text(max_age_seconds)),
        },
    }
}

/// The texts as export writes them (dates zero-padded, durations as `1h30m`), so a
/// document and its export compare equal; texts that do not parse are left for validation.
pub(crate) fn normalize_brand_rule(rule: &mut BrandRule) {
    if let Ok(spec) = brand_rule_timing(rule) {
        restore_brand_rule_timing(spec, rule);
    }
}

/// [`normalize_brand_rule`] for a branch rule.
pub(crate) fn normalize_branch_rule(rule: &mut BranchRule) {
    if let Ok(spec) = branch_rule_timing(rule) {
        restore_branch_rule_timing(spec, rule);
    }
}
