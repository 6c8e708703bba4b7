//! Benchmarks for the schedule rules (filled in with the criterion suite).

fn main() {}
