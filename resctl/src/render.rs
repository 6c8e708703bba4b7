//! Answers as text for people: aligned tables and times relative to now.

use chrono::{DateTime, Utc};
pub(crate) use res_shared::schedule::relative_time as relative;
use res_shared::wire::{
    ConfigApplyResponse, ConfigRevision, ExecutionDetail, ExecutionListResponse, ExecutionStatus,
    ExecutionSummary, FleetSummary, KeySecretResponse, KeySummary, RuleActionResponse,
    RuleDescription, RuleListResponse, RuleSummary, RunStats, RunnerListResponse, RunnerSummary,
    ServedBranch, ViolationListResponse, run_report,
};

pub(crate) fn when(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| relative(t, now))
}

/// Columns padded to their widest cell.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

fn more(next: Option<&String>) -> String {
    next.map(|next| format!("more: --after {next}\n"))
        .unwrap_or_default()
}

/// Rules needing attention and overdue ones carry a note after their state.
pub(crate) fn rules(page: &RuleListResponse, now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = page
        .rules
        .iter()
        .map(|r| {
            let mut state = r.condition.as_str().to_owned();
            if r.overdue {
                state.push_str(" (overdue)");
            }
            vec![
                r.rule_name.clone(),
                r.branch_name.clone(),
                state,
                when(r.next_run_time, now),
                match (r.last_status, r.last_run_at) {
                    (Some(status), Some(at)) => {
                        format!("{} {}", status.as_str(), relative(at, now))
                    }
                    _ => "-".to_owned(),
                },
                r.branch_rule_id.to_string(),
                attention_or_cause(r, now),
            ]
        })
        .collect();
    let header = [
        "RULE",
        "BRANCH",
        "STATE",
        "NEXT RUN",
        "LAST RUN",
        "ID",
        "ATTENTION OR CAUSE",
    ];
    table(&header, &rows) + &more(page.next.as_ref())
}

/// Why the rule needs someone, and whether someone said they are on it.
fn attention_or_cause(rule: &RuleSummary, now: DateTime<Utc>) -> String {
    let why = rule
        .needs_attention
        .clone()
        .or_else(|| rule.overdue_cause.clone());
    match (why, &rule.acknowledged) {
        (Some(why), Some(ack)) => format!("{why} ({})", ack.describe(now)),
        (None, Some(ack)) => ack.describe(now),
        (why, None) => why.unwrap_or_default(),
    }
}

fn runner_row(r: &RunnerSummary, now: DateTime<Utc>) -> Vec<String> {
    let branches: Vec<String> = r.branches.iter().map(ServedBranch::label).collect();
    vec![
        r.runner_id.clone(),
        r.state.as_str().to_owned(),
        relative(r.last_seen_at, now),
        when(r.last_plan_at, now),
        r.version.clone().unwrap_or_else(|| "-".to_owned()),
        when(r.booted_at, now),
        r.outbox_depth
            .map_or_else(|| "-".to_owned(), |d| d.to_string()),
        branches.join(", "),
        r.key_name.clone(),
    ]
}

const RUNNER_HEADER: [&str; 9] = [
    "RUNNER",
    "STATE",
    "LAST SEEN",
    "LAST PLAN",
    "VERSION",
    "BOOTED",
    "OUTBOX",
    "BRANCHES",
    "KEY",
];

pub(crate) fn runners(page: &RunnerListResponse, now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = page.runners.iter().map(|r| runner_row(r, now)).collect();
    table(&RUNNER_HEADER, &rows) + &more(page.next.as_ref())
}

/// Totals, then each attention group on a line (and its branches, when asked).
pub(crate) fn fleet(summary: &FleetSummary, branches: bool, now: DateTime<Utc>) -> String {
    let t = &summary.totals;
    let counted = |pairs: Vec<(&str, u32)>| -> String {
        let each: Vec<String> = pairs
            .into_iter()
            .map(|(name, n)| format!("{n} {}", name.replace('_', " ")))
            .collect();
        if each.is_empty() {
            "none".to_owned()
        } else {
            each.join(", ")
        }
    };
    let rules = counted(t.rules.iter().map(|(c, n)| (c.as_str(), *n)).collect());
    let runners = counted(t.runners.iter().map(|(s, n)| (s.as_str(), *n)).collect());
    let mut out = format!(
        "rules: {rules} ({} overdue) at {} branch{}\nrunners: {runners}\nrunner versions: {}\n\
         last 24 hours: {}\n",
        t.overdue,
        t.branches,
        if t.branches == 1 { "" } else { "es" },
        t.versions_in_words(),
        t.day.describe()
    );
    for runner in &summary.runners_needing_someone {
        let at: Vec<String> = runner.branches.iter().map(ServedBranch::label).collect();
        out.push_str(&format!(
            "runner {} ({}) {}\n",
            runner.runner_id,
            at.join(", "),
            runner.reason
        ));
    }
    if summary.attention.is_empty() {
        out.push_str("nothing needs attention and nothing is overdue\n");
        return out;
    }
    let groups = summary.attention.len();
    out.push_str(&format!(
        "needs you ({groups} group{}):\n",
        if groups == 1 { "" } else { "s" }
    ));
    for group in &summary.attention {
        let since = group
            .since
            .map(|at| format!(", since {}", relative(at, now)))
            .unwrap_or_default();
        out.push_str(&format!("  {}{since}\n", group.headline()));
        if let Some(ack) = &group.acknowledged {
            out.push_str(&format!("    {}\n", ack.describe(now)));
        }
        if branches {
            for rule in &group.branches {
                let why = rule
                    .needs_attention
                    .clone()
                    .or_else(|| rule.overdue_cause.clone())
                    .unwrap_or_default();
                out.push_str(&format!(
                    "    {}  {}  {why}\n",
                    rule.branch_rule_id, rule.branch_name
                ));
            }
        }
    }
    out
}

pub(crate) fn violations(page: &ViolationListResponse, now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = page
        .violations
        .iter()
        .map(|v| {
            vec![
                relative(v.created_at, now),
                v.kind.clone(),
                format!("{} @ {}", v.rule_name, v.branch_name),
                v.execution_id
                    .map_or_else(|| "-".to_owned(), |id| id.to_string()),
                v.details.to_string(),
            ]
        })
        .collect();
    let header = ["CREATED", "KIND", "RULE @ BRANCH", "EXECUTION", "DETAILS"];
    table(&header, &rows) + &more(page.next.as_ref())
}

/// A key just made: its id, role and scope, and the secret, said to be shown once.
pub(crate) fn secret(done: &str, answer: &KeySecretResponse) -> String {
    let key = &answer.key;
    format!(
        "{done}: {} ({}, {}, {})\ntoken: {}\nThis is the only time the token is shown: store it now.\n",
        key.id,
        key.name,
        key.role,
        key.scope_in_words(),
        answer.token
    )
}

pub(crate) fn keys(keys: &[KeySummary], now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let scope = k.scope_in_words();
            let state = match (k.revoked_at, k.rotated_to) {
                (Some(at), _) => format!("revoked {}", relative(at, now)),
                (None, Some(to)) => format!("rotated to {to}"),
                (None, None) => "live".to_owned(),
            };
            vec![
                k.id.to_string(),
                k.name.clone(),
                k.role.to_string(),
                scope,
                relative(k.created_at, now),
                when(k.last_used_at, now),
                state,
            ]
        })
        .collect();
    let header = [
        "ID",
        "NAME",
        "ROLE",
        "SCOPE",
        "CREATED",
        "LAST USED",
        "STATE",
    ];
    table(&header, &rows)
}

pub(crate) fn rule_action(done: &str, answer: &RuleActionResponse, now: DateTime<Utc>) -> String {
    let mut out = format!("{done}: {}\n", answer.branch_rule_id);
    out.push_str(&format!("next run: {}\n", when(answer.next_run_time, now)));
    if let Some(id) = answer.cancelled_execution_id {
        out.push_str(&format!("cancelling execution {id}\n"));
    }
    if let Some(reason) = &answer.needs_attention {
        out.push_str(&format!("needs attention: {reason}\n"));
    }
    if let Some(warning) = &answer.warning {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

fn execution_rows(executions: &[ExecutionSummary], now: DateTime<Utc>) -> Vec<Vec<String>> {
    executions
        .iter()
        .map(|e| {
            vec![
                e.execution_id.to_string(),
                format!("{} @ {}", e.rule_name, e.branch_name),
                match (e.status, &e.waiting_node) {
                    (ExecutionStatus::Running, Some(_)) => "running, waiting".to_owned(),
                    (status, _) => status.as_str().to_owned(),
                },
                match &e.triggered_by {
                    Some(by) => format!("{} by {by}", e.trigger.as_str()),
                    None => e.trigger.as_str().to_owned(),
                },
                e.runner_id.clone(),
                e.attempt.to_string(),
                relative(e.scheduled_at, now),
                run_report::duration_in_words(e.duration_ms),
                e.error.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

const EXECUTION_HEADER: [&str; 9] = [
    "EXECUTION",
    "RULE @ BRANCH",
    "STATUS",
    "TRIGGER",
    "RUNNER",
    "ATTEMPT",
    "SCHEDULED",
    "DURATION",
    "ERROR",
];

pub(crate) fn history(page: &ExecutionListResponse, now: DateTime<Utc>) -> String {
    let newer = page
        .previous
        .as_ref()
        .map(|previous| format!("newer: --before {previous}\n"))
        .unwrap_or_default();
    let counts = page
        .counts
        .as_ref()
        .map(|counts| {
            let each: Vec<String> = counts
                .by_status
                .iter()
                .map(|(status, n)| format!("{} {n}", status.as_str()))
                .collect();
            let capped = if counts.capped {
                " (more than 10,000 match; these count the first 10,001)"
            } else {
                ""
            };
            format!("counts: {}{capped}\n", each.join(", "))
        })
        .unwrap_or_default();
    counts
        + &table(&EXECUTION_HEADER, &execution_rows(&page.executions, now))
        + &more(page.next.as_ref())
        + &newer
}

/// Where a run stands as its runner last said: "for 2 min 5 s, at node detect, last
/// heartbeat 4.0 s ago, lease ends in 26.0 s".
fn progress(detail: &ExecutionDetail, now: DateTime<Utc>) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(ms) = detail.elapsed_ms {
        parts.push(format!("for {}", run_report::duration_in_words(Some(ms))));
    }
    if let Some(node) = &detail.current_node {
        parts.push(format!("at node {node}"));
    }
    if let Some(at) = detail.last_heartbeat_at {
        parts.push(format!(
            "last heartbeat {}",
            run_report::offset_in_words(at, now)
        ));
    }
    if let Some(at) = detail.lease_expires_at {
        let verb = if at > now { "ends" } else { "ended" };
        parts.push(format!(
            "lease {verb} {}",
            run_report::offset_in_words(at, now)
        ));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

pub(crate) fn detail(detail: &ExecutionDetail, now: DateTime<Utc>) -> String {
    let e = &detail.execution;
    let mut out = format!(
        "execution {}\nrule {} @ {} ({})\nstatus {}  trigger {}  attempt {}  runner {}\n",
        e.execution_id,
        e.rule_name,
        e.branch_name,
        e.branch_rule_id,
        e.status.as_str(),
        e.trigger.as_str(),
        e.attempt,
        e.runner_id
    );
    if let Some(waits) = e.waiting_in_words() {
        out.push_str(&format!("{waits}\n"));
    }
    if let Some(progress) = progress(detail, now) {
        out.push_str(&format!("{progress}\n"));
    }
    if let Some(stop) = &detail.stopped_by {
        out.push_str(&format!("{}\n", stop.describe(&relative(stop.at, now))));
    }
    if let (Some(by), Some(why)) = (&e.triggered_by, &e.trigger_reason) {
        out.push_str(&format!("asked by {by}: {why}\n"));
    }
    out.push_str(&format!(
        "scheduled {}  started {}  finished {}\n",
        relative(e.scheduled_at, now),
        when(e.started_at, now),
        when(e.finished_at, now)
    ));
    out.push_str(&format!("configuration: {}\n", detail.configuration()));
    if let Some(error) = &detail.error {
        out.push_str(&format!("error: {error}\n"));
    }
    let nodes = run_report::reported_nodes(detail.result.as_ref());
    if !nodes.is_empty() {
        out.push_str("nodes (in the order they ran):\n");
        let rows: Vec<Vec<String>> = nodes
            .iter()
            .map(|n| {
                vec![
                    n.node_id.clone(),
                    n.kind(),
                    n.visit.to_string(),
                    n.status.clone(),
                    run_report::duration_in_words(n.duration_ms),
                    n.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.push_str(&table(
            &["NODE", "KIND", "VISIT", "STATUS", "DURATION", "ERROR"],
            &rows,
        ));
    }
    if let Some(decision) = run_report::consolidation_in_words(detail.result.as_ref()) {
        out.push_str(&format!("consolidation {decision}\n"));
    }
    let metrics = run_report::metrics_in_words(detail.metrics.as_ref());
    if !metrics.is_empty() {
        out.push_str("metrics:\n");
        for (name, value) in metrics {
            out.push_str(&format!("  {name}: {value}\n"));
        }
    }
    if !detail.violations.is_empty() {
        out.push_str(&format!("violations: {}\n", detail.violations.len()));
        for v in &detail.violations {
            out.push_str(&format!(
                "  {} {} {}\n",
                v.violation_id,
                v.kind,
                relative(v.created_at, now)
            ));
        }
    }
    out.push_str("retry chain (oldest first):\n");
    out.push_str(&table(
        &EXECUTION_HEADER,
        &execution_rows(&detail.chain, now),
    ));
    out
}

pub(crate) fn description(d: &RuleDescription, now: DateTime<Utc>) -> String {
    let mut out = format!(
        "rule {} @ {} ({})\nstate: {}\nschedule: {}\nnext run: {}\n",
        d.rule_name,
        d.branch_name,
        d.branch_rule_id,
        if d.overdue {
            format!("{} (overdue)", d.condition.as_str())
        } else {
            d.condition.as_str().to_owned()
        },
        d.schedule,
        when(d.next_run_time, now)
    );
    if let Some(today) = &d.today {
        out.push_str(&format!("hours: {today}\n"));
    }
    if !d.branch_week.is_empty() {
        out.push_str(&format!("branch week: {}\n", d.branch_week.join("; ")));
    }
    if !d.special_days.is_empty() {
        out.push_str(&format!("special days: {}\n", d.special_days.join("; ")));
    }
    if d.overdue {
        out.push_str(&format!(
            "overdue: {}\n",
            d.overdue_cause
                .as_deref()
                .unwrap_or("its run time passed and no runner has taken it")
        ));
    } else if d.why_not.is_empty() {
        out.push_str("ready to run now\n");
    } else {
        out.push_str(&format!("not ready: {}\n", d.why_not.join("; ")));
    }
    for (what, mark) in [
        ("paused", &d.paused),
        ("force-stopped", &d.force_stopped),
        ("run requested", &d.run_requested),
        ("needs attention", &d.needs_attention),
    ] {
        if let Some(mark) = mark {
            out.push_str(&format!(
                "{what} {} by {}: {}\n",
                relative(mark.at, now),
                mark.by.as_deref().unwrap_or("RES"),
                mark.reason.as_deref().unwrap_or("-")
            ));
        }
    }
    if let Some(ack) = &d.acknowledged {
        out.push_str(&format!("{}\n", ack.describe(now)));
    }
    let upcoming: Vec<String> = d.next_runs.iter().map(|t| relative(*t, now)).collect();
    if let Some(held) = &d.next_runs_held {
        out.push_str(&format!("upcoming: {held}\n"));
    } else if !upcoming.is_empty() {
        out.push_str(&format!("upcoming: {}\n", upcoming.join(", ")));
    }
    out.push_str(&run_stats(&d.runs));
    out.push_str("last runs:\n");
    out.push_str(&table(
        &EXECUTION_HEADER,
        &execution_rows(&d.last_runs, now),
    ));
    if d.runners.is_empty() {
        out.push_str("runners: none has fetched this branch's plan\n");
    } else {
        out.push_str("runners of this branch:\n");
        let rows: Vec<Vec<String>> = d.runners.iter().map(|r| runner_row(r, now)).collect();
        out.push_str(&table(&RUNNER_HEADER, &rows));
    }
    out
}

/// The strip of the latest runs, a letter each (Airflow's grid for a terminal), with a
/// legend of the letters it uses, then the day's and the week's figures.
fn run_stats(runs: &RunStats) -> String {
    let letter = |status: ExecutionStatus| (status.letter(), status.as_str().replace('_', " "));
    let mut out = String::new();
    if runs.strip.is_empty() {
        out.push_str("runs: none yet\n");
    } else {
        let strip: String = runs.strip.iter().map(|m| letter(m.status).0).collect();
        let mut legend: Vec<(char, String)> = runs.strip.iter().map(|m| letter(m.status)).collect();
        legend.sort_unstable();
        legend.dedup();
        let legend: Vec<String> = legend.iter().map(|(c, w)| format!("{c} {w}")).collect();
        out.push_str(&format!(
            "runs, oldest first ({}): {strip}\n  {}\n",
            runs.strip.len(),
            legend.join("  ")
        ));
    }
    out.push_str(&format!("last 24 h: {}\n", runs.day.describe()));
    out.push_str(&format!("last 7 d: {}\n", runs.week.describe()));
    out
}

/// A diff or an apply: warnings, the changes, then what became of them.
pub(crate) fn applied(answer: &ConfigApplyResponse, dry_run: bool) -> String {
    let mut out: String = answer
        .warnings
        .iter()
        .map(|w| format!("warning: {}: {}\n", w.path, w.message))
        .collect();
    out.push_str(&answer.summary);
    if !answer.secrets.is_empty() {
        out.push_str("secrets it refers to (values are never shown):\n");
        let now = Utc::now();
        for secret in &answer.secrets {
            out.push_str(&format!(
                "    {}: version {}, set by {} {}{}\n",
                secret.name,
                secret.version,
                res_shared::untrusted::Untrusted(&secret.updated_by),
                relative(secret.updated_at, now),
                if secret.changed_since_base {
                    " (a new value since the revision this document was exported at)"
                } else {
                    ""
                }
            ));
        }
    }
    let changed = answer.diff["changes"]
        .as_array()
        .is_some_and(|changes| !changes.is_empty());
    if answer.applied {
        out.push_str(&format!(
            "Applied as configuration revision {}.\n",
            answer.revision
        ));
    } else if dry_run && changed {
        out.push_str(&format!(
            "Nothing was written (at revision {}): resctl apply -f FILE applies it.\n",
            answer.revision
        ));
    }
    out
}

/// A scope's configuration revisions.
pub(crate) fn config_history(revisions: &[ConfigRevision], now: DateTime<Utc>) -> String {
    if revisions.is_empty() {
        return "No configuration has been applied here yet.\n".to_owned();
    }
    let rows: Vec<Vec<String>> = revisions
        .iter()
        .map(|r| {
            vec![
                r.revision.to_string(),
                relative(r.applied_at, now),
                r.key_name.clone(),
                format!("+{} ~{} -{}", r.created, r.changed, r.removed),
                r.message.clone(),
            ]
        })
        .collect();
    table(&["REVISION", "APPLIED", "BY", "CHANGES", "MESSAGE"], &rows)
}

/// One revision: who, when, why, then its changes.
pub(crate) fn config_revision(
    revision: &ConfigRevision,
    diff: &res_config::Diff,
    now: DateTime<Utc>,
) -> String {
    let why = if revision.message.is_empty() {
        "(no message)".to_owned()
    } else {
        revision.message.clone()
    };
    format!(
        "revision {} applied {} ({}) by {}: {why}\n{diff}",
        revision.revision,
        relative(revision.applied_at, now),
        revision.applied_at.format("%Y-%m-%d %H:%M:%S UTC"),
        revision.key_name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_page_says_its_counts_and_both_ways_to_page() {
        let page = ExecutionListResponse {
            executions: Vec::new(),
            next: Some("OLD".into()),
            previous: Some("NEW".into()),
            counts: Some(res_shared::wire::StatusCounts {
                by_status: [
                    (ExecutionStatus::Completed, 40),
                    (ExecutionStatus::Failed, 3),
                ]
                .into_iter()
                .collect(),
                capped: false,
            }),
        };
        let text = history(&page, Utc::now());
        assert!(
            text.starts_with("counts: completed 40, failed 3\n"),
            "{text}"
        );
        assert!(
            text.ends_with("more: --after OLD\nnewer: --before NEW\n"),
            "{text}"
        );
    }

    #[test]
    fn a_listed_rule_says_why_it_needs_someone_and_who_acknowledged_it() {
        let now = Utc::now();
        let mut rule = RuleSummary {
            branch_rule_id: uuid::Uuid::nil(),
            rule_name: "Stock count".into(),
            branch_id: uuid::Uuid::nil(),
            branch_name: "Branch 17".into(),
            brand_id: uuid::Uuid::nil(),
            brand_name: "Acme".into(),
            condition: res_shared::wire::RuleCondition::NeedsAttention,
            cron_expression: None,
            timezone: "UTC".into(),
            next_run_time: None,
            overdue: false,
            overdue_cause: None,
            needs_attention: Some("failed 3 times in a row".into()),
            last_status: None,
            last_run_at: None,
            acknowledged: None,
        };
        assert_eq!(attention_or_cause(&rule, now), "failed 3 times in a row");
        rule.acknowledged = Some(res_shared::wire::Acknowledgement {
            by: "alice".into(),
            reason: "vendor on site".into(),
            at: now,
            until: now + chrono::TimeDelta::hours(3),
        });
        let text = attention_or_cause(&rule, now);
        assert_eq!(
            text,
            "failed 3 times in a row (acknowledged by alice, ends in 3 h: vendor on site)"
        );
        let listed = rules(
            &RuleListResponse {
                rules: vec![rule],
                next: None,
            },
            now,
        );
        assert!(listed.contains(&text), "{listed}");
    }

    #[test]
    fn the_runs_strip_is_a_letter_a_run_with_a_legend_of_the_letters_used() {
        let at = |minutes: i64| DateTime::<Utc>::UNIX_EPOCH + chrono::TimeDelta::minutes(minutes);
        let mark = |minutes, status| res_shared::wire::RunMark {
            execution_id: uuid::Uuid::nil(),
            status,
            scheduled_at: at(minutes),
            duration_ms: None,
        };
        let runs = RunStats {
            strip: vec![
                mark(0, ExecutionStatus::Completed),
                mark(5, ExecutionStatus::Failed),
                mark(10, ExecutionStatus::Completed),
                mark(15, ExecutionStatus::Running),
            ],
            day: res_shared::wire::RunWindow {
                succeeded: 2,
                failed: 1,
                p50_ms: Some(900),
                p95_ms: Some(4_000),
                ..Default::default()
            },
            week: Default::default(),
        };
        assert_eq!(
            run_stats(&runs),
            "runs, oldest first (4): .F.R\n  . completed  F failed  R running\n\
             last 24 h: 3 runs, 66.7 % succeeded, median 0.9 s, p95 4.0 s\n\
             last 7 d: no finished runs\n"
        );
        assert_eq!(
            run_stats(&RunStats::default()),
            "runs: none yet\nlast 24 h: no finished runs\nlast 7 d: no finished runs\n"
        );
    }

    #[test]
    fn tables_align_on_the_widest_cell() {
        let text = table(
            &["A", "B"],
            &[
                vec!["long cell".into(), "x".into()],
                vec!["y".into(), "z".into()],
            ],
        );
        assert_eq!(text, "A          B\nlong cell  x\ny          z\n");
    }
}
