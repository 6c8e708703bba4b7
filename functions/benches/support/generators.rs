//! The fleet generator split across processes: one process may hold 20,000 open files
//! here, and each waiting site holds a connection, so a fleet past ~18,000 sites needs
//! several. The bench starts copies of itself (`--generator FILE`), each running a share of
//! the sites from the same moment; each writes every call it made to a file the parent
//! reads once they end. Times are kept from one shared wall-clock start, so the parent can
//! cut the measured window out of all of them alike.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::sites::{Behaviour, CallRecord, Fleet, Site, run_site};

/// What one generator process runs.
#[derive(Debug, Serialize, Deserialize)]
pub struct Assignment {
    pub base: String,
    /// Its share of the bound on requests in flight.
    pub in_flight: usize,
    pub behaviour: Behaviour,
    /// The shared start, milliseconds since the epoch: every call's `at` counts from it.
    pub start_unix_ms: u64,
    /// How long after the start its sites stop.
    pub run_for: Duration,
    pub sites: Vec<Site>,
    /// The loopback address its connections come from (each its own ephemeral ports);
    /// none when it is the only generator. A socket bound to an address before it connects
    /// has its port found by `bind`, which searches the address's bound ports: with 10,000
    /// connections open that search was half the generator's CPU (perf: `inet_csk_get_port`,
    /// `inet_bhash2_conflict`), where `connect` alone picks a port cheaply, as a site does.
    pub source: Option<std::net::IpAddr>,
    /// Where its calls go, one JSON line each.
    pub calls: PathBuf,
}

/// One call as a line of the calls file.
#[derive(Serialize, Deserialize)]
struct CallLine {
    function: String,
    at_us: u64,
    took_us: u64,
    status: u16,
}

/// A running generator process; killed if the bench ends before it does.
pub struct Generator {
    child: Child,
    calls: PathBuf,
}

/// Starts one generator process per assignment (each written beside its calls file).
pub fn spawn(assignments: &[Assignment]) -> Vec<Generator> {
    assignments
        .iter()
        .map(|assignment| {
            let path = assignment.calls.with_extension("assignment.json");
            let text = serde_json::to_vec(assignment).expect("an assignment in JSON");
            std::fs::write(&path, text).expect("the assignment file");
            let child = Command::new(std::env::current_exe().expect("the bench's own path"))
                .args(["--bench", "--generator"])
                .arg(&path)
                .stdin(Stdio::null())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("a generator process");
            Generator {
                child,
                calls: assignment.calls.clone(),
            }
        })
        .collect()
}

impl Generator {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to end and reads its calls. A generator that failed fails
    /// the bench: its share of the fleet would be missing from every figure.
    pub fn finish(mut self) -> Vec<CallRecord> {
        let status = self.child.wait().expect("the generator's exit");
        assert!(status.success(), "a generator process failed: {status}");
        read_calls(&self.calls)
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The path after `--generator`, when this process is a generator.
pub fn assignment_path() -> Option<PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--generator")?;
    args.get(at + 1).map(PathBuf::from)
}

/// A generator process's whole life: run the assigned sites until their end, then write
/// every call they made.
pub async fn run(path: &Path) {
    let text = std::fs::read(path).expect("the assignment file");
    let assignment: Assignment = serde_json::from_slice(&text).expect("an assignment");
    let start = UNIX_EPOCH + Duration::from_millis(assignment.start_unix_ms);
    // The shared start as this process's Instant (it may lie a moment in the past).
    let since_start = SystemTime::now()
        .duration_since(start)
        .unwrap_or(Duration::ZERO);
    let started = Instant::now() - since_start;
    let fleet = Fleet::starting_at(
        &assignment.base,
        assignment.in_flight,
        started,
        assignment.source,
    );
    let until = started + assignment.run_for;
    let mut tasks = tokio::task::JoinSet::new();
    for site in assignment.sites {
        tasks.spawn(run_site(
            Arc::clone(&fleet),
            site,
            assignment.behaviour,
            until,
        ));
    }
    tokio::time::sleep_until(until.into()).await;
    tasks.abort_all();
    write_calls(&assignment.calls, &fleet.calls());
}

fn write_calls(path: &Path, calls: &[CallRecord]) {
    let file = std::fs::File::create(path).expect("the calls file");
    let mut out = BufWriter::new(file);
    for call in calls {
        let line = CallLine {
            function: call.function.to_owned(),
            at_us: call.at.as_micros() as u64,
            took_us: call.took.as_micros() as u64,
            status: call.status,
        };
        serde_json::to_writer(&mut out, &line).expect("a call line");
        out.write_all(b"\n").expect("a call line");
    }
    out.flush().expect("the calls file written");
}

fn read_calls(path: &Path) -> Vec<CallRecord> {
    let file = std::fs::File::open(path).expect("the calls file");
    // Records name their function by a `&'static str`: the few names are leaked once.
    let mut names: HashMap<String, &'static str> = HashMap::new();
    BufReader::new(file)
        .lines()
        .map(|line| {
            let line: CallLine = serde_json::from_str(&line.expect("a line")).expect("a call line");
            let function = *names
                .entry(line.function.clone())
                .or_insert_with(|| Box::leak(line.function.into_boxed_str()));
            CallRecord {
                function,
                at: Duration::from_micros(line.at_us),
                took: Duration::from_micros(line.took_us),
                status: line.status,
            }
        })
        .collect()
}
