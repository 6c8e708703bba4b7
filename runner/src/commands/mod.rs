//! The binary's subcommands.

pub mod next_run;
pub mod plan;
pub mod run;
