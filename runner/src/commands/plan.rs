//! `res-runner plan show` and `plan why <id>`: read the plan file and explain, criterion by
//! criterion, whether each rule may run — also while the daemon is stopped.

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Subcommand};
use res_shared::schedule::{Blocker, Zone, describe_blocker_in};
use uuid::Uuid;

use crate::plan::file;
use crate::plan::{Entry, Plan, explain};

/// Arguments of `res-runner plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The runner's state directory (where plan.json is).
    #[arg(
        long,
        env = "RES_RUNNER_STATE_DIR",
        default_value = "/var/lib/res-runner",
        global = true
    )]
    state_dir: PathBuf,
    /// Judge readiness at this instant (RFC 3339) instead of now.
    #[arg(long, global = true)]
    at: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: PlanCommand,
}

/// `plan` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum PlanCommand {
    /// Every rule in the local plan: next run, ready or why not.
    Show,
    /// Why one rule is or is not ready, check by check.
    Why { branch_rule_id: Uuid },
}

/// Runs a `plan` subcommand.
pub fn run(args: PlanArgs) -> ExitCode {
    let path = args.state_dir.join("plan.json");
    let plan = match file::load(&path) {
        Ok(Some(stored)) => stored.plan,
        Ok(None) => {
            eprintln!(
                "res-runner: no plan at {} (has the runner fetched one yet? is --state-dir right?)",
                path.display()
            );
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("res-runner: {error}");
            return ExitCode::from(2);
        }
    };
    let now = args.at.unwrap_or_else(Utc::now);
    match args.command {
        PlanCommand::Show => show(&plan, now, args.json),
        PlanCommand::Why { branch_rule_id } => why(&plan, branch_rule_id, now, args.json),
    }
}

fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(
        || "never".to_owned(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    )
}

fn names(plan: &Plan, entry: &Entry) -> (String, String) {
    let w = &entry.workflow;
    (
        plan.lookups.branches.get(&w.branch_id).map_or_else(
            || format!("branch {} (not in plan)", w.branch_id),
            |b| b.name.clone(),
        ),
        plan.lookups.rules.get(&w.rule_id).map_or_else(
            || format!("rule {} (not in plan)", w.rule_id),
            |r| r.name.clone(),
        ),
    )
}

fn show(plan: &Plan, now: DateTime<Utc>, json: bool) -> ExitCode {
    let mut rows = Vec::new();
    for entry in plan.workflows.values() {
        let why = explain::explain(plan, entry, now);
        let (branch, rule) = names(plan, entry);
        rows.push((entry, branch, rule, why));
    }
    rows.sort_by_key(|(entry, ..)| entry.workflow.next_run_time);
    if json {
        let out: Vec<_> = rows
            .iter()
            .map(|(entry, branch, rule, why)| {
                serde_json::json!({
                    "id": entry.workflow.id, "branch": branch, "rule": rule,
                    "next_run_time": entry.workflow.next_run_time,
                    "is_currently_running": entry.workflow.is_currently_running,
                    "ready": why.ready, "blockers": why.blockers,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(out));
        return ExitCode::SUCCESS;
    }
    println!(
        "{} rule(s); fetched {}; judged at {}",
        plan.len(),
        time(plan.fetched_at),
        time(Some(now))
    );
    for (entry, branch, rule, why) in rows {
        let state = if why.ready {
            "READY".to_owned()
        } else {
            // On the branch's clock, as the cloud's `rules describe` says it, word for word.
            let zone = Zone::parse(&entry.workflow.timezone).unwrap_or(Zone::DEFAULT);
            let mut reasons: Vec<String> = why
                .blockers
                .iter()
                .map(|blocker| describe_blocker_in(blocker, zone))
                .collect();
            if why.missing_since.is_some() {
                reasons.push("not in the server's plan".into());
            }
            if let Some(owner) = &why.held_for {
                reasons.push(format!("held for offline owner {owner}"));
            }
            if let Some(until) = why.held_after_outage {
                reasons.push(format!("left alone after an outage until {until}"));
            }
            if let Some(until) = why.unsure_until {
                reasons.push(format!(
                    "came due just before the outage: not run offline before {until}"
                ));
            }
            format!("waiting: {}", reasons.join(", "))
        };
        println!(
            "{}  {:<20} {:<24} next {}  {}",
            entry.workflow.id,
            truncate(&branch, 20),
            truncate(&rule, 24),
            time(entry.workflow.next_run_time),
            state
        );
    }
    ExitCode::SUCCESS
}

fn truncate(text: &str, width: usize) -> String {
    text.chars().take(width).collect()
}

fn why(plan: &Plan, id: Uuid, now: DateTime<Utc>, json: bool) -> ExitCode {
    let Some(entry) = plan.workflows.get(&id) else {
        eprintln!(
            "res-runner: branch rule {id} is not in the local plan ({} rules). Is it assigned to \
             this runner's branches, and has the runner refreshed since it was created?",
            plan.len()
        );
        return ExitCode::from(1);
    };
    let why = explain::explain(plan, entry, now);
    if json {
        println!("{}", serde_json::to_string(&why).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let w = &entry.workflow;
    let (branch, rule) = names(plan, entry);
    let blocked = |f: &dyn Fn(&Blocker) -> bool| why.blockers.iter().any(f);
    let check = |ok: bool| if ok { "ok  " } else { "FAIL" };
    println!("Branch rule {id}: {rule} at {branch}");
    println!("Judged at {}", time(Some(now)));
    println!("  [{}] is_active = {}", check(w.is_active), w.is_active);
    println!(
        "  [{}] is_archived = {}",
        check(!w.is_archived),
        w.is_archived
    );
    println!(
        "  [{}] is_force_stopped = {}",
        check(!w.is_force_stopped),
        w.is_force_stopped
    );
    let branch_ok = !blocked(&|b| matches!(b, Blocker::BranchInactive));
    println!("  [{}] branch is active", check(branch_ok));
    let rule_ok = !blocked(&|b| matches!(b, Blocker::RuleNotActive { .. }));
    let status = plan
        .lookups
        .rules
        .get(&w.rule_id)
        .map_or("unknown (not in plan)", |r| r.status.as_str());
    println!("  [{}] rule status = {status}", check(rule_ok));
    println!(
        "  [{}] is_currently_running = {}",
        check(!w.is_currently_running),
        w.is_currently_running
    );
    let due_ok = !blocked(&|b| matches!(b, Blocker::NotDue { .. }));
    println!(
        "  [{}] next_run_time {} is past",
        check(due_ok),
        time(w.next_run_time)
    );
    if let Some(resume) = w.resume_at {
        let ok = !blocked(&|b| matches!(b, Blocker::Paused { .. }));
        println!(
            "  [{}] paused execution resumes at {}",
            check(ok),
            time(Some(resume))
        );
    }
    let window_ok = !blocked(&|b| matches!(b, Blocker::OutsideWindow { .. }));
    let window = match (w.operation_time_from, w.operation_time_to) {
        (Some(from), Some(to)) => format!("{from}–{to} {}", w.timezone),
        _ => "none (always open)".into(),
    };
    let opens = why.blockers.iter().find_map(|b| match b {
        Blocker::OutsideWindow { next_start } => Some(format!(" (opens {})", time(*next_start))),
        _ => None,
    });
    println!(
        "  [{}] inside operation window {window}{}",
        check(window_ok),
        opens.unwrap_or_default()
    );
    let schedule = crate::plan::entry_rules::schedule(entry);
    if w.timing.is_some() || schedule.hours().is_some() {
        println!("  schedule: {}", schedule.describe());
    }
    if let Some(today) = schedule.today(now) {
        println!("  hours: {today}");
    }
    if let Some(since) = why.missing_since {
        println!(
            "  [FAIL] the server stopped listing this rule at {}; it is not scheduled",
            time(Some(since))
        );
    }
    if let Some(owner) = &why.held_for {
        println!(
            "  [FAIL] held for {owner}, the branch's offline owner: it may have run this rule \
             during the outage, and its reports come first"
        );
    }
    if let Some(until) = why.held_after_outage {
        println!(
            "  [FAIL] left alone until {} after an outage: another runner was running it, and \
             its report may still be on its way",
            time(Some(until))
        );
    }
    if let Some(until) = why.unsure_until {
        println!(
            "  [FAIL] not run offline before {}: it came due just before the outage, and \
             another runner of the branch may have claimed it (the functions decide if they \
             answer first)",
            time(Some(until))
        );
    }
    match plan
        .offline_owners
        .iter()
        .find(|o| o.branch_id == w.branch_id)
    {
        Some(owner) if owner.is_you => println!(
            "  note: this runner is the branch's offline owner: it runs the rule from this plan \
             while the functions are unreachable"
        ),
        Some(owner) => println!(
            "  note: the branch's offline owner is {}: while the functions are unreachable it \
             runs the rule, and this runner holds it",
            owner.runner_id
        ),
        None => println!("  note: the branch has no offline owner in this plan"),
    }
    if why.local_next_run {
        println!(
            "  note: next_run_time was computed on this runner while the functions were unreachable"
        );
    }
    if !why.missing_lookups.is_empty() {
        println!(
            "  note: missing from the plan's lookup tables: {}",
            why.missing_lookups.join(", ")
        );
    }
    println!(
        "{}",
        if why.ready {
            "READY: the runner starts it within a second."
        } else {
            "NOT READY."
        }
    );
    ExitCode::SUCCESS
}
