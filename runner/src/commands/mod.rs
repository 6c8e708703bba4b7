//! The runner's subcommands, one module each.

pub mod next_run;
