//! Which branch rules may start now and when the next one may — the same readiness rules
//! the claim function applies, read from the local plan.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use res_shared::schedule::{RuleStatus, Zone};
use uuid::Uuid;

use super::entry_rules::{due_at, rule_state_in, window};
use super::outage_hold::left_alone_until;
use super::{Entry, Plan};

/// The active branches and rules of a plan, gathered once per pass.
struct Active {
    branches: HashSet<Uuid>,
    rules: HashSet<Uuid>,
    /// Branches held for their offline owner.
    held: HashSet<Uuid>,
}

impl Active {
    fn of(plan: &Plan) -> Active {
        let lookups = &plan.lookups;
        Active {
            held: plan.offline_owners.held_branches(),
            branches: lookups
                .branches
                .values()
                .filter(|b| b.is_active)
                .map(|b| b.id)
                .collect(),
            rules: lookups
                .rules
                .values()
                .filter(|r| r.status == RuleStatus::Active)
                .map(|r| r.id)
                .collect(),
        }
    }

    /// Whether the cheap checks pass (everything but time and window).
    fn may_run(&self, entry: &Entry) -> bool {
        let w = &entry.workflow;
        entry.local.missing_since.is_none()
            && w.is_active
            && !w.is_archived
            && !w.is_force_stopped
            && !w.is_paused
            && !w.is_currently_running
            && self.branches.contains(&w.branch_id)
            && self.rules.contains(&w.rule_id)
            && !self.held.contains(&w.branch_id)
    }
}

/// Up to `limit` ready rules, longest overdue first, skipping `exclude` (queued or active).
pub fn ready(
    plan: &Plan,
    now: DateTime<Utc>,
    limit: usize,
    exclude: &dyn Fn(Uuid) -> bool,
) -> Vec<Uuid> {
    // Cheap checks and the sort first; the shared readiness rule (with its zone
    // conversion) only for as many candidates as it takes to fill `limit`.
    let active = Active::of(plan);
    let mut due: Vec<(Option<DateTime<Utc>>, Uuid, &Entry)> = plan
        .workflows
        .iter()
        .filter(|(_, entry)| due_at(entry).is_none_or(|at| at <= now))
        .filter(|(id, entry)| {
            active.may_run(entry) && left_alone_until(entry, now).is_none() && !exclude(**id)
        })
        .map(|(id, entry)| (due_at(entry), *id, entry))
        .collect();
    // Only the longest overdue few are needed: order a head of them, and the rest only
    // if too many of the head are outside their windows.
    let key = |c: &(Option<DateTime<Utc>>, Uuid, &Entry)| (c.0, c.1);
    let head_len = limit.saturating_mul(8).min(due.len());
    if head_len < due.len() {
        due.select_nth_unstable_by_key(head_len, key);
    }
    let (head, tail) = due.split_at_mut(head_len);
    head.sort_unstable_by_key(key);
    let mut zones = ZoneCache::default();
    let mut chosen = Vec::with_capacity(limit.min(head_len));
    let mut take = |candidates: &[(Option<DateTime<Utc>>, Uuid, &Entry)],
                    chosen: &mut Vec<Uuid>| {
        for (_, id, entry) in candidates {
            if chosen.len() == limit {
                return;
            }
            let state = rule_state_in(entry, &plan.lookups, zones.get(&entry.workflow.timezone));
            if state.is_ready(now) {
                chosen.push(*id);
            }
        }
    };
    take(head, &mut chosen);
    if chosen.len() < limit && !tail.is_empty() {
        tail.sort_unstable_by_key(key);
        take(tail, &mut chosen);
    }
    chosen
}

/// Zones by name for one pass over the plan (a site has a handful).
#[derive(Default)]
struct ZoneCache(Vec<(String, Zone)>);

impl ZoneCache {
    fn get(&mut self, name: &str) -> Zone {
        if let Some((_, zone)) = self.0.iter().find(|(n, _)| n == name) {
            return *zone;
        }
        let zone = Zone::parse(name).unwrap_or(Zone::DEFAULT);
        self.0.push((name.to_owned(), zone));
        zone
    }
}

/// The earliest time after `now` at which some rule may become ready: a due time or the
/// opening of a window for a rule that is already due. `None` when nothing is scheduled.
pub fn next_wake(plan: &Plan, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut zones = ZoneCache::default();
    let active = Active::of(plan);
    plan.workflows
        .values()
        .filter(|entry| active.may_run(entry))
        .filter_map(
            |entry| match (due_at(entry), left_alone_until(entry, now)) {
                // Held around an outage: look again when the hold runs out.
                (_, Some(until)) => Some(until),
                (Some(at), None) if at > now => Some(at),
                _ => window(entry)
                    .and_then(|w| w.next_start_after(now, zones.get(&entry.workflow.timezone))),
            },
        )
        .min()
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveTime, TimeDelta, TimeZone};
    use res_shared::wire::{Branch, PlanEntry, Rule};

    use super::*;
    use crate::plan::Local;
    use crate::plan::entry_rules::rule_state;
    // The listing is the operator view over the same selection; tested on the same plans.
    use crate::plan::explain::listing;

    fn plan(n: usize, now: DateTime<Utc>) -> Plan {
        let branch = Uuid::new_v4();
        let rule = Uuid::new_v4();
        let mut plan = Plan::default();
        plan.lookups.branches.insert(
            branch,
            Branch {
                id: branch,
                brand_id: Uuid::nil(),
                name: "b".into(),
                is_active: true,
                timezone: None,
                hours: None,
            },
        );
        plan.lookups.rules.insert(
            rule,
            Rule {
                id: rule,
                name: "r".into(),
                status: RuleStatus::Active,
                cron_expression: None,
            },
        );
        let zones = [
            "Asia/Riyadh",
            "Europe/Berlin",
            "America/New_York",
            "Nowhere/Unknown",
        ];
        for i in 0..n {
            let hour = |h: usize| NaiveTime::from_hms_opt((h % 24) as u32, 0, 0);
            let window = match i % 4 {
                0 => (None, None),
                1 => (hour(i), hour(i + 9)),
                2 => (hour(i + 20), hour(i + 2)),
                _ => (hour(i + 3), hour(i + 4)),
            };
            let workflow: PlanEntry = serde_json::from_value(serde_json::json!({
                "id": Uuid::new_v4(), "branch_id": branch, "rule_id": rule, "brand_rule_id": null,
                "is_active": i % 13 != 0, "is_archived": false, "is_force_stopped": i % 17 == 0,
                "is_currently_running": i % 11 == 0,
                "next_run_time": if i % 7 == 0 { None } else { Some(now + TimeDelta::minutes(i as i64 % 90 - 60)) },
                "resume_at": if i % 19 == 0 { Some(now + TimeDelta::minutes(i as i64 % 5 - 2)) } else { None },
                "last_run_time": null, "operation_time_from": window.0, "operation_time_to": window.1,
                "cron_expression": "* * * * *", "timezone": zones[i % zones.len()],
                "workflow_config": null, "run_count": 0, "failure_count": 0,
                "is_last_run_failed": false, "updated_at": now
            }))
            .expect("workflow");
            let local = Local {
                missing_since: (i % 23 == 0).then_some(now),
                ..Local::default()
            };
            plan.workflows
                .insert(workflow.id, Entry { workflow, local });
        }
        plan
    }

    /// The night Europe/Berlin springs forward, so the sample plan crosses a DST gap.
    fn sample_now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 29, 1, 30, 0)
            .single()
            .expect("valid")
    }

    #[test]
    fn selection_equals_the_shared_readiness_rule_longest_overdue_first() {
        let now = sample_now();
        let plan = plan(2_000, now);
        let mut expected: Vec<(Option<DateTime<Utc>>, Uuid)> = plan
            .workflows
            .values()
            .filter(|e| e.local.missing_since.is_none())
            .filter(|e| rule_state(e, &plan.lookups).is_ready(now))
            .map(|e| (due_at(e), e.workflow.id))
            .collect();
        expected.sort_unstable();
        assert!(
            expected.len() > 100,
            "the plan has plenty ready: {}",
            expected.len()
        );
        for limit in [1, 10, 57, 5_000] {
            let chosen = ready(&plan, now, limit, &|_| false);
            let want: Vec<Uuid> = expected.iter().take(limit).map(|(_, id)| *id).collect();
            assert_eq!(chosen, want, "limit {limit}");
        }
        let skip = expected[0].1;
        assert!(!ready(&plan, now, 10, &|id| id == skip).contains(&skip));
    }

    #[test]
    fn the_next_wake_is_the_earliest_due_time_or_window_opening() {
        let now = sample_now();
        let plan = plan(500, now);
        let wake = next_wake(&plan, now).expect("something is scheduled");
        assert!(wake > now);
        // Nothing becomes ready between now and the wake-up.
        let mut t = now + TimeDelta::seconds(1);
        let before = ready(&plan, now, usize::MAX, &|_| false);
        while t < wake {
            let at_t = ready(&plan, t, usize::MAX, &|_| false);
            assert!(
                at_t.iter().all(|id| before.contains(id)),
                "a rule became ready at {t}, before the wake-up at {wake}"
            );
            t += TimeDelta::seconds(30);
        }
    }

    #[test]
    fn a_rule_held_after_an_outage_is_not_ready_and_is_woken_for_when_the_hold_ends() {
        let now = sample_now();
        let mut plan = plan(200, now);
        let id = ready(&plan, now, 1, &|_| false)[0];
        let until = now + TimeDelta::seconds(1);
        let entry = plan.workflows.get_mut(&id).expect("the entry");
        entry.local.held_after_outage = Some(crate::plan::outage_hold::OutageHold {
            until: Some(until),
            run_count: entry.workflow.run_count,
        });
        assert!(!ready(&plan, now, usize::MAX, &|_| false).contains(&id));
        assert!(next_wake(&plan, now).is_some_and(|wake| wake <= until));
        assert!(ready(&plan, until, usize::MAX, &|_| false).contains(&id));
        let why = crate::plan::explain::explain(&plan, &plan.workflows[&id], now);
        assert_eq!((why.ready, why.held_after_outage), (false, Some(until)));
    }

    #[test]
    fn a_branch_held_for_its_offline_owner_has_nothing_ready_until_the_owner_is_seen() {
        let now = sample_now();
        let mut plan = plan(200, now);
        let branch = plan
            .workflows
            .values()
            .next()
            .expect("rules")
            .workflow
            .branch_id;
        let ready_before = ready(&plan, now, usize::MAX, &|_| false);
        assert!(!ready_before.is_empty());
        let owner = |seen: DateTime<Utc>| res_shared::wire::OfflineOwner {
            branch_id: branch,
            runner_id: "site-a".into(),
            is_you: false,
            last_plan_at: Some(seen),
        };
        plan.offline_owners.start_check();
        plan.offline_owners
            .replace(vec![owner(now - TimeDelta::minutes(5))], now);
        assert!(ready(&plan, now, usize::MAX, &|_| false).is_empty());
        let explained =
            crate::plan::explain::explain(&plan, &plan.workflows[&ready_before[0]], now);
        assert_eq!(explained.held_for.as_deref(), Some("site-a"));
        assert!(!explained.ready);
        // No wake-up for a held rule: the scheduler sleeps until the plan changes.
        let wake = next_wake(&plan, now);
        assert!(wake.is_none_or(|at| at > now), "{wake:?}");
        plan.offline_owners.replace(
            vec![owner(now + TimeDelta::seconds(1))],
            now + TimeDelta::seconds(2),
        );
        assert_eq!(ready(&plan, now, usize::MAX, &|_| false), ready_before);
    }

    #[test]
    fn a_capped_listing_shows_running_rules_then_the_soonest() {
        let now = sample_now();
        let plan = plan(2_000, now);
        let shown = listing(&plan, 500);
        assert_eq!(shown.len(), 500);
        let running = plan
            .workflows
            .values()
            .filter(|e| e.workflow.is_currently_running)
            .count();
        assert!(running > 0 && running < 500);
        assert!(
            shown[..running]
                .iter()
                .all(|e| e.workflow.is_currently_running)
        );
        let times: Vec<DateTime<Utc>> = shown[running..]
            .iter()
            .map(|e| {
                e.workflow
                    .next_run_time
                    .expect("scheduled ones come before the rest")
            })
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "sorted by next run");
        let last_shown = times.last().copied().expect("some shown");
        let shown_ids: HashSet<Uuid> = shown.iter().map(|e| e.workflow.id).collect();
        for left_out in plan
            .workflows
            .values()
            .filter(|e| !shown_ids.contains(&e.workflow.id))
        {
            assert!(!left_out.workflow.is_currently_running);
            assert!(
                left_out
                    .workflow
                    .next_run_time
                    .is_none_or(|t| t >= last_shown)
            );
        }
        assert_eq!(listing(&plan, 5_000).len(), 2_000);
    }
}
