//! `res-runner`: the RES service on a site's camera host — the workflow engine and the
//! commands the binary offers.

pub mod clock;
pub mod commands;
pub mod daemon;
pub mod plan;
pub mod workflow;

/// The functions client, shared with `resctl`.
pub use res_client as cloud;
pub use res_client::tls;
