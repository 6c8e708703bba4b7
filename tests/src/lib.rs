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
pub mod pgbouncer;
pub mod postgres;
pub mod processes;
pub mod receiver;
pub mod tmpfs;

/// The sealing keys every test's functions use for brands' secrets: made once per test
/// process, so no key is written in the sources.
pub fn secrets_keys() -> &'static str {
    static KEYS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        res_functions::secrets::Keyring::new_key("test-1").expect("random bytes for a test key")
    })
}
