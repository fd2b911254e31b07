//! Reading certificates back: decode a PEM certificate with `x509-parser` and answer "does this
//! need rotating yet?" ([`expires_within`]) from its `notAfter`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use x509_parser::certificate::X509Certificate;
use x509_parser::pem::Pem;
use x509_parser::time::ASN1Time;

use crate::CertError;

/// Decodes the first PEM block of `pem`, which must be labelled `CERTIFICATE`.
pub(crate) fn decode_cert_pem(pem: &str, what: &'static str) -> Result<Pem, CertError> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| CertError::parse(what, format!("not PEM: {e}")))?;
    if block.label != "CERTIFICATE" {
        return Err(CertError::parse(
            what,
            format!("expected a CERTIFICATE PEM block, found {:?}", block.label),
        ));
    }
    Ok(block)
}

/// Parses a decoded certificate block as X.509.
pub(crate) fn parse_cert<'a>(
    block: &'a Pem,
    what: &'static str,
) -> Result<X509Certificate<'a>, CertError> {
    block
        .parse_x509()
        .map_err(|e| CertError::parse(what, format!("not an X.509 certificate: {e}")))
}

/// Converts an X.509 time to a [`SystemTime`].
pub(crate) fn to_system_time(t: ASN1Time) -> SystemTime {
    let secs = t.timestamp();
    let magnitude = Duration::from_secs(secs.unsigned_abs());
    if secs >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// The `notAfter` of the first certificate in `cert_pem`.
pub fn not_after(cert_pem: &str) -> Result<SystemTime, CertError> {
    let block = decode_cert_pem(cert_pem, "certificate")?;
    let cert = parse_cert(&block, "certificate")?;
    Ok(to_system_time(cert.validity().not_after))
}

/// Whether the first certificate in `cert_pem` expires within `window` of `now`, i.e.
/// `notAfter <= now + window` (an already expired certificate counts). Use it to decide when to
/// [`renew_leaf`](crate::renew_leaf).
pub fn expires_within(
    cert_pem: &str,
    window: Duration,
    now: SystemTime,
) -> Result<bool, CertError> {
    let expiry = not_after(cert_pem)?;
    Ok(match now.checked_add(window) {
        Some(deadline) => expiry <= deadline,
        // A window past the end of representable time covers every certificate.
        None => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CertSpec, generate};

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn expires_within_is_true_exactly_from_not_after_minus_window() {
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        let expiry = not_after(&bundle.cert_pem).unwrap();
        let window = 30 * DAY;
        let boundary = expiry - window;

        assert!(expires_within(&bundle.cert_pem, window, boundary).unwrap());
        assert!(
            !expires_within(&bundle.cert_pem, window, boundary - Duration::from_secs(1)).unwrap()
        );
        assert!(expires_within(&bundle.cert_pem, window, expiry + DAY).unwrap());
    }

    #[test]
    fn a_fresh_leaf_does_not_need_renewal_within_a_month() {
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        assert!(!expires_within(&bundle.cert_pem, 30 * DAY, SystemTime::now()).unwrap());
        assert!(expires_within(&bundle.cert_pem, 400 * DAY, SystemTime::now()).unwrap());
    }

    #[test]
    fn an_unbounded_window_means_renew() {
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        assert!(expires_within(&bundle.cert_pem, Duration::MAX, SystemTime::now()).unwrap());
    }

    #[test]
    fn garbage_input_is_a_parse_error_not_a_panic() {
        for input in [
            "",
            "hello",
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ] {
            let err = expires_within(input, DAY, SystemTime::now()).unwrap_err();
            assert!(matches!(err, CertError::Parse { .. }), "{input:?}: {err}");
        }
    }

    #[test]
    fn a_private_key_is_not_accepted_as_a_certificate() {
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        let err = not_after(&bundle.key_pem).unwrap_err();
        assert!(err.to_string().contains("PRIVATE KEY"), "{err}");
    }
}
