//! The functions over real HTTP against a real PostgreSQL: one test binary, so a change to
//! the crate links once instead of once per file (each module says what it covers).

mod alerts;
mod batch;
mod claim;
mod cli;
mod config;
mod config_catalogue;
mod console;
mod fleet;
mod fuzz;
mod history_paging;
mod input;
mod key_admin;
mod keys;
mod lambda;
mod logs;
mod offline_owners;
mod opening_hours;
mod operator;
mod output;
mod overdue;
mod plan;
mod plan_wait;
mod refusals;
mod report;
mod run_stats;
mod runners;
mod secrets;
mod sweeper;
mod tenancy;
mod windows;
