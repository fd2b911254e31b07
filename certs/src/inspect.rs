//! Reading a certificate back without trusting it: [`inspect`] decodes the first PEM block into
//! a [`CertInfo`] (names, validity, CA flag, issuer), [`signed_by`] checks that a CA really
//! signed a certificate (issuer name *and* signature), and [`key_matches`] that a private key
//! belongs to a certificate. A self-managing controller uses these to decide whether what it
//! finds in a Secret is still the certificate it would issue today.

use std::net::IpAddr;
use std::time::SystemTime;

use rcgen::KeyPair;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

use crate::CertError;
use crate::expiry::{decode_cert_pem, parse_cert, to_system_time};

/// What a certificate says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The subject distinguished name, RFC 4514 style (`CN=…,O=…`).
    pub subject: String,
    /// The issuer distinguished name.
    pub issuer: String,
    /// Start of validity.
    pub not_before: SystemTime,
    /// End of validity.
    pub not_after: SystemTime,
    /// Whether basicConstraints marks it as a CA.
    pub is_ca: bool,
    /// DNS subject alternative names, in certificate order.
    pub dns_names: Vec<String>,
    /// IP subject alternative names, in certificate order.
    pub ip_addresses: Vec<IpAddr>,
}

impl CertInfo {
    /// Whether `now` lies within `[notBefore, notAfter)`.
    pub fn valid_at(&self, now: SystemTime) -> bool {
        self.not_before <= now && now < self.not_after
    }
}

/// Describes the first certificate in `cert_pem`.
pub fn inspect(cert_pem: &str) -> Result<CertInfo, CertError> {
    let block = decode_cert_pem(cert_pem, "certificate")?;
    let cert = parse_cert(&block, "certificate")?;
    let (dns_names, ip_addresses) = sans(&cert)?;
    Ok(CertInfo {
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        not_before: to_system_time(cert.validity().not_before),
        not_after: to_system_time(cert.validity().not_after),
        is_ca: cert.is_ca(),
        dns_names,
        ip_addresses,
    })
}

/// Whether the first certificate in `cert_pem` was issued by the first certificate in
/// `ca_cert_pem`: its issuer is the CA's subject and the CA's key verifies its signature.
/// `Err` only when either input cannot be parsed.
pub fn signed_by(cert_pem: &str, ca_cert_pem: &str) -> Result<bool, CertError> {
    let block = decode_cert_pem(cert_pem, "certificate")?;
    let cert = parse_cert(&block, "certificate")?;
    let ca_block = decode_cert_pem(ca_cert_pem, "CA certificate")?;
    let ca = parse_cert(&ca_block, "CA certificate")?;
    Ok(cert.issuer().as_raw() == ca.subject().as_raw()
        && cert.verify_signature(Some(ca.public_key())).is_ok())
}

/// Whether the PKCS#8 private key in `key_pem` belongs to the first certificate in `cert_pem`.
/// `Err` only when either input cannot be parsed.
pub fn key_matches(cert_pem: &str, key_pem: &str) -> Result<bool, CertError> {
    let block = decode_cert_pem(cert_pem, "certificate")?;
    let cert = parse_cert(&block, "certificate")?;
    let key = KeyPair::from_pem(key_pem).map_err(|e| CertError::parse("private key", e))?;
    Ok(public_key_matches(&cert, &key))
}

/// Whether `key` is the key pair of `cert`.
pub(crate) fn public_key_matches(cert: &X509Certificate<'_>, key: &KeyPair) -> bool {
    key.public_key_raw() == cert.public_key().subject_public_key.data.as_ref()
}

type Sans = (Vec<String>, Vec<IpAddr>);

fn sans(cert: &X509Certificate<'_>) -> Result<Sans, CertError> {
    let ext = cert
        .subject_alternative_name()
        .map_err(|e| CertError::parse("certificate", format!("subjectAltName: {e}")))?;
    let (mut dns, mut ips) = (Vec::new(), Vec::new());
    for name in ext.iter().flat_map(|e| e.value.general_names.iter()) {
        match name {
            GeneralName::DNSName(d) => dns.push((*d).to_owned()),
            GeneralName::IPAddress(b) => {
                if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                    ips.push(IpAddr::from(v4));
                } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                    ips.push(IpAddr::from(v6));
                }
            }
            _ => {}
        }
    }
    Ok((dns, ips))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use super::*;
    use crate::{Authority, CertSpec, generate};

    #[test]
    fn a_leaf_reports_its_names_issuer_and_validity() {
        let spec = CertSpec::for_service("hook", "ns");
        let bundle = generate(&spec).unwrap();
        let leaf = inspect(&bundle.cert_pem).unwrap();
        let ca = inspect(&bundle.ca_cert_pem).unwrap();
        let mut names = leaf.dns_names.clone();
        names.sort();
        let mut want = spec.dns_names.clone();
        want.sort();
        assert_eq!(names, want);
        assert!(leaf.ip_addresses.is_empty());
        assert!(!leaf.is_ca && ca.is_ca);
        assert_eq!(leaf.issuer, ca.subject);
        assert!(leaf.subject.contains("hook.ns.svc"), "{}", leaf.subject);
        assert!(leaf.valid_at(SystemTime::now()));
        assert!(!leaf.valid_at(leaf.not_after));
    }

    #[test]
    fn ip_sans_are_read_as_addresses() {
        let leaf = inspect(&generate(&CertSpec::for_loopback()).unwrap().cert_pem).unwrap();
        assert!(leaf.ip_addresses.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert!(leaf.ip_addresses.iter().any(IpAddr::is_ipv6));
    }

    #[test]
    fn signed_by_checks_the_signature_not_just_the_name() {
        let spec = CertSpec::for_loopback();
        let bundle = generate(&spec).unwrap();
        assert!(signed_by(&bundle.cert_pem, &bundle.ca_cert_pem).unwrap());
        let other = generate(&spec).unwrap();
        assert!(!signed_by(&bundle.cert_pem, &other.ca_cert_pem).unwrap());
        // The same subject with another key: a forgery by name only.
        let now = SystemTime::now();
        let ca = Authority::issue(Duration::from_secs(3600), now).unwrap();
        let leaf = ca.sign(&spec, now).unwrap();
        assert!(signed_by(&leaf.cert_pem, ca.cert_pem()).unwrap());
        assert!(!signed_by(&leaf.cert_pem, &bundle.ca_cert_pem).unwrap());
        assert!(signed_by("garbage", &bundle.ca_cert_pem).is_err());
        assert!(signed_by(&bundle.cert_pem, "garbage").is_err());
    }

    #[test]
    fn key_matches_only_the_certificate_it_belongs_to() {
        let spec = CertSpec::for_loopback();
        let a = generate(&spec).unwrap();
        let b = generate(&spec).unwrap();
        assert!(key_matches(&a.cert_pem, &a.key_pem).unwrap());
        assert!(!key_matches(&a.cert_pem, &b.key_pem).unwrap());
        assert!(key_matches(&a.cert_pem, "not a key").is_err());
    }

    #[test]
    fn garbage_is_a_parse_error() {
        for input in [
            "",
            "x",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ] {
            assert!(
                matches!(inspect(input), Err(CertError::Parse { .. })),
                "{input:?}"
            );
        }
    }
}
