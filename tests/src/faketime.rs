//! A process whose wall clock is off by a given number of seconds: libfaketime preloaded
//! (Debian's `faketime` package), its monotonic clocks left alone so timers still measure
//! real time, as on a host whose clock has drifted.

use std::path::PathBuf;

/// The environment that sets a process's wall clock `seconds` ahead (negative: behind).
pub fn shifted_by(seconds: i64) -> Vec<(String, String)> {
    res_setup::require(&[res_setup::Tool::Faketime], "the wrong-clock tests")
        .unwrap_or_else(|e| panic!("{e}"));
    vec![
        ("LD_PRELOAD".into(), library().display().to_string()),
        ("FAKETIME".into(), format!("{seconds:+}")),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

/// The multi-threaded library (the runner's runtime has threads), where the package put it.
fn library() -> PathBuf {
    std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("faketime/libfaketimeMT.so.1"))
        .find(|path| path.is_file())
        .expect("the faketime package installs libfaketimeMT.so.1 under /usr/lib/<arch>/faketime")
}
