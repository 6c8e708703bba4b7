//! A network namespace joined to this host by a veth pair, for bad-link tests: a runner
//! runs inside it (`ip netns exec`), the functions listen on the host's end, and the link
//! between them can be made to drop packets (nftables inside the namespace) or slowed
//! (`tc tbf`). Needs root (CAP_NET_ADMIN), as CI has. Traffic stays between this host and
//! the namespace; the namespace, its veth pair and its rules go when the value drops.
//!
//! This machine's kernel has no `netem` qdisc (CONFIG_NET_SCH_NETEM is off), so latency
//! cannot be added here; loss and drops are made with nftables, which it has.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// One of the namespace's TCP connections, as /proc/net/tcp shows it.
#[derive(Debug)]
struct Socket {
    local_port: u16,
    probes_out: u32,
}

/// A namespace and its link to the host.
#[derive(Debug)]
pub struct Netns {
    /// `res-<id>`.
    pub name: String,
    /// The host's end of the link: bind servers the namespace should reach here.
    pub host: Ipv4Addr,
    /// The namespace's end.
    pub inside: Ipv4Addr,
    host_link: String,
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    crate::processes::run(
        Command::new(program).args(args),
        &format!("{program} {}", args.join(" ")),
    )
}

impl Netns {
    /// A fresh namespace with a /30 of 10.231.0.0/16 shared with the host; panics naming
    /// what failed (not root: "Operation not permitted").
    pub fn create() -> Netns {
        res_setup::require(&[res_setup::Tool::Nft], "the bad-link tests")
            .unwrap_or_else(|e| panic!("{e}"));
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Unique among this machine's test processes: the pid's low bits and a counter.
        let id = (std::process::id() & 0xfff) << 2 | (NEXT.fetch_add(1, Ordering::Relaxed) & 3);
        let (third, fourth) = ((id >> 6) as u8, ((id & 0x3f) << 2) as u8);
        let host = Ipv4Addr::new(10, 231, third, fourth + 1);
        let inside = Ipv4Addr::new(10, 231, third, fourth + 2);
        let name = format!("res-{id:x}");
        let host_link = format!("resh{id:x}");
        let inside_link = format!("resn{id:x}");
        let netns = Netns {
            name: name.clone(),
            host,
            inside,
            host_link: host_link.clone(),
        };
        let made = (|| {
            run("ip", &["netns", "add", &name])?;
            run(
                "ip",
                &[
                    "link",
                    "add",
                    &host_link,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &inside_link,
                ],
            )?;
            run("ip", &["link", "set", &inside_link, "netns", &name])?;
            run(
                "ip",
                &["addr", "add", &format!("{host}/30"), "dev", &host_link],
            )?;
            run("ip", &["link", "set", &host_link, "up"])?;
            let exec = |args: &[&str]| {
                let mut all = vec!["netns", "exec", name.as_str(), "ip"];
                all.extend_from_slice(args);
                run("ip", &all)
            };
            exec(&["addr", "add", &format!("{inside}/30"), "dev", &inside_link])?;
            exec(&["link", "set", &inside_link, "up"])?;
            exec(&["link", "set", "lo", "up"])
        })();
        if let Err(error) = made {
            panic!("cannot make network namespace {name} (root is needed): {error}");
        }
        netns
    }

    /// Runs `nft` inside the namespace with `ruleset` (nft's own syntax).
    pub fn nft(&self, ruleset: &str) {
        let nft = res_setup::Tool::Nft.find().expect("nft is installed");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(nft)
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("nft runs");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin
                .write_all(ruleset.as_bytes())
                .expect("ruleset written");
        }
        let output = child.wait_with_output().expect("nft ends");
        assert!(
            output.status.success(),
            "nft -f: {}\n{ruleset}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The local ports of the namespace's established TCP connections to `port` on the
    /// host's end.
    pub fn connections_to(&self, port: u16) -> Vec<u16> {
        self.sockets_to(port)
            .into_iter()
            .map(|s| s.local_port)
            .collect()
    }

    /// The keep-alive probes sent and not yet answered on the namespace's established
    /// connection from `local_port` to `port` on the host's end; none once it has ended.
    pub fn probes_unanswered(&self, local_port: u16, port: u16) -> Option<u32> {
        self.sockets_to(port)
            .into_iter()
            .find(|s| s.local_port == local_port)
            .map(|s| s.probes_out)
    }

    /// The namespace's established TCP connections to `port` on the host's end (from the
    /// namespace's /proc/net/tcp, read through a process inside it).
    fn sockets_to(&self, port: u16) -> Vec<Socket> {
        let output = Command::new("ip")
            .args(["netns", "exec", &self.name, "cat", "/proc/net/tcp"])
            .output()
            .expect("cat runs");
        let remote = format!("{:08X}:{port:04X}", u32::from_le_bytes(self.host.octets()));
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // local, remote, state (01: established), …, the "timeout" column: the
                // kernel's icsk_probes_out, keep-alive probes unanswered.
                let (local, far, state) = (fields.get(1)?, fields.get(2)?, fields.get(3)?);
                if *far != remote || *state != "01" {
                    return None;
                }
                Some(Socket {
                    local_port: u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?,
                    probes_out: fields.get(8)?.parse().ok()?,
                })
            })
            .collect()
    }

    /// Drops every packet the namespace sends from `ports`, until [`Netns::unmute`]: a
    /// link that loses what the site says while it hears the other end.
    pub fn mute(&self, ports: &[u16]) {
        let set = port_set(ports);
        self.nft(&format!(
            "table inet res_mute {{\n\
               chain output {{ type filter hook output priority 0; tcp sport {{ {set} }} drop; }}\n\
             }}\n"
        ));
    }

    /// Lets through again what [`Netns::mute`] dropped.
    pub fn unmute(&self) {
        self.nft("delete table inet res_mute\n");
    }

    /// Drops, both ways, every packet of the namespace's connections from `ports`: what a
    /// NAT box that forgot them does. New connections pass.
    pub fn blackhole(&self, ports: &[u16]) {
        let set = port_set(ports);
        self.nft(&format!(
            "table inet res_blackhole {{\n\
               chain output {{ type filter hook output priority 0; tcp sport {{ {set} }} drop; }}\n\
               chain input {{ type filter hook input priority 0; tcp dport {{ {set} }} drop; }}\n\
             }}\n"
        ));
    }
}

impl Netns {
    /// How many packets [`Netns::lose`] dropped so far (nft's counters).
    pub fn lost(&self) -> u64 {
        let nft = res_setup::Tool::Nft.find().expect("nft is installed");
        let output = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(nft)
            .args(["list", "table", "inet", "res_loss"])
            .output()
            .expect("nft runs");
        let text = String::from_utf8_lossy(&output.stdout);
        let words: Vec<&str> = text.split_whitespace().collect();
        words
            .windows(2)
            .filter(|pair| pair[0] == "packets")
            .filter_map(|pair| pair[1].parse::<u64>().ok())
            .sum()
    }

    /// Limits the link to `kbit` kbit/s each way (`tc tbf` on both ends of the veth pair).
    pub fn limit_rate(&self, kbit: u32) {
        let rate = format!("{kbit}kbit");
        let tbf = [
            "root", "tbf", "rate", &rate, "burst", "4kb", "latency", "2s",
        ];
        let mut host = vec!["qdisc", "add", "dev", self.host_link.as_str()];
        host.extend_from_slice(&tbf);
        run("tc", &host).unwrap_or_else(|e| panic!("{e}"));
        let inside = self.host_link.replacen("resh", "resn", 1);
        let mut args = vec![
            "netns",
            "exec",
            self.name.as_str(),
            "tc",
            "qdisc",
            "add",
            "dev",
        ];
        args.push(&inside);
        args.extend_from_slice(&tbf);
        run("ip", &args).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Drops `percent` % of the namespace's packets each way, at random.
    pub fn lose(&self, percent: u8) {
        self.nft(&format!(
            "table inet res_loss {{\n\
               chain output {{ type filter hook output priority 0; numgen random mod 100 < {percent} counter drop; }}\n\
               chain input {{ type filter hook input priority 0; numgen random mod 100 < {percent} counter drop; }}\n\
             }}\n"
        ));
    }
}

/// Ports as the elements of an nft set.
fn port_set(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The namespace's end of the veth goes with the namespace, and the host's with it.
        let _ = run("ip", &["netns", "del", &self.name]);
        let _ = run("ip", &["link", "del", &self.host_link]);
    }
}
