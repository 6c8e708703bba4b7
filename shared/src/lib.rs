//! RES shared rules: one implementation of "when does a branch rule run next?" used by the
//! cloud functions and the site runner, so both always give the same answer.
//!
//! ```
//! use res_shared::schedule::Schedule;
//!
//! let schedule = Schedule::parse("*/30 * * * *", Some("08:00"), Some("18:00"), None)?;
//! let now = "2026-03-02T11:00:00Z".parse()?; // 14:00 in Riyadh
//! let next = schedule.next_run(now, false)?;
//! assert_eq!(next.next_run_time.to_rfc3339(), "2026-03-02T11:30:00+00:00");
//! assert!(!next.degenerate);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Consumed by the functions and the runner: every public item says what it is.
#![warn(missing_docs)]

// First, so that every module below declares its wire words with `wire_enum!`.
#[macro_use]
mod wire_enum;

pub mod events;
pub mod schedule;
pub mod secrets;
pub mod untrusted;
pub mod wire;
