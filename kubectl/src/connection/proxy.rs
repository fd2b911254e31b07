//! The proxy requests to the API server go through, chosen as kubectl (client-go) chooses: the
//! kubeconfig cluster's `proxy-url` when it has one; else `HTTPS_PROXY` (or `https_proxy`),
//! unless the server's host is loopback or named by `NO_PROXY` (or `no_proxy`), by Go's rules
//! (`golang.org/x/net/http/httpproxy`, `config.useProxy`): `*` matches every host; an IP matches
//! itself and a CIDR its addresses; a name matches itself and its subdomains, and with a leading
//! `.` its subdomains only; an entry with a port matches only that port.
//!
//! kube-rs would read the same variables but tests `NO_PROXY` against the proxy's own address,
//! so a usual `NO_PROXY=localhost,127.0.0.1` with a local proxy would turn the proxy off for every
//! server; the choice is therefore made here and set on the config.

use std::net::IpAddr;

/// The proxy for `server` (the kubeconfig cluster's `server` URL): `proxy_url` (the cluster's
/// `proxy-url`) when given, else the environment's unless `no_proxy` excludes the host.
pub fn choose(
    server: &http::Uri,
    proxy_url: Option<&str>,
    https_proxy: Option<&str>,
    no_proxy: Option<&str>,
) -> Option<String> {
    if let Some(url) = proxy_url.filter(|u| !u.is_empty()) {
        return Some(url.to_owned());
    }
    let proxy = https_proxy.filter(|p| !p.is_empty())?;
    let host = server.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = server
        .port_u16()
        .unwrap_or(if server.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    if host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    {
        return None;
    }
    let excluded = no_proxy
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| excludes(entry, host, port));
    (!excluded).then(|| proxy.to_owned())
}

/// The environment's `HTTPS_PROXY` and `NO_PROXY`, upper case first, empty as unset.
pub fn from_env() -> (Option<String>, Option<String>) {
    let var = |upper: &str, lower: &str| {
        std::env::var(upper)
            .ok()
            .filter(|v| !v.is_empty())
            .or_else(|| std::env::var(lower).ok().filter(|v| !v.is_empty()))
    };
    (
        var("HTTPS_PROXY", "https_proxy"),
        var("NO_PROXY", "no_proxy"),
    )
}

/// Whether one `NO_PROXY` entry names `host:port`.
fn excludes(entry: &str, host: &str, port: u16) -> bool {
    if entry == "*" {
        return true;
    }
    if let Ok(net) = entry.parse::<Cidr>() {
        return host.parse::<IpAddr>().is_ok_and(|ip| net.contains(ip));
    }
    if let Some(ip) = ip_of(entry) {
        return host.parse::<IpAddr>() == Ok(ip);
    }
    let (name, entry_port) = match entry.rsplit_once(':') {
        Some((n, p)) if !n.contains(':') || n.ends_with(']') => match p.parse::<u16>() {
            Ok(p) => (n, Some(p)),
            Err(_) => return false,
        },
        _ => (entry, None),
    };
    if entry_port.is_some_and(|p| p != port) {
        return false;
    }
    if let Some(ip) = ip_of(name) {
        return host.parse::<IpAddr>() == Ok(ip);
    }
    let host = host.to_ascii_lowercase();
    let name = name.to_ascii_lowercase();
    match name.strip_prefix('.') {
        Some(suffix) => host.ends_with(&format!(".{suffix}")),
        None => {
            let name = name.strip_prefix("*.").unwrap_or(&name);
            host == name || host.ends_with(&format!(".{name}"))
        }
    }
}

/// `s` as an IP address, with or without IPv6 brackets.
fn ip_of(s: &str) -> Option<IpAddr> {
    s.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// An IP network in CIDR notation.
struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Cidr {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let (ip, prefix) = s.split_once('/').ok_or(())?;
        let network: IpAddr = ip.parse().map_err(|_| ())?;
        let prefix: u8 = prefix.parse().map_err(|_| ())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        (prefix <= max)
            .then_some(Cidr { network, prefix })
            .ok_or(())
    }
}

impl Cidr {
    fn contains(&self, ip: IpAddr) -> bool {
        let bits = |ip: IpAddr| -> (u128, u32) {
            match ip {
                IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
                IpAddr::V6(v6) => (u128::from(v6), 128),
            }
        };
        let ((net, width), (addr, other)) = (bits(self.network), bits(ip));
        if width != other {
            return false;
        }
        let shift = width - u32::from(self.prefix);
        shift >= width || net >> shift == addr >> shift
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via(server: &str, no_proxy: &str) -> Option<String> {
        choose(
            &server.parse().unwrap(),
            None,
            Some("http://proxy.corp:3128"),
            Some(no_proxy),
        )
    }

    #[test]
    fn the_kubeconfig_proxy_url_wins_over_the_environment_and_no_proxy() {
        let server = "https://10.0.0.1:6443".parse().unwrap();
        assert_eq!(
            choose(
                &server,
                Some("socks5://jump:1080"),
                Some("http://p:1"),
                Some("*")
            ),
            Some("socks5://jump:1080".to_owned())
        );
        assert_eq!(choose(&server, None, None, None), None);
        assert_eq!(choose(&server, Some(""), Some(""), None), None);
    }

    #[test]
    fn no_proxy_follows_gos_rules() {
        const PROXY: Option<&str> = Some("http://proxy.corp:3128");
        const DIRECT: Option<&str> = None;
        for (server, no_proxy, want) in [
            ("https://api.prod.example:6443", "", PROXY),
            ("https://api.prod.example:6443", "*", DIRECT),
            ("https://api.prod.example:6443", "ample", PROXY),
            ("https://api.prod.example:6443", "example", DIRECT),
            ("https://api.prod.example:6443", "prod.example", DIRECT),
            ("https://prod.example:6443", "prod.example", DIRECT),
            ("https://prod.example:6443", ".prod.example", PROXY),
            ("https://api.prod.example:6443", ".prod.example", DIRECT),
            ("https://api.prod.example:6443", "*.prod.example", DIRECT),
            ("https://API.Prod.Example:6443", "prod.example", DIRECT),
            ("https://api.prod.example:6443", "prod.example:443", PROXY),
            ("https://api.prod.example:6443", "prod.example:6443", DIRECT),
            ("https://api.prod.example", "prod.example:443", DIRECT),
            ("https://10.0.0.1:6443", "10.0.0.0/8", DIRECT),
            ("https://11.0.0.1:6443", "10.0.0.0/8", PROXY),
            ("https://10.0.0.1:6443", "10.0.0.1", DIRECT),
            ("https://10.0.0.1:6443", "10.0.0.1:6443", DIRECT),
            ("https://10.0.0.1:6443", "10.0.0.1:443", PROXY),
            ("https://[fd00::1]:6443", "fd00::/64", DIRECT),
            ("https://[fd00::1]:6443", "fd01::/64", PROXY),
            ("https://[fd00::1]:6443", "fd00::1", DIRECT),
            ("https://[fd00::1]:6443", "[fd00::1]:6443", DIRECT),
            ("https://[fd00::1]:6443", "[fd00::1]:443", PROXY),
            (
                "https://api.prod.example:6443",
                "localhost, 127.0.0.1 ,prod.example",
                DIRECT,
            ),
            // Loopback never goes through the proxy, as in Go.
            ("https://127.0.0.1:6443", "", DIRECT),
            ("https://localhost:6443", "", DIRECT),
            ("https://[::1]:6443", "", DIRECT),
        ] {
            assert_eq!(
                via(server, no_proxy).as_deref(),
                want,
                "{server} NO_PROXY={no_proxy:?}"
            );
        }
    }

    #[test]
    fn a_proxy_on_localhost_stays_on_when_no_proxy_names_localhost() {
        let server = "https://api.prod.example:6443".parse().unwrap();
        assert_eq!(
            choose(
                &server,
                None,
                Some("http://127.0.0.1:3128"),
                Some("localhost,127.0.0.1")
            ),
            Some("http://127.0.0.1:3128".to_owned())
        );
    }
}
