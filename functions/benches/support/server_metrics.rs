//! What `serve` itself measured over a benchmark's window, from its Prometheus histograms:
//! per function, the time to answer (from the request's arrival to its answer), the part
//! of it spent waiting for a turn, and how long the turn was then held. Set beside the
//! generator's own timings, it tells time inside the service from time in the generator
//! and on the way.

use std::collections::BTreeMap;

/// One histogram series per function: the cumulative count at each bucket bound.
type Buckets = BTreeMap<String, Vec<(f64, f64)>>;

/// The request-duration and turn-wait histograms of one scrape.
pub struct Scrape {
    duration: Buckets,
    turn: Buckets,
    held: Buckets,
}

/// Reads `serve`'s metrics from `url` (its `--metrics-bind`).
pub async fn scrape(url: &str) -> Scrape {
    let text = reqwest::get(url)
        .await
        .expect("the metrics endpoint answers")
        .text()
        .await
        .expect("the metrics text");
    Scrape {
        duration: buckets(&text, "res_functions_request_duration_seconds_bucket"),
        turn: buckets(&text, "res_functions_request_turn_wait_seconds_bucket"),
        held: buckets(&text, "res_functions_request_turn_held_seconds_bucket"),
    }
}

/// The sum of several `serve`s' metrics (one port shared with `--reuse-port`).
pub async fn scrape_all(urls: &[String]) -> Scrape {
    let mut all = Scrape {
        duration: Buckets::new(),
        turn: Buckets::new(),
        held: Buckets::new(),
    };
    for url in urls {
        let one = scrape(url).await;
        add(&mut all.duration, one.duration);
        add(&mut all.turn, one.turn);
        add(&mut all.held, one.held);
    }
    all
}

/// Adds `more`'s counts to `into`'s, bucket by bucket.
fn add(into: &mut Buckets, more: Buckets) {
    for (function, series) in more {
        let mine = into.entry(function).or_default();
        for (bound, count) in series {
            match mine.iter_mut().find(|(b, _)| *b == bound) {
                Some((_, total)) => *total += count,
                None => mine.push((bound, count)),
            }
        }
        mine.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
}

fn buckets(text: &str, name: &str) -> Buckets {
    let mut all = Buckets::new();
    for line in text.lines().filter(|l| l.starts_with(name)) {
        let label = |key: &str| {
            let start = line.find(&format!("{key}=\""))? + key.len() + 2;
            let end = line[start..].find('"')? + start;
            Some(line[start..end].to_owned())
        };
        let (Some(function), Some(le)) = (label("function"), label("le")) else {
            continue;
        };
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().expect("a bucket bound")
        };
        let count: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|c| c.parse().ok())
            .expect("a bucket count");
        all.entry(function).or_default().push((bound, count));
    }
    all
}

/// The `p` quantile of the observations between two scrapes, interpolated within its
/// bucket as Prometheus's `histogram_quantile` does; `None` without observations.
fn quantile(before: &[(f64, f64)], after: &[(f64, f64)], p: f64) -> Option<f64> {
    let counts: Vec<(f64, f64)> = after
        .iter()
        .map(|(bound, count)| {
            let earlier = before
                .iter()
                .find(|(b, _)| b == bound)
                .map_or(0.0, |(_, c)| *c);
            (*bound, count - earlier)
        })
        .collect();
    let total = counts.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = p * total;
    let mut lower = (0.0, 0.0);
    for (bound, count) in counts {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let share = (rank - lower.1) / (count - lower.1).max(f64::MIN_POSITIVE);
            return Some(lower.0 + (bound - lower.0) * share);
        }
        lower = (bound, count);
    }
    None
}

/// Prints, per function answered in the window, serve's p50 and p99 answer time, turn
/// wait and turn held.
pub fn report(before: &Scrape, after: &Scrape) {
    println!(
        "{:<36} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "inside serve", "answer p50", "answer p99", "turn p50", "turn p99", "held p50", "held p99"
    );
    let none = Vec::new();
    for (function, series) in &after.duration {
        let earlier = before.duration.get(function).unwrap_or(&none);
        let Some(p50) = quantile(earlier, series, 0.5) else {
            continue;
        };
        let p99 = quantile(earlier, series, 0.99).unwrap_or(p50);
        let at = |earlier: &Buckets, later: &Buckets, p| {
            later
                .get(function)
                .and_then(|s| quantile(earlier.get(function).unwrap_or(&none), s, p))
                .map_or("-".to_owned(), |t| format!("{:.1} ms", t * 1_000.0))
        };
        println!(
            "{:<36} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
            function,
            format!("{:.1} ms", p50 * 1_000.0),
            format!("{:.1} ms", p99 * 1_000.0),
            at(&before.turn, &after.turn, 0.5),
            at(&before.turn, &after.turn, 0.99),
            at(&before.held, &after.held, 0.5),
            at(&before.held, &after.held, 0.99)
        );
    }
}
