//! Issuing: [`generate`] makes a fresh self-signed CA and a serving certificate signed by it;
//! [`renew_leaf`] signs a new serving certificate with an existing CA, so the webhook
//! configuration's `caBundle` stays valid across rotations. All keys are ECDSA P-256.

use std::fmt;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use time::OffsetDateTime;

use crate::authority::{Authority, self_signed};
use crate::spec::CLOCK_SKEW_ALLOWANCE;
use crate::{CertError, CertSpec};

/// A CA and a serving certificate signed by it, all PEM-encoded. Keys are PKCS#8
/// (`-----BEGIN PRIVATE KEY-----`). `Debug` does not print the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The self-signed CA certificate: what clients (kube-apiserver) trust.
    pub ca_cert_pem: String,
    /// The CA's private key: needed only to [`renew_leaf`].
    pub ca_key_pem: String,
    /// The serving (leaf) certificate.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

impl Bundle {
    /// The CA certificate PEM, base64-encoded: the value of a webhook configuration's
    /// `clientConfig.caBundle`.
    pub fn ca_bundle_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.ca_cert_pem.as_bytes())
    }
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bundle")
            .field("ca_cert_pem", &self.ca_cert_pem)
            .field("ca_key_pem", &"<redacted>")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Creates a fresh self-signed CA (path length 0, key usages certSign + cRLSign) and a serving
/// certificate signed by it for `spec`'s names (serverAuth, digitalSignature, not a CA). Both
/// start [`CLOCK_SKEW_ALLOWANCE`] in the past; the leaf never outlives the CA.
pub fn generate(spec: &CertSpec) -> Result<Bundle, CertError> {
    let now = now_utc();
    let (ca, ca_not_after) = self_signed(spec.ca_validity, now)?;
    let (cert_pem, key_pem) = issue_leaf(&ca, ca_not_after, spec, now)?;
    Ok(Bundle {
        ca_cert_pem: ca.pem(),
        ca_key_pem: ca.key().serialize_pem(),
        cert_pem,
        key_pem,
    })
}

/// Signs a new serving certificate (with a new key) for `spec` using an existing CA, leaving
/// the CA untouched: rotation without changing `caBundle`. `spec.ca_validity` is ignored; the
/// leaf is capped at the CA's `notAfter`.
///
/// Fails with [`CertError::Parse`] for undecodable inputs and [`CertError::Ca`] when the
/// certificate is not a CA, the key does not belong to it, or it has expired.
pub fn renew_leaf(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    spec: &CertSpec,
) -> Result<Bundle, CertError> {
    let leaf = Authority::from_pem(ca_cert_pem, ca_key_pem)?.sign(spec, SystemTime::now())?;
    Ok(Bundle {
        ca_cert_pem: ca_cert_pem.to_owned(),
        ca_key_pem: ca_key_pem.to_owned(),
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
    })
}

/// Signs a serving certificate for `spec` with `issuer`; returns (certificate PEM, key PEM).
pub(crate) fn issue_leaf(
    issuer: &Issuer<'_, KeyPair>,
    ca_not_after: OffsetDateTime,
    spec: &CertSpec,
    now: OffsetDateTime,
) -> Result<(String, String), CertError> {
    if spec.dns_names.is_empty() && spec.ip_addresses.is_empty() {
        return Err(CertError::Spec {
            problem: "a serving certificate needs at least one DNS name or IP address".into(),
        });
    }
    let mut sans = Vec::with_capacity(spec.dns_names.len() + spec.ip_addresses.len());
    for name in &spec.dns_names {
        let ia5 = name.clone().try_into().map_err(|e| CertError::Spec {
            problem: format!("DNS name {name:?}: {e}"),
        })?;
        sans.push(SanType::DnsName(ia5));
    }
    sans.extend(spec.ip_addresses.iter().copied().map(SanType::IpAddress));

    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, spec.common_name.as_str());
    params.distinguished_name = dn;
    params.subject_alt_names = sans;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = sub(now, CLOCK_SKEW_ALLOWANCE);
    params.not_after = add(now, spec.leaf_validity, "leaf_validity")?.min(ca_not_after);
    // The serial is left to rcgen: 20 bytes of SHA-256 over the fresh leaf key, unique per leaf.

    let key = new_key("serving key")?;
    let cert = params
        .signed_by(&key, issuer)
        .map_err(CertError::generate("serving certificate"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

pub(crate) fn new_key(what: &'static str) -> Result<KeyPair, CertError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CertError::generate(what))
}

/// Now, in UTC, truncated to whole seconds (X.509 times have no fraction).
fn now_utc() -> OffsetDateTime {
    whole_seconds(SystemTime::now())
}

/// `t` in UTC, truncated to whole seconds (X.509 times have no fraction).
pub(crate) fn whole_seconds(t: SystemTime) -> OffsetDateTime {
    let t = OffsetDateTime::from(t);
    t - time::Duration::nanoseconds(i64::from(t.nanosecond()))
}

pub(crate) fn add(
    t: OffsetDateTime,
    d: Duration,
    field: &str,
) -> Result<OffsetDateTime, CertError> {
    time::Duration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d))
        .filter(|end| end.year() <= 9999)
        .ok_or_else(|| CertError::Spec {
            problem: format!("{field} of {d:?} runs past the year 9999"),
        })
}

pub(crate) fn sub(t: OffsetDateTime, d: Duration) -> OffsetDateTime {
    time::Duration::try_from(d)
        .ok()
        .and_then(|d| t.checked_sub(d))
        .unwrap_or(t)
}

#[cfg(test)]
mod tests;
