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

/// Every binary built on these functions — `serve`, each Lambda, the sweeper, the fleet
/// bench — allocates through mimalloc. glibc's allocator took about a sixth of `serve`'s
/// CPU under the fleet mix (perf, 12,000 sites, 2026-11-29): thousands of connections and
/// pooled statements allocate and free small buffers across the worker threads, and its
/// chunk unlinking and consolidation led the profile. Side by side, `serve` went from 0.16
/// to 0.12–0.13 cores (docs/benchmarks.md, "The allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
