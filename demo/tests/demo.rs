//! `res-demo demo` as `cargo xtask demo` runs it (with the binaries built beside it and a
//! time limit): the system comes up, executions stream in, and everything is gone afterwards.

use std::process::Command;

use std::time::{Duration, Instant};

use res_tests::processes::{binary, free_port};

#[test]
fn the_demo_runs_the_whole_system_and_leaves_nothing_behind() {
    let bin_dir = binary("res-runner")
        .parent()
        .expect("target directory")
        .to_owned();
    assert!(bin_dir.join("res-functions").is_file());
    let state = std::env::temp_dir().join(format!("res-demo-test-{}", std::process::id()));
    let (functions_port, status_port) = (free_port(), free_port());
    let output = Command::new(env!("CARGO_BIN_EXE_res-demo"))
        // Longer than the widest gap of the failing detector's schedule (`*/40` seconds: :00 and
        // :40, 40 s apart) plus start-up, so it fails at least once whatever the minute.
        .args(["demo", "--for", "50", "--bin-dir"])
        .arg(&bin_dir)
        .arg("--state-dir")
        .arg(&state)
        .args(["--functions-port", &functions_port.to_string()])
        .args(["--status-port", &status_port.to_string()])
        .env_remove("DATABASE_URL")
        .output()
        .expect("the demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for expected in [
        "RES is running locally",
        &format!("http://127.0.0.1:{status_port}/"),
        "plan why",
        "Riyadh Olaya / Queue length",
        "Berlin Mitte / Morning stock count",
        "res-runner stopped",
        "res-functions stopped",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in:\n{stdout}");
    }
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains(" next ")).collect();
    assert!(
        lines.iter().any(|l| l.contains("completed")),
        "executions were shown:\n{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Camera health") && l.contains("failed")),
        "the failing detector shows as failed:\n{stdout}"
    );
    // The demo is configured with documents, and the rule whose schedule never fires in its
    // window is caught when its document is applied, not at run time.
    for expected in [
        "resctl apply -f infra/local/demo/catalogue.yaml: Applied as configuration revision",
        "resctl apply -f infra/local/demo/brand.yaml: Applied as configuration revision",
        "warning: brand.branches[1].rules[\"Morning stock count\"]: never fires in its window",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in:\n{stdout}");
    }
    // Nothing is left listening, and PostgreSQL's directory goes with the demo.
    let deadline = Instant::now() + Duration::from_secs(15);
    while state.join("pg").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        !state.join("pg").exists(),
        "PostgreSQL was stopped and removed"
    );
    for port in [functions_port, status_port] {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "port {port} is free again"
        );
    }
    std::fs::remove_dir_all(&state).ok();
}
