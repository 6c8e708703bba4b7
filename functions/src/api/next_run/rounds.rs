//! A batch's reports in rounds, each round made as a group of single reports is (one
//! transaction, see `grouped`). A report waits for a later round when an earlier report of
//! the batch names its rule or its execution: a site back from an outage sends its rule's
//! offline runs together, and each must be recorded after the one before it, as if they
//! had come one after the other. Reports of different rules keep no order among themselves,
//! as single reports sent at once do not.

use std::collections::HashMap;

use uuid::Uuid;

/// The reports' places (indexes into `reports`), round by round; each report is in exactly
/// one round, and a round holds a rule or an execution at most once.
pub(crate) fn rounds(reports: &[(Uuid, Option<Uuid>)]) -> Vec<Vec<usize>> {
    // The round after the latest one that holds each rule or execution.
    let mut next_free: HashMap<Uuid, usize> = HashMap::new();
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    for (index, (rule, execution)) in reports.iter().enumerate() {
        let keys = std::iter::once(*rule).chain(*execution);
        let round = keys
            .clone()
            .filter_map(|key| next_free.get(&key).copied())
            .max()
            .unwrap_or(0);
        for key in keys {
            next_free.insert(key, round + 1);
        }
        if rounds.len() <= round {
            rounds.resize_with(round + 1, Vec::new);
        }
        rounds[round].push(index);
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn reports_of_different_rules_share_one_round() {
        let reports = [(id(1), Some(id(11))), (id(2), Some(id(12))), (id(3), None)];
        assert_eq!(rounds(&reports), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn a_rules_later_reports_each_wait_for_the_one_before() {
        // Three offline runs of rule 1 between runs of rules 2 and 3.
        let reports = [
            (id(1), Some(id(11))),
            (id(2), Some(id(21))),
            (id(1), Some(id(12))),
            (id(1), Some(id(13))),
            (id(3), Some(id(31))),
        ];
        assert_eq!(rounds(&reports), vec![vec![0, 1, 4], vec![2], vec![3]]);
    }

    #[test]
    fn an_execution_named_under_two_rules_is_met_in_order() {
        // The second naming waits, so it meets what the first recorded (or not).
        let reports = [(id(1), Some(id(9))), (id(2), Some(id(9))), (id(3), None)];
        assert_eq!(rounds(&reports), vec![vec![0, 2], vec![1]]);
    }

    #[test]
    fn a_report_waits_for_the_latest_of_its_rule_and_its_execution() {
        let reports = [
            (id(1), Some(id(11))),
            (id(1), Some(id(12))),
            (id(2), Some(id(12))),
            (id(2), Some(id(21))),
        ];
        assert_eq!(rounds(&reports), vec![vec![0], vec![1], vec![2], vec![3]]);
    }

    #[test]
    fn every_report_is_in_exactly_one_round_with_no_key_twice() {
        let reports: Vec<(Uuid, Option<Uuid>)> = (0..100u128)
            .map(|n| (id(n % 7), (n % 3 != 0).then(|| id(100 + n % 11))))
            .collect();
        let made = rounds(&reports);
        let mut seen: Vec<usize> = made.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
        for round in &made {
            let mut keys: Vec<Uuid> = round
                .iter()
                .flat_map(|&i| std::iter::once(reports[i].0).chain(reports[i].1))
                .collect();
            let all = keys.len();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), all, "a key twice in round {round:?}");
        }
        // And a key's reports keep their order across rounds.
        let round_of = |i: usize| made.iter().position(|r| r.contains(&i));
        for a in 0..100 {
            for b in a + 1..100 {
                let shares = reports[a].0 == reports[b].0
                    || (reports[a].1.is_some() && reports[a].1 == reports[b].1);
                if shares {
                    assert!(round_of(a) < round_of(b), "{a} before {b}");
                }
            }
        }
    }
}
