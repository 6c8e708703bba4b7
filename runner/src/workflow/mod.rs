//! The workflow engine: what a claimed branch rule runs.

pub mod expr;
