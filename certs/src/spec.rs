//! What to issue: the names a serving certificate must carry and how long each half of the
//! bundle lives. [`CertSpec`] is plain data; the two constructors cover the in-cluster Service
//! (kube-apiserver dials `https://<service>.<namespace>.svc:443`) and a loopback listener (a test
//! API server dials `https://127.0.0.1:<port>`, and Go's TLS client checks IP SANs only, never the
//! common name).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// Lifetime of a generated CA: ten years, so the webhook configuration's `caBundle` rarely
/// changes.
pub const DEFAULT_CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// Lifetime of a serving (leaf) certificate: one year; rotate it with
/// [`renew_leaf`](crate::renew_leaf) well before that.
pub const DEFAULT_LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How far in the past every certificate's `notBefore` is set, so that a peer whose clock runs a
/// little behind ours still accepts a certificate issued "just now".
pub const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(5 * 60);

/// The subject and lifetimes of a CA + serving certificate pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSpec {
    /// Subject common name of the serving certificate (informational: clients match SANs).
    pub common_name: String,
    /// DNS subject alternative names of the serving certificate.
    pub dns_names: Vec<String>,
    /// IP subject alternative names of the serving certificate.
    pub ip_addresses: Vec<IpAddr>,
    /// How long the CA is valid, counted from issuance.
    pub ca_validity: Duration,
    /// How long the serving certificate is valid, counted from issuance (capped at the CA's
    /// `notAfter`).
    pub leaf_validity: Duration,
}

impl CertSpec {
    /// The names kube-apiserver may use to reach a webhook behind Service `service` in
    /// `namespace`: `service`, `service.namespace`, `service.namespace.svc` and
    /// `service.namespace.svc.cluster.local`; CA valid 10 years, leaf 1 year.
    pub fn for_service(service: &str, namespace: &str) -> Self {
        let svc = format!("{service}.{namespace}.svc");
        Self {
            common_name: svc.clone(),
            dns_names: vec![
                service.to_owned(),
                format!("{service}.{namespace}"),
                format!("{svc}.cluster.local"),
                svc,
            ],
            ip_addresses: Vec::new(),
            ca_validity: DEFAULT_CA_VALIDITY,
            leaf_validity: DEFAULT_LEAF_VALIDITY,
        }
    }

    /// A listener on the loopback interface: DNS SAN `localhost`, IP SANs `127.0.0.1` and `::1`;
    /// CA valid 10 years, leaf 1 year.
    pub fn for_loopback() -> Self {
        Self {
            common_name: "localhost".to_owned(),
            dns_names: vec!["localhost".to_owned()],
            ip_addresses: vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ],
            ca_validity: DEFAULT_CA_VALIDITY,
            leaf_validity: DEFAULT_LEAF_VALIDITY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_spec_names_every_form_the_apiserver_may_dial() {
        let spec = CertSpec::for_service("resize-guard", "kube-system");
        for name in [
            "resize-guard",
            "resize-guard.kube-system",
            "resize-guard.kube-system.svc",
            "resize-guard.kube-system.svc.cluster.local",
        ] {
            assert!(spec.dns_names.iter().any(|n| n == name), "{name} missing");
        }
        assert_eq!(spec.dns_names.len(), 4);
        assert!(spec.ip_addresses.is_empty());
        assert_eq!(spec.common_name, "resize-guard.kube-system.svc");
    }

    #[test]
    fn loopback_spec_carries_ip_sans_for_go_clients() {
        let spec = CertSpec::for_loopback();
        assert!(spec.ip_addresses.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert!(spec.ip_addresses.contains(&IpAddr::V6(Ipv6Addr::LOCALHOST)));
        assert_eq!(spec.dns_names, vec!["localhost".to_owned()]);
    }

    #[test]
    fn default_lifetimes_are_ten_years_for_the_ca_and_one_for_the_leaf() {
        let spec = CertSpec::for_loopback();
        assert_eq!(spec.ca_validity, 10 * spec.leaf_validity);
        assert_eq!(spec.leaf_validity.as_secs(), 365 * 86_400);
    }
}
