//! The kernel's counters of lost connections, read around a run: a request that got no
//! answer at all (`ETIMEDOUT`) leaves no trace in `serve` or PostgreSQL, only here. And the
//! one kernel setting the fleet bench changes for its run.

const BACKLOG: &str = "/proc/sys/net/core/netdev_max_backlog";

/// Counters summed over the machine (every CPU, every socket).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Packets dropped because a CPU's input backlog (`net.core.netdev_max_backlog`) was
    /// full; loopback traffic goes through it too.
    pub backlog_drops: u64,
    /// Connections ended by their timers (unanswered keep-alive probes or retransmissions).
    pub aborts_on_timeout: u64,
    /// Keep-alive probes sent.
    pub keepalive_probes: u64,
    pub listen_drops: u64,
}

/// The counters now (zero where this kernel does not say).
pub fn read() -> Counters {
    let softnet = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    let backlog_drops = softnet
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .filter_map(|hex| u64::from_str_radix(hex, 16).ok())
        .sum();
    let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let tcp_ext = tcp_ext(&netstat);
    let field = |name: &str| tcp_ext.get(name).copied().unwrap_or(0);
    Counters {
        backlog_drops,
        aborts_on_timeout: field("TCPAbortOnTimeout"),
        keepalive_probes: field("TCPKeepAlive"),
        listen_drops: field("ListenDrops"),
    }
}

/// `/proc/net/netstat`'s `TcpExt:` lines: one of names, then one of values.
fn tcp_ext(netstat: &str) -> std::collections::HashMap<String, u64> {
    let lines: Vec<&str> = netstat
        .lines()
        .filter(|l| l.starts_with("TcpExt:"))
        .collect();
    let [names, values] = lines[..] else {
        return Default::default();
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .skip(1)
        .filter_map(|(name, value)| Some((name.to_owned(), value.parse().ok()?)))
        .collect()
}

/// Prints what changed between two readings.
pub fn report(before: Counters, after: Counters) {
    println!(
        "kernel over the run: {} packets dropped at a full input backlog \
         (net.core.netdev_max_backlog {}), {} connections aborted by a timer, {} keep-alive \
         probes, {} listen drops",
        after.backlog_drops - before.backlog_drops,
        std::fs::read_to_string("/proc/sys/net/core/netdev_max_backlog")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "?".to_owned()),
        after.aborts_on_timeout - before.aborts_on_timeout,
        after.keepalive_probes - before.keepalive_probes,
        after.listen_drops - before.listen_drops,
    );
}

/// A larger input backlog for this run, restored when dropped.
///
/// Every packet between two processes on this machine goes through a CPU's input backlog,
/// both ends' alike. With HZ=250 the kernel fires the keep-alive timers of a minute's idle
/// in 2-second batches, and at 12,000 waiting sites (runner and `serve` both probing) a
/// batch overflowed the default 1,000: 121 probes or answers dropped and 67 connections
/// aborted after four unanswered probes, where the same run with reqwest's 15-second probes
/// (256 ms batches) dropped none. Across a network the sites' probes arrive spread out, so
/// this loss is the test box's, not a fleet's. It is not the only cause of such aborts: a
/// run with 40 turns aborted 46 connections with nothing dropped (docs/benchmarks.md).
pub struct RaisedBacklog {
    earlier: Option<String>,
}

impl RaisedBacklog {
    /// Raises the backlog to at least `packets` where this process may (root); else says
    /// so and changes nothing.
    pub fn to(packets: u32) -> RaisedBacklog {
        let earlier = std::fs::read_to_string(BACKLOG).ok();
        let current: u32 = earlier
            .as_deref()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if current >= packets {
            return RaisedBacklog { earlier: None };
        }
        match std::fs::write(BACKLOG, packets.to_string()) {
            Ok(()) => RaisedBacklog { earlier },
            Err(error) => {
                println!("cannot raise net.core.netdev_max_backlog to {packets}: {error}");
                RaisedBacklog { earlier: None }
            }
        }
    }
}

impl Drop for RaisedBacklog {
    fn drop(&mut self) {
        if let Some(earlier) = &self.earlier {
            let _ = std::fs::write(BACKLOG, earlier.trim());
        }
    }
}
