//! Where a channel may point: an http(s) URL with a host, and — unless the deployment
//! allows it — not a loopback, private or link-local address, so a brand's admin cannot
//! make the functions call services inside their own network.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why `url` cannot be a channel's target, in words that follow "url: ".
pub(crate) fn refusal(url: &str, allow_private: bool) -> Option<String> {
    let parsed = match Url::parse(url.trim()) {
        Ok(parsed) => parsed,
        Err(error) => return Some(format!("not a URL ({error})")),
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return Some("must start with https:// (or http://)".into());
    }
    let Some(host) = parsed.host() else {
        return Some("must name a host".into());
    };
    if !allow_private && is_internal(&host) {
        return Some(format!(
            "{host} is a loopback, private or link-local address; channels point at services \
             outside (serve --notify-private-targets allows them)"
        ));
    }
    None
}

fn is_internal(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        Host::Ipv4(ip) => internal_v4(*ip),
        Host::Ipv6(ip) => internal_v6(*ip),
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (b & 0xc0) == 64)
}

fn internal_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        // Unique local fc00::/7 and link-local fe80::/10.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || ip.to_ipv4_mapped().is_some_and(internal_v4)
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn outside_services_are_targets_and_inside_ones_are_not_unless_allowed() {
        for fine in [
            "https://hooks.slack.com/services/T0/B0/x",
            "https://alerts.example.com/res",
            "http://203.0.113.7:8080/hook",
            "https://[2001:db8::1]/hook",
        ] {
            assert_eq!(refusal(fine, false), None, "{fine}");
        }
        for inside in [
            "http://127.0.0.1:9000/hook",
            "http://localhost/hook",
            "http://api.localhost/hook",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:10.0.0.1]/",
        ] {
            let why = refusal(inside, false).unwrap_or_default();
            assert!(
                why.contains("loopback, private or link-local"),
                "{inside}: {why}"
            );
            assert_eq!(refusal(inside, true), None, "{inside} when allowed");
        }
        assert!(refusal("ftp://x.example/", true).is_some_and(|w| w.starts_with("must start")));
        assert!(refusal("not a url", true).is_some_and(|w| w.starts_with("not a URL")));
    }
}
