//! Worst-case sweep: times `next_run` on thousands of random rules (all shapes, all test
//! zones, instants around DST changes and leap days) and prints the distribution, beside
//! the naive croner iteration on the same inputs. Run with `cargo bench --bench sweep`.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use common::{COMMON, Case, HARD};

const RULES: usize = 20_000;
const NAIVE_RULES: usize = 2_000;
const ZONES: [&str; 7] = [
    "Asia/Riyadh",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "Australia/Lord_Howe",
    "America/Santiago",
];

/// A small deterministic generator, so every run sweeps the same rules.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn field(&mut self, min: u64, max: u64, star_weight: u64) -> String {
        let span = max - min;
        let max_step = if max == 7 { 6 } else { span };
        match self.below(star_weight + 5) {
            0 => format!("*/{}", 1 + self.below(max_step)),
            1 => (min + self.below(span + 1)).to_string(),
            2 => {
                let a = min + self.below(span + 1);
                format!("{a}-{}", (a + self.below(span + 1)).min(max))
            }
            3 => {
                let a = min + self.below(span + 1);
                let b = (a + self.below(span + 1)).min(max);
                format!("{a}-{b}/{}", 1 + self.below(max_step))
            }
            4 => format!(
                "{},{}",
                min + self.below(span + 1),
                min + self.below(span + 1)
            ),
            _ => "*".to_owned(),
        }
    }

    fn time(&mut self) -> String {
        format!("{:02}:{:02}", self.below(24), self.below(4) * 15)
    }
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn random_case(rng: &mut Rng) -> Case {
    let cron = format!(
        "{} {} {} {} {}",
        rng.field(0, 59, 2),
        rng.field(0, 23, 3),
        rng.field(1, 31, 8),
        rng.field(1, 12, 8),
        rng.field(0, 7, 6)
    );
    let window = match rng.below(4) {
        0 => None,
        _ => Some((leak(rng.time()), leak(rng.time()))),
    };
    let base: DateTime<Utc> = "2024-02-27T00:00:00Z".parse().expect("valid");
    // Spread over 2024-2036; one in three lands in a March or October/November week.
    let mut now = base + TimeDelta::seconds(rng.below(12 * 365 * 86_400) as i64);
    if rng.below(3) == 0 {
        let year = 2024 + rng.below(12) as i32;
        let month = [3, 4, 9, 10, 11][rng.below(5) as usize];
        let start = format!("{year}-{month:02}-01T00:00:00Z");
        now = start.parse::<DateTime<Utc>>().expect("valid")
            + TimeDelta::seconds(rng.below(31 * 86_400) as i64);
    }
    Case {
        name: "random",
        cron: leak(cron),
        window,
        tz: ZONES[rng.below(ZONES.len() as u64) as usize],
        now: leak(now.to_rfc3339()),
    }
}

/// Mean time of one call, over `reps` calls.
fn time_per_call(reps: u32, mut call: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..reps {
        call();
    }
    start.elapsed() / reps
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn report(label: &str, timings: &mut [(Duration, usize)], cases: &[Case]) {
    timings.sort();
    let sorted: Vec<Duration> = timings.iter().map(|t| t.0).collect();
    println!(
        "{label:>6}: n={} p50={:?} p90={:?} p99={:?} p99.9={:?} max={:?}",
        sorted.len(),
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.9),
        percentile(&sorted, 0.99),
        percentile(&sorted, 0.999),
        percentile(&sorted, 1.0),
    );
    for (time, index) in timings.iter().rev().take(3) {
        let case = &cases[*index];
        println!(
            "        slowest {time:?}: {} '{}' window {:?} {} at {}",
            case.name, case.cron, case.window, case.tz, case.now
        );
    }
}

fn main() {
    // `cargo test --benches` runs this binary too; only sweep when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // The named common and hard rules first, so the worst case includes them.
    let cases: Vec<Case> = COMMON
        .iter()
        .chain(HARD)
        .map(Case::clone)
        .chain((0..RULES).map(|_| random_case(&mut rng)))
        .collect();
    let mut ours = Vec::with_capacity(RULES);
    let mut naive = Vec::with_capacity(NAIVE_RULES);
    let mut ours_on_naive_inputs = Vec::with_capacity(NAIVE_RULES);
    let (mut compared, mut agreed) = (0, 0);
    for (index, case) in cases.iter().enumerate() {
        let Ok(schedule) = case.schedule() else {
            continue; // An impossible date without a window: refused, nothing to time.
        };
        let now = case.now();
        let took = time_per_call(50, || {
            let _ = black_box(schedule.next_run(black_box(now), false));
        });
        ours.push((took, index));
        if index < NAIVE_RULES {
            let baseline = case.naive();
            let naive_took = time_per_call(3, || {
                let _ = black_box(baseline.next_run(black_box(now)));
            });
            naive.push((naive_took, index));
            // Only non-degenerate answers are comparable: naive has no degenerate rule.
            if let (Ok(answer), Some(found)) =
                (schedule.next_run(now, false), baseline.next_run(now))
                && !answer.degenerate
            {
                compared += 1;
                agreed += usize::from(answer.next_run_time == found);
            }
            ours_on_naive_inputs.push((took, index));
        }
    }
    println!(
        "next_run over {} rules, {RULES} of them random (mean of 50 calls per rule):",
        cases.len()
    );
    report("ours", &mut ours, &cases);
    println!("the first {NAIVE_RULES} of them, naive croner iteration (mean of 3 calls):");
    report("naive", &mut naive, &cases);
    report("ours", &mut ours_on_naive_inputs, &cases);
    println!("answers equal on {agreed} of {compared} non-degenerate rules both answered");
}
