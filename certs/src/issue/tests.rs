use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::pem::Pem;

use super::*;
use crate::expiry::decode_cert_pem;

const DAY: Duration = Duration::from_secs(86_400);

fn pem(pem: &str) -> Pem {
    decode_cert_pem(pem, "test certificate").unwrap()
}

fn x509(block: &Pem) -> X509Certificate<'_> {
    block.parse_x509().unwrap()
}

/// The subject alternative names `pick` takes.
fn sans<T>(cert: &X509Certificate<'_>, pick: impl Fn(&GeneralName) -> Option<T>) -> Vec<T> {
    let san = cert.subject_alternative_name().unwrap().unwrap();
    san.value.general_names.iter().filter_map(pick).collect()
}

fn dns_sans(cert: &X509Certificate<'_>) -> Vec<String> {
    sans(cert, |n| match n {
        GeneralName::DNSName(d) => Some((*d).to_owned()),
        _ => None,
    })
}

fn ip_sans(cert: &X509Certificate<'_>) -> Vec<IpAddr> {
    sans(cert, |n| match n {
        GeneralName::IPAddress(b) if b.len() == 4 => {
            Some(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()))
        }
        GeneralName::IPAddress(b) if b.len() == 16 => {
            Some(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap()))
        }
        _ => None,
    })
}

fn subject_key_id(cert: &X509Certificate<'_>) -> Vec<u8> {
    cert.iter_extensions()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
            _ => None,
        })
        .unwrap()
}

fn authority_key_id(cert: &X509Certificate<'_>) -> Vec<u8> {
    cert.iter_extensions()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(a) => {
                a.key_identifier.as_ref().map(|k| k.0.to_vec())
            }
            _ => None,
        })
        .unwrap()
}

fn secs(t: x509_parser::time::ASN1Time) -> i64 {
    t.timestamp()
}

fn unix_now() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

#[test]
fn leaf_carries_every_service_name_as_a_dns_san() {
    let spec = CertSpec::for_service("resize-guard", "resize-guard-system");
    let bundle = generate(&spec).unwrap();
    let block = pem(&bundle.cert_pem);
    let mut sans = dns_sans(&x509(&block));
    sans.sort();
    let mut want = spec.dns_names.clone();
    want.sort();
    assert_eq!(sans, want);
}

#[test]
fn loopback_leaf_carries_ip_sans_for_both_loopback_addresses() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let block = pem(&bundle.cert_pem);
    let cert = x509(&block);
    let ips = ip_sans(&cert);
    assert!(ips.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{ips:?}");
    assert!(ips.contains(&IpAddr::V6(Ipv6Addr::LOCALHOST)), "{ips:?}");
    assert_eq!(dns_sans(&cert), vec!["localhost".to_owned()]);
}

#[test]
fn ca_is_a_path_length_zero_ca_that_only_signs_certificates_and_crls() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let block = pem(&bundle.ca_cert_pem);
    let ca = x509(&block);
    assert!(ca.is_ca());
    let bc = ca.basic_constraints().unwrap().unwrap();
    assert!(bc.critical);
    assert_eq!(bc.value.path_len_constraint, Some(0));
    let ku = ca.key_usage().unwrap().unwrap().value;
    assert!(ku.key_cert_sign() && ku.crl_sign());
    assert!(!ku.digital_signature());
    assert_eq!(ca.subject(), ca.issuer(), "self-signed");
    ca.verify_signature(None).unwrap();
}

#[test]
fn leaf_is_an_explicit_non_ca_for_server_auth() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let block = pem(&bundle.cert_pem);
    let leaf = x509(&block);
    assert!(!leaf.is_ca());
    let bc = leaf.basic_constraints().unwrap().unwrap();
    assert!(
        !bc.value.ca,
        "basicConstraints CA:FALSE is written explicitly"
    );
    let ku = leaf.key_usage().unwrap().unwrap().value;
    assert!(ku.digital_signature() && !ku.key_cert_sign());
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && !eku.client_auth);
}

#[test]
fn leaf_is_issued_and_signed_by_the_ca() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let (ca_block, leaf_block) = (pem(&bundle.ca_cert_pem), pem(&bundle.cert_pem));
    let (ca, leaf) = (x509(&ca_block), x509(&leaf_block));
    assert_eq!(leaf.issuer().as_raw(), ca.subject().as_raw());
    assert_eq!(authority_key_id(&leaf), subject_key_id(&ca));
    leaf.verify_signature(Some(ca.public_key())).unwrap();

    let other = generate(&CertSpec::for_loopback()).unwrap();
    let other_block = pem(&other.ca_cert_pem);
    assert!(
        leaf.verify_signature(Some(x509(&other_block).public_key()))
            .is_err()
    );
}

#[test]
fn validity_windows_match_the_spec_and_start_before_now() {
    let mut spec = CertSpec::for_loopback();
    spec.leaf_validity = 90 * DAY;
    spec.ca_validity = 3 * 365 * DAY;
    let before = unix_now();
    let bundle = generate(&spec).unwrap();
    let after = unix_now();
    let skew = i64::try_from(CLOCK_SKEW_ALLOWANCE.as_secs()).unwrap();

    for (pem_text, validity) in [
        (&bundle.cert_pem, spec.leaf_validity),
        (&bundle.ca_cert_pem, spec.ca_validity),
    ] {
        let block = pem(pem_text);
        let cert = x509(&block);
        let v = cert.validity();
        let lifetime = i64::try_from(validity.as_secs()).unwrap();
        assert!((before - skew..=after - skew).contains(&secs(v.not_before)));
        assert!((before + lifetime..=after + lifetime).contains(&secs(v.not_after)));
        assert_eq!(secs(v.not_after) - secs(v.not_before), lifetime + skew);
    }
}

#[test]
fn leaf_never_outlives_its_ca() {
    let mut spec = CertSpec::for_loopback();
    spec.ca_validity = 10 * DAY;
    spec.leaf_validity = 100 * DAY;
    let bundle = generate(&spec).unwrap();
    let (ca_block, leaf_block) = (pem(&bundle.ca_cert_pem), pem(&bundle.cert_pem));
    assert_eq!(
        x509(&leaf_block).validity().not_after,
        x509(&ca_block).validity().not_after
    );
}

#[test]
fn renewing_keeps_the_ca_and_issues_a_new_leaf() {
    let spec = CertSpec::for_loopback();
    let first = generate(&spec).unwrap();
    let renewed = renew_leaf(&first.ca_cert_pem, &first.ca_key_pem, &spec).unwrap();

    assert_eq!(renewed.ca_cert_pem, first.ca_cert_pem);
    assert_eq!(renewed.ca_key_pem, first.ca_key_pem);
    assert_eq!(renewed.ca_bundle_base64(), first.ca_bundle_base64());
    assert_ne!(renewed.key_pem, first.key_pem);

    let (ca_block, old_block, new_block) = (
        pem(&first.ca_cert_pem),
        pem(&first.cert_pem),
        pem(&renewed.cert_pem),
    );
    let (ca, old, new) = (x509(&ca_block), x509(&old_block), x509(&new_block));
    assert_ne!(old.raw_serial(), new.raw_serial());
    assert_eq!(new.issuer().as_raw(), ca.subject().as_raw());
    assert_eq!(authority_key_id(&new), authority_key_id(&old));
    assert_eq!(authority_key_id(&new), subject_key_id(&ca));
    new.verify_signature(Some(ca.public_key())).unwrap();
    assert_eq!(ip_sans(&new), ip_sans(&old));
}

#[test]
fn renewing_can_change_the_names() {
    let first = generate(&CertSpec::for_loopback()).unwrap();
    let spec = CertSpec::for_service("webhook", "ns");
    let renewed = renew_leaf(&first.ca_cert_pem, &first.ca_key_pem, &spec).unwrap();
    let block = pem(&renewed.cert_pem);
    assert!(dns_sans(&x509(&block)).contains(&"webhook.ns.svc".to_owned()));
}

#[test]
fn renewing_with_garbage_is_a_parse_error() {
    let good = generate(&CertSpec::for_loopback()).unwrap();
    let spec = CertSpec::for_loopback();
    let bad_cert = renew_leaf("not a pem", &good.ca_key_pem, &spec).unwrap_err();
    assert!(
        matches!(
            bad_cert,
            CertError::Parse {
                what: "CA certificate",
                ..
            }
        ),
        "{bad_cert}"
    );
    let bad_key = renew_leaf(
        &good.ca_cert_pem,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        &spec,
    )
    .unwrap_err();
    assert!(
        matches!(
            bad_key,
            CertError::Parse {
                what: "CA private key",
                ..
            }
        ),
        "{bad_key}"
    );
    assert_eq!(bad_key.reason(), "ParseFailed");
}

/// Renewing from this CA certificate and key fails as an unusable CA; the message.
fn refused_ca(ca_cert_pem: &str, ca_key_pem: &str) -> String {
    let err = renew_leaf(ca_cert_pem, ca_key_pem, &CertSpec::for_loopback()).unwrap_err();
    assert!(matches!(err, CertError::Ca { .. }), "{err}");
    err.to_string()
}

#[test]
fn renewing_refuses_a_key_from_another_ca() {
    let spec = CertSpec::for_loopback();
    let (a, b) = (generate(&spec).unwrap(), generate(&spec).unwrap());
    let err = refused_ca(&a.ca_cert_pem, &b.ca_key_pem);
    assert!(err.contains("does not belong"), "{err}");
}

#[test]
fn renewing_refuses_a_leaf_posing_as_the_ca() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let err = refused_ca(&bundle.cert_pem, &bundle.key_pem);
    assert!(err.contains("not a CA"), "{err}");
}

#[test]
fn a_spec_without_names_is_rejected() {
    let mut spec = CertSpec::for_loopback();
    spec.dns_names.clear();
    spec.ip_addresses.clear();
    assert!(matches!(generate(&spec), Err(CertError::Spec { .. })));
}

#[test]
fn a_lifetime_past_year_9999_is_rejected() {
    let mut spec = CertSpec::for_loopback();
    spec.ca_validity = Duration::MAX;
    let err = generate(&spec).unwrap_err();
    assert!(err.to_string().contains("ca_validity"), "{err}");
}

#[test]
fn a_non_ascii_dns_name_is_a_spec_error() {
    let mut spec = CertSpec::for_loopback();
    spec.dns_names.push("bücher.example".to_owned());
    let err = generate(&spec).unwrap_err();
    assert!(matches!(err, CertError::Spec { .. }), "{err}");
}

#[test]
fn ca_bundle_is_the_base64_of_the_ca_pem() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(bundle.ca_bundle_base64())
        .unwrap();
    assert_eq!(decoded, bundle.ca_cert_pem.as_bytes());
    assert!(
        bundle
            .ca_cert_pem
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
}

#[test]
fn debug_output_hides_private_keys() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let debug = format!("{bundle:?}");
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
    assert!(debug.contains("<redacted>"));
}

#[test]
fn cas_generated_together_have_distinct_subjects() {
    let spec = CertSpec::for_loopback();
    let (a, b) = (generate(&spec).unwrap(), generate(&spec).unwrap());
    let (a_block, b_block) = (pem(&a.ca_cert_pem), pem(&b.ca_cert_pem));
    assert_ne!(x509(&a_block).subject(), x509(&b_block).subject());
}
