//! The workflow engine with real executors: an HTTP detector and webhook (axum servers in
//! the test), detection scripts run as child processes, and — for pausing, resuming and
//! violations — the real functions over HTTP on a throwaway PostgreSQL.
mod cloud;
mod flow;
mod programs;
mod secrets;
mod support;
