//! TLS for every HTTPS client of a process (the functions client; in the runner also the
//! `http` and `notify` executors): reqwest is built without a default provider, so the
//! process installs ring's once at start, before any client exists.

use std::sync::Once;

/// Installs the process-wide rustls crypto provider; call once at process start (repeated
/// calls do nothing).
pub fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
