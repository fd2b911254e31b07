//! The serving Secret, checked: [`leaf_fits`] says whether it holds the leaf the current CA would
//! issue now (type, keys, names, issuer, remaining lifetime, `ca.crt`), or why not.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::SystemTime;

use resize_guard_certs::{Authority, inspect, key_matches, signed_by};
use resize_guard_runtime::error_chain;

use super::{Expected, renewal_due};
use crate::certificates::secrets::{CA_CERT, Stored, TLS_CERT, TLS_KEY, TLS_TYPE, rfc3339};

/// `Ok` when the serving Secret holds the leaf `ca` would issue now; else why not.
pub(super) fn leaf_fits(
    serving: Option<&Stored>,
    ca: &Authority,
    now: SystemTime,
    expected: &Expected,
) -> Result<(), String> {
    let s = serving.ok_or("the serving Secret does not exist")?;
    if s.type_.as_deref() != Some(TLS_TYPE) {
        return Err(format!(
            "the serving Secret has type {}, not {TLS_TYPE}",
            s.type_.as_deref().unwrap_or("(none)")
        ));
    }
    let cert = s
        .text(TLS_CERT)
        .map_err(|e| format!("the serving Secret {e}"))?;
    let key = s
        .text(TLS_KEY)
        .map_err(|e| format!("the serving Secret {e}"))?;
    let info = inspect(cert).map_err(|e| format!("{TLS_CERT}: {}", error_chain(&e)))?;
    match key_matches(cert, key) {
        Ok(true) => {}
        Ok(false) => return Err(format!("{TLS_KEY} is not the key of {TLS_CERT}")),
        Err(e) => return Err(format!("{TLS_KEY}: {}", error_chain(&e))),
    }
    let (want_dns, want_ip) = names(&expected.spec.dns_names, &expected.spec.ip_addresses);
    let (got_dns, got_ip) = names(&info.dns_names, &info.ip_addresses);
    if (&got_dns, &got_ip) != (&want_dns, &want_ip) {
        return Err(format!(
            "the serving certificate names {} but must name exactly {}",
            list(&got_dns, &got_ip),
            list(&want_dns, &want_ip)
        ));
    }
    if !signed_by(cert, ca.cert_pem()).unwrap_or(false) {
        return Err(format!(
            "the serving certificate was issued by {}, not by the current CA {}",
            info.issuer,
            ca.subject()
        ));
    }
    if info.not_after <= now {
        return Err(format!(
            "the serving certificate expired at {}",
            rfc3339(info.not_after)
        ));
    }
    // A leaf capped at its CA's notAfter is not renewed in vain: a new one would end at the
    // same moment; the CA rotation re-issues it.
    let renewed_until = (now + expected.spec.leaf_validity).min(ca.not_after());
    if renewal_due(
        info.not_before,
        info.not_after,
        expected.spec.leaf_validity,
        now,
    ) && renewed_until > info.not_after
    {
        return Err(format!(
            "the serving certificate expires at {}, less than a third of its lifetime away",
            rfc3339(info.not_after)
        ));
    }
    if s.text(CA_CERT).ok() != Some(ca.cert_pem()) {
        return Err(format!(
            "the serving Secret's {CA_CERT} is not the current CA"
        ));
    }
    Ok(())
}

fn names(dns: &[String], ips: &[IpAddr]) -> (BTreeSet<String>, BTreeSet<IpAddr>) {
    (
        dns.iter().map(|d| d.to_ascii_lowercase()).collect(),
        ips.iter().copied().collect(),
    )
}

fn list(dns: &BTreeSet<String>, ips: &BTreeSet<IpAddr>) -> String {
    let all: Vec<String> = dns
        .iter()
        .cloned()
        .chain(ips.iter().map(ToString::to_string))
        .collect();
    format!("[{}]", all.join(", "))
}
