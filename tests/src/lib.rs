//! Test harness shared by the crates' integration tests: a throwaway PostgreSQL server
//! started on demand with one fresh database per test, and the functions served over real
//! HTTP on that database, with seed data.
//!
//! End-to-end tests that drive several processes live in this crate's `tests/` folder.

pub mod browser;
pub mod console;
pub mod faketime;
pub mod forwarder;
pub mod functions;
pub mod netns;
pub mod postgres;
pub mod processes;
pub mod receiver;
pub mod tmpfs;
