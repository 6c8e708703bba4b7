//! RES cloud functions: small HTTP functions over PostgreSQL that serve each site's runner
//! its execution plan, let it claim a due rule, keep the claim alive, record violations and
//! schedule the rule's next run. The same axum router runs as local routes
//! (`res-functions serve`) and, one function per binary, on AWS Lambda.

pub mod access;
pub mod admission;
pub mod alerts;
pub(crate) mod api;
pub mod auth;
pub mod config;
pub(crate) mod console;
pub mod db;
mod encoding;
pub mod error;
pub mod extract;
pub mod key_cache;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod openapi;
pub mod plan_waits;
pub mod router;
pub mod secrets;
pub mod serve;
pub mod state;
pub mod sweeper;
pub mod wait_presence;

pub use error::ApiError;
pub use router::{Function, router, router_with_console};
pub use state::AppState;
