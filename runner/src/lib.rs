//! `res-runner`: the RES service on a site's camera host — the workflow engine and the
//! commands the binary offers.

pub mod cloud;
pub mod commands;
pub mod daemon;
pub mod plan;
pub mod tls;
pub mod workflow;
