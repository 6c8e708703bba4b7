//! SQL for the fleet page's counts: every rule in scope counted by branch in one plain
//! scan, and only the few that may be anything but enabled and idle judged in full.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::access::Scope;
use crate::db::branch_rules::DescribedRule;

/// Branch rules in scope counted per branch and per everything their condition and
/// overdue flag are judged from: a few rows a branch however many rules it has.
#[derive(Debug, Clone)]
pub(crate) struct FleetTally {
    pub(crate) branch_id: Uuid,
    pub(crate) branch_name: String,
    pub(crate) brand_id: Uuid,
    pub(crate) brand_name: String,
    pub(crate) timezone: String,
    pub(crate) enabled: bool,
    pub(crate) force_stopped: bool,
    pub(crate) paused: bool,
    pub(crate) held: bool,
    pub(crate) needs_attention: bool,
    pub(crate) overdue: bool,
    pub(crate) rules: i64,
}

/// A rule that needs attention or is overdue, with its live acknowledgement.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct FlaggedRow {
    #[sqlx(flatten)]
    pub(crate) described: DescribedRule,
    pub(crate) ack_by: Option<String>,
    pub(crate) ack_reason: Option<String>,
    pub(crate) ack_at: Option<DateTime<Utc>>,
    pub(crate) ack_until: Option<DateTime<Utc>>,
}

/// The fleet's rules as of one snapshot: the tally, and in full those that need someone.
#[derive(Debug, Default)]
pub(crate) struct FleetRules {
    pub(crate) tallies: Vec<FleetTally>,
    pub(crate) flagged: Vec<FlaggedRow>,
}

/// A branch in scope, named, with how many rules it has and which of them the scan could
/// not rule out as enabled and idle.
#[derive(sqlx::FromRow)]
struct BranchCount {
    branch_id: Uuid,
    branch_name: String,
    brand_id: Uuid,
    brand_name: String,
    timezone: String,
    rules: i64,
    odd: Option<Vec<Uuid>>,
}

/// Rules at one branch with the same six flags, as the bits of one number in
/// [`FleetTally`]'s order (enabled is bit 0).
#[derive(sqlx::FromRow)]
struct FlagCount {
    branch_id: Uuid,
    flags: i32,
    rules: i64,
}

/// An enabled rule that nothing holds, stops, pauses or flags: what most rules are.
const IDLE: i32 = 1;

/// Past one rule in this many set aside, judging them one by one (a few microseconds each,
/// by id) costs more than judging every rule in one scan (under one each): after an outage
/// that left most of the fleet overdue, say.
const JUDGE_ALL_BEYOND: usize = 8;

/// The rules in scope judged flag by flag, grouped by branch; `$where` narrows them.
macro_rules! judged {
    ($where:literal) => {
        concat!(
            "SELECT br.branch_id, (",
            $crate::db::branch_rules::enabled!(),
            ")::int | (br.is_force_stopped::int << 1) | ((br.paused_at IS NOT NULL)::int << 2) \
              | ((",
            $crate::db::branch_rules::held!(),
            ")::int << 3) | ((br.needs_attention_at IS NOT NULL)::int << 4) | ((",
            $crate::db::branch_rules::overdue!(),
            ")::int << 5) AS flags, count(*) AS rules \
             FROM branch_rules br \
             JOIN branches b ON b.id = br.branch_id \
             JOIN rules r ON r.id = br.rule_id \
             LEFT JOIN executions latest ON latest.branch_rule_id = br.id \
                 AND latest.status IN ('scheduled', 'running', 'paused') \
             WHERE ($1 OR br.branch_id = ANY($2)) ",
            $where,
            " GROUP BY 1, 2"
        )
    };
}

/// The rules in scope that need attention or are overdue, described in full, each with
/// its latest acknowledgement that has not run out (and, for a flagged rule, came after
/// the flag); `$where` narrows them. Their `latest_*` columns are the execution that
/// *holds* the rule (live or paused; at most one, by `executions_one_live_per_rule`), not
/// its latest run: the condition depends only on the holder, and a hash join with the few
/// live executions costs far less.
macro_rules! flagged {
    ($where:literal) => {
        concat!(
            "SELECT f.*, ack.key_name AS ack_by, ack.reason AS ack_reason, ack.at AS ack_at, \
                    ack.until AS ack_until FROM (",
            $crate::db::branch_rules::described_from!(
                "LEFT JOIN executions latest ON latest.branch_rule_id = br.id \
                     AND latest.status IN ('scheduled', 'running', 'paused')",
                "NULL::timestamptz"
            ),
            " WHERE ($1 OR br.branch_id = ANY($2)) ",
            $where,
            " AND (br.needs_attention_at IS NOT NULL OR ",
            $crate::db::branch_rules::overdue!(),
            ")) f LEFT JOIN LATERAL (",
            $crate::db::branch_rules::live_ack!("f"),
            ") ack ON true"
        )
    };
}

/// Reads the tally and the flagged rules in one read-only snapshot, so the counts agree
/// with each other and with the rules listed.
///
/// Judging every rule (three joins and six flags a row) cost 48–78 ms at 100,000 rules.
/// The scan here only counts, and sets aside the rules whose own row is anything but
/// active, unmarked and on time; those, the rules a live or paused run holds, and those of
/// inactive branches and rules are judged in full. Every other rule is enabled and idle.
pub(crate) async fn read(pool: &sqlx::PgPool, scope: Scope<'_>) -> Result<FleetRules, sqlx::Error> {
    let (all, branches) = scope.as_params();
    let mut tx = pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    let counts: Vec<BranchCount> = sqlx::query_as(
        "WITH per AS (SELECT br.branch_id, count(*) AS rules, \
                      array_agg(br.id) FILTER (WHERE NOT br.is_active OR br.is_archived \
                          OR br.is_force_stopped OR br.paused_at IS NOT NULL \
                          OR br.needs_attention_at IS NOT NULL \
                          OR br.next_run_time < now() - make_interval(secs => 300)) AS odd \
                      FROM branch_rules br WHERE ($1 OR br.branch_id = ANY($2)) GROUP BY 1) \
         SELECT b.id AS branch_id, b.name AS branch_name, bd.id AS brand_id, \
                bd.name AS brand_name, COALESCE(b.timezone, bd.timezone) AS timezone, \
                per.rules, per.odd \
         FROM per JOIN branches b ON b.id = per.branch_id JOIN brands bd ON bd.id = b.brand_id",
    )
    .bind(all)
    .bind(&branches)
    .fetch_all(&mut *tx)
    .await?;
    let odd: Vec<Uuid> = counts
        .iter()
        .flat_map(|c| c.odd.iter().flatten())
        .copied()
        .collect();
    let by_id = judge_by_id(odd.len(), counts.iter().map(|c| c.rules).sum());
    // `$3`, the ids set aside, narrows both reads below when judging by id; judging every
    // rule, the queries leave it unused and it is sent empty.
    let ids: &[Uuid] = if by_id { &odd } else { &[] };
    let judging = if by_id {
        judged!(
            "AND br.id = ANY($3 || ARRAY( \
                SELECT e.branch_rule_id FROM executions e \
                 WHERE e.status IN ('scheduled', 'running', 'paused') \
                UNION ALL SELECT x.id FROM branches xb JOIN branch_rules x ON x.branch_id = xb.id \
                 WHERE NOT xb.is_active \
                UNION ALL SELECT x.id FROM rules xr JOIN branch_rules x ON x.rule_id = xr.id \
                 WHERE xr.status <> 'active'))"
        )
    } else {
        judged!("")
    };
    let flags: Vec<FlagCount> = sqlx::query_as(judging)
        .bind(all)
        .bind(&branches)
        .bind(ids)
        .fetch_all(&mut *tx)
        .await?;
    let tallies = lines(counts, flags);
    let flagged = if tallies.iter().any(|t| t.needs_attention || t.overdue) {
        // Both marks set a rule aside in the scan: by id, only those can be flagged.
        let reading = if by_id {
            flagged!("AND br.id = ANY($3)")
        } else {
            flagged!("")
        };
        sqlx::query_as(reading)
            .bind(all)
            .bind(&branches)
            .bind(ids)
            .fetch_all(&mut *tx)
            .await?
    } else {
        Vec::new()
    };
    tx.commit().await?;
    Ok(FleetRules { tallies, flagged })
}

/// Whether to judge the rules set aside by id rather than every rule in one scan.
fn judge_by_id(set_aside: usize, rules: i64) -> bool {
    set_aside.saturating_mul(JUDGE_ALL_BEYOND) <= usize::try_from(rules).unwrap_or(0)
}

/// The fleet page's lines: each branch's judged rules by their flags, and the rest of its
/// rules as enabled and idle. Counts for a branch the scan did not see are dropped.
fn lines(counts: Vec<BranchCount>, flags: Vec<FlagCount>) -> Vec<FleetTally> {
    let mut judged: std::collections::HashMap<Uuid, Vec<FlagCount>> =
        std::collections::HashMap::new();
    for count in flags {
        judged.entry(count.branch_id).or_default().push(count);
    }
    let mut lines = Vec::new();
    for branch in counts {
        let judged = judged.remove(&branch.branch_id).unwrap_or_default();
        let idle = branch.rules - judged.iter().map(|c| c.rules).sum::<i64>();
        let idle = (idle > 0).then_some(FlagCount {
            branch_id: branch.branch_id,
            flags: IDLE,
            rules: idle,
        });
        for count in judged.into_iter().chain(idle) {
            let bit = |n: u32| count.flags & (1 << n) != 0;
            lines.push(FleetTally {
                branch_id: branch.branch_id,
                branch_name: branch.branch_name.clone(),
                brand_id: branch.brand_id,
                brand_name: branch.brand_name.clone(),
                timezone: branch.timezone.clone(),
                enabled: bit(0),
                force_stopped: bit(1),
                paused: bit(2),
                held: bit(3),
                needs_attention: bit(4),
                overdue: bit(5),
                rules: count.rules,
            });
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn branch(name: &str, rules: i64) -> BranchCount {
        BranchCount {
            branch_id: Uuid::new_v4(),
            branch_name: name.to_owned(),
            brand_id: Uuid::nil(),
            brand_name: "Brand".to_owned(),
            timezone: "Asia/Riyadh".to_owned(),
            rules,
            odd: None,
        }
    }

    fn judged(branch: &BranchCount, flags: i32, rules: i64) -> FlagCount {
        FlagCount {
            branch_id: branch.branch_id,
            flags,
            rules,
        }
    }

    /// (branch, enabled, paused, needs attention, overdue, rules) of each line.
    fn shape(lines: &[FleetTally]) -> Vec<(String, bool, bool, bool, bool, i64)> {
        let mut shape: Vec<_> = lines
            .iter()
            .map(|t| {
                let name = t.branch_name.clone();
                (
                    name,
                    t.enabled,
                    t.paused,
                    t.needs_attention,
                    t.overdue,
                    t.rules,
                )
            })
            .collect();
        shape.sort();
        shape
    }

    #[test]
    fn a_fleet_mostly_set_aside_is_judged_in_one_scan() {
        assert!(judge_by_id(1_100, 100_000));
        assert!(judge_by_id(0, 0));
        assert!(judge_by_id(12_500, 100_000));
        assert!(!judge_by_id(12_501, 100_000));
        assert!(!judge_by_id(100_000, 100_000));
        assert!(!judge_by_id(1, 0));
    }

    #[test]
    fn the_rules_not_judged_are_the_branch_s_idle_ones() {
        let busy = branch("Busy", 100);
        let quiet = branch("Quiet", 40);
        let flags = vec![
            judged(&busy, 1 | 1 << 4, 2),
            judged(&busy, 1 | 1 << 2, 1),
            judged(&busy, 1 | 1 << 5, 3),
        ];
        let lines = lines(vec![busy, quiet], flags);
        assert_eq!(
            shape(&lines),
            vec![
                ("Busy".to_owned(), true, false, false, false, 94),
                ("Busy".to_owned(), true, false, false, true, 3),
                ("Busy".to_owned(), true, false, true, false, 2),
                ("Busy".to_owned(), true, true, false, false, 1),
                ("Quiet".to_owned(), true, false, false, false, 40),
            ]
        );
    }

    #[test]
    fn a_branch_whose_rules_were_all_judged_has_no_idle_line() {
        let closed = branch("Closed", 5);
        let flags = vec![judged(&closed, 0, 5)];
        assert_eq!(
            shape(&lines(vec![closed], flags)),
            vec![("Closed".to_owned(), false, false, false, false, 5)]
        );
    }

    #[test]
    fn counts_for_a_branch_the_scan_did_not_see_are_dropped() {
        let seen = branch("Seen", 3);
        let unseen = branch("Unseen", 2);
        let flags = vec![judged(&unseen, 1 | 1 << 4, 2)];
        assert_eq!(
            shape(&lines(vec![seen], flags)),
            vec![("Seen".to_owned(), true, false, false, false, 3)]
        );
    }
}
