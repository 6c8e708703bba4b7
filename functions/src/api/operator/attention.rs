//! What needs someone, grouped: one line per brand rule and reason with its branches and
//! since when, instead of one line per branch (a rule failing at 15 branches is one group
//! of 15). Plain functions over the overview's rules.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use res_shared::schedule::failures_in_words;
use res_shared::wire::{AttentionGroup, AttentionKind, RuleCondition, RuleSummary};
use uuid::Uuid;

/// One branch rule that needs attention or is overdue, with what grouping reads.
#[derive(Debug, Clone)]
pub(crate) struct Flagged {
    pub(crate) rule: RuleSummary,
    /// The brand rule it copies.
    pub(crate) rule_id: Uuid,
    /// When it was flagged as needing attention.
    pub(crate) flagged_at: Option<DateTime<Utc>>,
    /// Failures in a row, when they are why it needs attention.
    pub(crate) failing: Option<u32>,
}

/// The reason a group shares: every failing branch alike whatever its count and last
/// error; any other flag by its words; overdue alike whatever its runners' silence.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Reason {
    Failing,
    Said(String),
    Overdue,
}

impl Flagged {
    fn reason(&self) -> Reason {
        match (
            self.rule.condition,
            self.failing,
            &self.rule.needs_attention,
        ) {
            (RuleCondition::NeedsAttention, Some(_), _) => Reason::Failing,
            (RuleCondition::NeedsAttention, None, Some(words)) => Reason::Said(words.clone()),
            (RuleCondition::NeedsAttention, None, None) => Reason::Said("needs attention".into()),
            _ => Reason::Overdue,
        }
    }

    /// When its trouble began: flagged, or (overdue) due.
    fn since(&self) -> Option<DateTime<Utc>> {
        match self.rule.condition {
            RuleCondition::NeedsAttention => self.flagged_at,
            _ => self.rule.next_run_time,
        }
    }
}

/// Groups by brand rule, reason and whether acknowledged: flagged groups first, then
/// overdue ones, then acknowledged ones, each by the most branches, then by rule and brand
/// name; branches by name within a group.
pub(crate) fn group(flagged: Vec<Flagged>) -> Vec<AttentionGroup> {
    let mut groups: BTreeMap<(Uuid, bool, Reason), Vec<Flagged>> = BTreeMap::new();
    for item in flagged {
        let acknowledged = item.rule.acknowledged.is_some();
        groups
            .entry((item.rule_id, acknowledged, item.reason()))
            .or_default()
            .push(item);
    }
    let mut out: Vec<AttentionGroup> = groups
        .into_iter()
        .filter_map(|((rule_id, _, reason), mut items)| {
            items.sort_by(|a, b| {
                (&a.rule.branch_name, a.rule.branch_rule_id)
                    .cmp(&(&b.rule.branch_name, b.rule.branch_rule_id))
            });
            let first = items.first()?.rule.clone();
            let since = items.iter().filter_map(Flagged::since).min();
            let acknowledged = items
                .iter()
                .filter_map(|i| i.rule.acknowledged.clone())
                .max_by_key(|ack| ack.at);
            let (kind, words) = match reason {
                Reason::Failing => (
                    AttentionKind::NeedsAttention,
                    failing_words(items.iter().filter_map(|i| i.failing)),
                ),
                Reason::Said(words) => (AttentionKind::NeedsAttention, words),
                Reason::Overdue => (
                    AttentionKind::Overdue,
                    "overdue: due more than 5 minutes ago and no runner takes it".to_owned(),
                ),
            };
            Some(AttentionGroup {
                rule_id,
                rule_name: first.rule_name,
                brand_id: first.brand_id,
                brand_name: first.brand_name,
                kind,
                reason: words,
                since,
                branches: items.into_iter().map(|i| i.rule).collect(),
                acknowledged,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (
            a.acknowledged.is_some(),
            a.kind,
            std::cmp::Reverse(a.branches.len()),
            &a.rule_name,
            &a.brand_name,
        )
            .cmp(&(
                b.acknowledged.is_some(),
                b.kind,
                std::cmp::Reverse(b.branches.len()),
                &b.rule_name,
                &b.brand_name,
            ))
    });
    out
}

/// "failed 3 times in a row", or "failed 3 to 7 times in a row" when the branches differ.
fn failing_words(counts: impl Iterator<Item = u32>) -> String {
    let (low, high) = counts.fold((u32::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    if low >= high {
        failures_in_words(high)
    } else {
        format!("failed {low} to {high} times in a row")
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + TimeDelta::minutes(minutes)
    }

    fn rule(branch: &str, condition: RuleCondition, reason: Option<&str>) -> RuleSummary {
        RuleSummary {
            branch_rule_id: Uuid::new_v4(),
            rule_name: "Queue length".into(),
            branch_id: Uuid::new_v4(),
            branch_name: branch.into(),
            brand_id: Uuid::nil(),
            brand_name: "Acme".into(),
            condition,
            cron_expression: None,
            timezone: "UTC".into(),
            next_run_time: Some(at(5)),
            overdue: condition != RuleCondition::NeedsAttention,
            overdue_cause: None,
            needs_attention: reason.map(str::to_owned),
            last_status: None,
            last_run_at: None,
            acknowledged: None,
        }
    }

    fn failing(rule_id: Uuid, branch: &str, failures: u32, flagged: i64) -> Flagged {
        let words = format!("failed {failures} times in a row (last: camera {branch} offline)");
        Flagged {
            rule: rule(branch, RuleCondition::NeedsAttention, Some(&words)),
            rule_id,
            flagged_at: Some(at(flagged)),
            failing: Some(failures),
        }
    }

    #[test]
    fn a_rule_failing_at_fifteen_branches_is_one_group_of_fifteen_since_the_first() {
        let queue = Uuid::from_u128(1);
        let items = (0..15)
            .map(|n| {
                failing(
                    queue,
                    &format!("Branch {n:02}"),
                    3 + n % 3,
                    100 - i64::from(n),
                )
            })
            .collect();
        let groups = group(items);
        assert_eq!(groups.len(), 1);
        let g = &groups[0];
        assert_eq!((g.rule_id, g.kind), (queue, AttentionKind::NeedsAttention));
        assert_eq!(g.branches.len(), 15);
        assert_eq!(g.reason, "failed 3 to 5 times in a row");
        assert_eq!(g.since, Some(at(86)));
        assert_eq!(g.branches[0].branch_name, "Branch 00");
        assert_eq!(
            g.headline(),
            "Queue length at 15 branches of Acme: failed 3 to 5 times in a row"
        );
        // Each branch keeps its own words.
        assert!(
            g.branches[14]
                .needs_attention
                .as_deref()
                .is_some_and(|w| w.contains("Branch 14"))
        );
    }

    #[test]
    fn rules_and_reasons_part_groups_and_flagged_ones_come_before_overdue_ones() {
        let (queue, door) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let schedule = "its schedule has no run time left";
        let overdue = |rule_id, branch| Flagged {
            rule: rule(branch, RuleCondition::Idle, None),
            rule_id,
            flagged_at: None,
            failing: None,
        };
        let said = Flagged {
            rule: rule("North", RuleCondition::NeedsAttention, Some(schedule)),
            rule_id: queue,
            flagged_at: Some(at(1)),
            failing: None,
        };
        let groups = group(vec![
            overdue(door, "North"),
            overdue(door, "South"),
            overdue(door, "East"),
            failing(queue, "South", 3, 2),
            said,
            failing(door, "West", 4, 3),
        ]);
        let seen: Vec<(Uuid, AttentionKind, &str, usize)> = groups
            .iter()
            .map(|g| (g.rule_id, g.kind, g.reason.as_str(), g.branches.len()))
            .collect();
        let want = "overdue: due more than 5 minutes ago and no runner takes it";
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert_eq!(seen[3], (door, AttentionKind::Overdue, want, 3));
        assert!(
            seen[..3]
                .iter()
                .all(|g| g.1 == AttentionKind::NeedsAttention && g.3 == 1)
        );
        assert!(seen.contains(&(queue, AttentionKind::NeedsAttention, schedule, 1)));
        assert!(seen.contains(&(
            door,
            AttentionKind::NeedsAttention,
            "failed 4 times in a row",
            1
        )));
        assert_eq!(groups[3].since, Some(at(5)), "overdue since due");
        assert_eq!(
            groups[3].headline(),
            format!("Queue length at 3 branches of Acme: {want}")
        );
    }
}
