//! The CA as a value: [`Authority::issue`] makes a fresh self-signed CA, [`Authority::from_pem`]
//! takes one back from storage (a Secret's `ca.crt` + `ca.key`) after checking it is a CA and
//! the key is its own, and [`Authority::sign`] issues a serving certificate ([`Leaf`]) from it.
//! Every operation takes `now` explicitly, so a caller can reason (and test) across time.

use std::fmt;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use time::OffsetDateTime;

use crate::expiry::{decode_cert_pem, parse_cert, to_system_time};
use crate::inspect::public_key_matches;
use crate::issue::{add, issue_leaf, new_key, sub, whole_seconds};
use crate::spec::CLOCK_SKEW_ALLOWANCE;
use crate::{CertError, CertSpec};

/// A usable CA: certificate and private key (PEM, PKCS#8) plus what callers decide on.
/// `Debug` does not print the key.
#[derive(Clone, PartialEq, Eq)]
pub struct Authority {
    cert_pem: String,
    key_pem: String,
    subject: String,
    not_before: SystemTime,
    not_after: SystemTime,
}

/// A serving certificate and its private key, PEM-encoded. `Debug` does not print the key.
#[derive(Clone, PartialEq, Eq)]
pub struct Leaf {
    /// The certificate (`tls.crt`).
    pub cert_pem: String,
    /// Its private key (`tls.key`), PKCS#8.
    pub key_pem: String,
}

impl fmt::Debug for Leaf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leaf")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority")
            .field("subject", &self.subject)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// A fresh self-signed ECDSA P-256 CA (path length 0, key usages certSign + cRLSign),
    /// valid from [`CLOCK_SKEW_ALLOWANCE`] before `now` until `now + validity`.
    pub fn issue(validity: Duration, now: SystemTime) -> Result<Authority, CertError> {
        let (ca, _) = self_signed(validity, whole_seconds(now))?;
        Authority::from_pem(&ca.pem(), &ca.key().serialize_pem())
    }

    /// Takes a stored CA back: the first certificate of `cert_pem` must be a CA and `key_pem`
    /// its private key. Expiry is not checked here (see [`Authority::valid_at`]).
    ///
    /// Fails with [`CertError::Parse`] for undecodable inputs and [`CertError::Ca`] when the
    /// certificate is not a CA or the key belongs to another certificate.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Authority, CertError> {
        let block = decode_cert_pem(cert_pem, "CA certificate")?;
        let ca = parse_cert(&block, "CA certificate")?;
        let key = KeyPair::from_pem(key_pem).map_err(|e| CertError::parse("CA private key", e))?;
        if !ca.is_ca() {
            return Err(CertError::Ca {
                problem: format!("{} is not a CA certificate", ca.subject()),
            });
        }
        if !public_key_matches(&ca, &key) {
            return Err(CertError::Ca {
                problem: format!("the private key does not belong to {}", ca.subject()),
            });
        }
        Ok(Authority {
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            subject: ca.subject().to_string(),
            not_before: to_system_time(ca.validity().not_before),
            not_after: to_system_time(ca.validity().not_after),
        })
    }

    /// The CA certificate as given or generated (what a `caBundle` carries).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The subject distinguished name (unique per generated CA).
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Start of validity.
    pub fn not_before(&self) -> SystemTime {
        self.not_before
    }

    /// End of validity.
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// Whether `now` lies within `[notBefore, notAfter)`.
    pub fn valid_at(&self, now: SystemTime) -> bool {
        self.not_before <= now && now < self.not_after
    }

    /// Issues a serving certificate for `spec`'s names (new key; serverAuth; not a CA), valid
    /// from [`CLOCK_SKEW_ALLOWANCE`] before `now` for `spec.leaf_validity`, never past the CA's
    /// `notAfter`. `spec.ca_validity` is ignored. Fails with [`CertError::Ca`] once the CA has
    /// expired.
    pub fn sign(&self, spec: &CertSpec, now: SystemTime) -> Result<Leaf, CertError> {
        let now = whole_seconds(now);
        let ca_not_after = OffsetDateTime::from(self.not_after);
        if ca_not_after <= now {
            return Err(CertError::Ca {
                problem: format!("{} expired at {ca_not_after}", self.subject),
            });
        }
        let key =
            KeyPair::from_pem(&self.key_pem).map_err(|e| CertError::parse("CA private key", e))?;
        let issuer = Issuer::from_ca_cert_pem(&self.cert_pem, key)
            .map_err(|e| CertError::parse("CA certificate", e))?;
        let (cert_pem, key_pem) = issue_leaf(&issuer, ca_not_after, spec, now)?;
        Ok(Leaf { cert_pem, key_pem })
    }
}

/// A fresh self-signed CA valid for `validity` from `now`; returns it and its `notAfter`.
pub(crate) fn self_signed(
    validity: Duration,
    now: OffsetDateTime,
) -> Result<(CertifiedIssuer<'static, KeyPair>, OffsetDateTime), CertError> {
    let not_after = add(now, validity, "ca_validity")?;
    let ca_key = new_key("CA key")?;
    let mut params = CertificateParams::default();
    // A per-CA subject (issue time, like kube's self-signed `host@timestamp`, plus a key id
    // prefix): two CAs made in the same second must not share a name, or a client trusting one
    // would match the other's leaves by name and fail on the signature instead of the issuer.
    let key_id: String = params
        .key_identifier(&ca_key)
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "resize-guard");
    dn.push(
        DnType::CommonName,
        format!("resize-guard-ca@{}-{key_id}", now.unix_timestamp()),
    );
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = sub(now, CLOCK_SKEW_ALLOWANCE);
    params.not_after = not_after;
    let ca = CertifiedIssuer::self_signed(params, ca_key)
        .map_err(CertError::generate("CA certificate"))?;
    Ok((ca, not_after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{inspect, signed_by};

    const HOUR: Duration = Duration::from_secs(3600);

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn an_issued_ca_round_trips_through_pem() {
        let now = at(1_900_000_000);
        let ca = Authority::issue(10 * HOUR, now).unwrap();
        let back = Authority::from_pem(ca.cert_pem(), ca.key_pem()).unwrap();
        assert_eq!(back, ca);
        assert_eq!(ca.not_after(), now + 10 * HOUR);
        assert_eq!(ca.not_before(), now - CLOCK_SKEW_ALLOWANCE);
        assert!(ca.valid_at(now) && !ca.valid_at(now + 10 * HOUR));
        assert!(inspect(ca.cert_pem()).unwrap().is_ca);
    }

    #[test]
    fn a_leaf_signed_at_a_given_time_is_valid_from_then() {
        let now = at(1_900_000_000);
        let ca = Authority::issue(100 * HOUR, now).unwrap();
        let later = now + 7 * HOUR;
        let leaf = ca.sign(&CertSpec::for_loopback(), later).unwrap();
        let info = inspect(&leaf.cert_pem).unwrap();
        let spec = CertSpec::for_loopback();
        assert_eq!(info.not_before, later - CLOCK_SKEW_ALLOWANCE);
        assert_eq!(info.not_after, later + spec.leaf_validity.min(93 * HOUR));
        assert!(signed_by(&leaf.cert_pem, ca.cert_pem()).unwrap());
        assert!(!format!("{leaf:?}").contains("PRIVATE KEY"));
        assert!(!format!("{ca:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn an_expired_ca_signs_nothing() {
        let now = at(1_900_000_000);
        let ca = Authority::issue(HOUR, now).unwrap();
        let err = ca.sign(&CertSpec::for_loopback(), now + HOUR).unwrap_err();
        assert!(matches!(err, CertError::Ca { .. }), "{err}");
    }

    #[test]
    fn from_pem_refuses_leaves_foreign_keys_and_garbage() {
        let now = at(1_900_000_000);
        let (a, b) = (
            Authority::issue(HOUR, now).unwrap(),
            Authority::issue(HOUR, now).unwrap(),
        );
        let err = Authority::from_pem(a.cert_pem(), b.key_pem()).unwrap_err();
        assert!(err.to_string().contains("does not belong"), "{err}");
        let leaf = a.sign(&CertSpec::for_loopback(), now).unwrap();
        let err = Authority::from_pem(&leaf.cert_pem, &leaf.key_pem).unwrap_err();
        assert!(err.to_string().contains("not a CA"), "{err}");
        assert!(matches!(
            Authority::from_pem("junk", a.key_pem()),
            Err(CertError::Parse { .. })
        ));
        assert!(matches!(
            Authority::from_pem(a.cert_pem(), "junk"),
            Err(CertError::Parse { .. })
        ));
    }
}
