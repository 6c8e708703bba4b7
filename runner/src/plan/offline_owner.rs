//! Who runs a branch's rules while the functions are unreachable. The cloud designates one
//! offline owner per branch and names it in every plan answer; the owner runs the branch's
//! due rules from its local plan during an outage, the other runners of the branch hold them.
//!
//! Holding does not end the moment the cloud answers again: the owner may still have offline
//! runs in its outbox, and a claim made before they arrive would run an occurrence twice. So
//! from the start of each outage (also one met at start-up) a runner holds the branches owned
//! by another runner until a plan answer shows that owner asked for its plan after this runner
//! was back — a runner asks only once its outbox is delivered and the offline runs it was
//! making when the functions came back have ended and been reported (it waits up to 30 s
//! for them, so as not to look stale), and the functions read the owners before the
//! answer's snapshot, so that answer already holds the owner's offline runs.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use res_shared::wire::OfflineOwner;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The owners of this runner's branches, as the last plan answer gave them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct OfflineOwners {
    /// By branch; persisted, so an owner restarted during an outage knows it still owns.
    #[serde(default)]
    by_branch: BTreeMap<Uuid, OfflineOwner>,
    /// Whether, and since when, this runner must see the other owners again.
    #[serde(skip)]
    check: OwnerCheck,
}

/// Since when an owner must have asked for its plan before this runner stops holding its
/// branches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum OwnerCheck {
    /// No hold (this runner runs offline regardless, or never started a check).
    #[default]
    Off,
    /// Hold until the next answer, whose time becomes the mark.
    Pending,
    /// Hold a branch until its owner asked after this database time.
    After(DateTime<Utc>),
}

impl OfflineOwners {
    /// Takes the owners of a plan answer generated at `generated_at` (database time).
    pub(crate) fn replace(&mut self, owners: Vec<OfflineOwner>, generated_at: DateTime<Utc>) {
        self.by_branch = owners.into_iter().map(|o| (o.branch_id, o)).collect();
        if self.check == OwnerCheck::Pending {
            self.check = OwnerCheck::After(generated_at);
        }
    }

    /// This runner lost the functions: hold other owners' branches until they are seen
    /// again after it is back.
    pub(crate) fn start_check(&mut self) {
        self.check = OwnerCheck::Pending;
    }

    /// Whether this runner is the branch's offline owner.
    pub(crate) fn owns(&self, branch_id: Uuid) -> bool {
        self.by_branch.get(&branch_id).is_some_and(|o| o.is_you)
    }

    /// The owner this runner holds the branch's rules for, if it does.
    pub(crate) fn holding_for(&self, branch_id: Uuid) -> Option<&OfflineOwner> {
        let owner = self.by_branch.get(&branch_id).filter(|o| !o.is_you)?;
        let held = match self.check {
            OwnerCheck::Off => false,
            OwnerCheck::Pending => true,
            OwnerCheck::After(mark) => owner.last_plan_at.is_none_or(|at| at < mark),
        };
        held.then_some(owner)
    }

    /// Every branch held now.
    pub(crate) fn held_branches(&self) -> HashSet<Uuid> {
        self.by_branch
            .keys()
            .copied()
            .filter(|branch| self.holding_for(*branch).is_some())
            .collect()
    }

    /// The owners, by branch.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &OfflineOwner> {
        self.by_branch.values()
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn owner(branch_id: Uuid, is_you: bool, last_plan_at: DateTime<Utc>) -> OfflineOwner {
        OfflineOwner {
            branch_id,
            runner_id: if is_you { "me" } else { "other" }.into(),
            is_you,
            last_plan_at: Some(last_plan_at),
        }
    }

    #[test]
    fn another_runners_branch_is_held_from_the_check_until_its_owner_asks_after_the_mark() {
        let (mine, theirs) = (Uuid::new_v4(), Uuid::new_v4());
        let t0 = DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000);
        let mut owners = OfflineOwners::default();
        owners.replace(vec![owner(mine, true, t0), owner(theirs, false, t0)], t0);
        assert!(owners.owns(mine) && !owners.owns(theirs));
        assert!(
            owners.held_branches().is_empty(),
            "no check started: nothing held"
        );

        owners.start_check();
        assert_eq!(owners.held_branches(), HashSet::from([theirs]));
        // The first answer after the check sets the mark; the owner asked before it.
        let back = t0 + TimeDelta::seconds(100);
        owners.replace(
            vec![owner(mine, true, back), owner(theirs, false, t0)],
            back,
        );
        assert!(owners.holding_for(theirs).is_some());
        assert!(
            owners.holding_for(mine).is_none(),
            "an owner never holds for itself"
        );
        // The owner asked again after this runner was back: its offline runs are recorded.
        let later = back + TimeDelta::seconds(1);
        owners.replace(
            vec![owner(mine, true, later), owner(theirs, false, later)],
            later + TimeDelta::seconds(5),
        );
        assert!(owners.held_branches().is_empty());
    }

    #[test]
    fn a_branch_without_an_owner_is_not_held() {
        let mut owners = OfflineOwners::default();
        owners.start_check();
        owners.replace(Vec::new(), DateTime::<Utc>::UNIX_EPOCH);
        assert!(owners.holding_for(Uuid::new_v4()).is_none());
        assert!(!owners.owns(Uuid::new_v4()));
    }

    #[test]
    fn owners_persist_but_the_check_does_not() {
        let branch = Uuid::new_v4();
        let mut owners = OfflineOwners::default();
        owners.start_check();
        owners.replace(
            vec![owner(branch, true, DateTime::<Utc>::UNIX_EPOCH)],
            DateTime::<Utc>::UNIX_EPOCH,
        );
        let text = serde_json::to_string(&owners).expect("serializes");
        let back: OfflineOwners = serde_json::from_str(&text).expect("reads back");
        assert!(back.owns(branch));
        assert_eq!(back.check, OwnerCheck::Off);
    }
}
