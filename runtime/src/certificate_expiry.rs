//! `resize_guard_certificate_expiry_timestamp_seconds{certificate}`: a certificate's `notAfter`,
//! in seconds since the Unix epoch. The webhook exports the serving certificate it serves
//! (webhook/src/metrics.rs), the controller's leader the stored serving certificate and the CA
//! (controller/src/metrics.rs): one family with one label, so one rule
//! (deploy/components/monitoring/prometheus-rule.yaml) reads both programs alike.

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Which certificate an expiry is about.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CertificateLabels {
    /// `serving` or `ca`.
    pub certificate: String,
}

/// The family; clones share their series.
#[derive(Debug, Clone, Default)]
pub struct CertificateExpiry(Family<CertificateLabels, Gauge>);

impl CertificateExpiry {
    /// Registers the family in `registry` (the program's `resize_guard` one), with `help`
    /// saying which certificates this program reports.
    pub fn register(&self, registry: &mut Registry, help: &str) {
        registry.register("certificate_expiry_timestamp_seconds", help, self.0.clone());
    }

    /// Records `certificate`'s `notAfter` (one before the epoch as 0).
    pub fn set(&self, certificate: &str, not_after: SystemTime) {
        let seconds = not_after
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let labels = CertificateLabels {
            certificate: certificate.to_owned(),
        };
        self.0.get_or_create(&labels).set(seconds);
    }

    /// Drops every series (the program no longer knows any certificate's expiry).
    pub fn clear(&self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::exposition::{assert_lines, encode};

    #[test]
    fn expiries_are_unix_seconds_by_certificate_until_cleared() {
        let expiry = CertificateExpiry::default();
        let mut registry = Registry::with_prefix("resize_guard");
        expiry.register(&mut registry, "notAfter");
        expiry.set("ca", UNIX_EPOCH + Duration::from_secs(1_900_000_000));
        expiry.set("serving", UNIX_EPOCH - Duration::from_secs(1));
        assert_lines(
            &encode(&registry),
            &[
                "# TYPE resize_guard_certificate_expiry_timestamp_seconds gauge",
                "resize_guard_certificate_expiry_timestamp_seconds{certificate=\"ca\"} 1900000000",
                "resize_guard_certificate_expiry_timestamp_seconds{certificate=\"serving\"} 0",
            ],
        );
        expiry.clear();
        assert!(!encode(&registry).contains("certificate="));
    }
}
