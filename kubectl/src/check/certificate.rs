//! Does each webhook entry's `caBundle` verify the certificate the webhook serves, and is that
//! certificate valid for long enough? For a URL the certificate comes from a real handshake,
//! for a Service from the serving Secret ([`super::tls`]).

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use super::webhook::Entry;
use super::{Line, fail, line, tls};
use crate::connection::Connection;
use crate::table::{Mark, age};

/// The serving Secret the webhook reads (its `--serving-secret` default).
const SERVING_SECRET: &str = "resize-guard-webhook-tls";
/// A serving certificate must have at least this long left.
const MIN_VALIDITY: Duration = Duration::from_secs(30 * 86400);

/// Whether the entry's `caBundle` verifies the certificate it serves, and how long that is valid.
pub(super) async fn certificate(conn: &Connection, e: &Entry, out: &mut Vec<Line>) {
    const S: &str = "certificates";
    let bundle: Vec<u8> = e
        .client
        .ca_bundle
        .as_ref()
        .map(|b| b.0.clone())
        .unwrap_or_default();
    if bundle.is_empty() {
        out.push(fail(
            S,
            format!("{} has no caBundle: the API server cannot verify the webhook", e.name),
            "the controller injects caBundle when it leads (see the controller check); with the cert-manager overlay, cert-manager's CA injector does",
        ));
    }
    let now = SystemTime::now();
    let (chain, verified, served_at) = if let Some(url) = &e.client.url {
        let Some((host, port)) = host_port(url) else {
            out.push(fail(
                S,
                format!("{} has an unusable URL {url}", e.name),
                "fix clientConfig.url",
            ));
            return;
        };
        let served = tls::handshake(&host, port, &bundle).await;
        (
            served.chain,
            served.verified,
            format!("served at {host}:{port}"),
        )
    } else if let Some(svc) = &e.client.service {
        let secret = Api::<Secret>::namespaced(conn.client.clone(), &svc.namespace)
            .get_opt(SERVING_SECRET)
            .await;
        let pem = match secret {
            Ok(Some(s)) => s
                .data
                .and_then(|d| d.get("tls.crt").map(|b| b.0.clone()))
                .unwrap_or_default(),
            Ok(None) => {
                out.push(fail(
                    S,
                    format!(
                        "Secret {}/{SERVING_SECRET} (the webhook's certificate) does not exist",
                        svc.namespace
                    ),
                    "the controller creates it when it leads (see the controller check)",
                ));
                return;
            }
            Err(err) => {
                out.push(line(
                    S,
                    Mark::Warn,
                    format!(
                        "cannot read Secret {}/{SERVING_SECRET} to verify caBundle: {err}",
                        svc.namespace
                    ),
                ));
                return;
            }
        };
        let chain = tls::pem_certs(&pem);
        let host = format!("{}.{}.svc", svc.name, svc.namespace);
        let verified = tls::verify(&chain, &host, &bundle, now);
        (
            chain,
            verified,
            format!("in Secret {}/{SERVING_SECRET}", svc.namespace),
        )
    } else {
        return;
    };
    if !bundle.is_empty() {
        out.push(match &verified {
            Ok(()) => line(S, Mark::Ok, format!("{}'s caBundle verifies the certificate {served_at}", e.name)),
            Err(why) => fail(
                S,
                format!("{}'s caBundle does not verify the certificate {served_at}: {why}", e.name),
                "the API server cannot call the webhook, and failurePolicy Ignore lets resizes through unjudged. \
                 The controller re-injects caBundle and renews the certificate within seconds when it leads (see the controller check); \
                 kubectl -n resize-guard delete secret resize-guard-webhook-tls makes it issue a new one",
            ),
        });
    }
    out.push(expiry_line(
        chain.first().and_then(tls::not_after),
        now,
        &served_at,
    ));
}

/// The serving certificate's remaining validity.
fn expiry_line(not_after: Option<SystemTime>, now: SystemTime, served_at: &str) -> Line {
    const S: &str = "certificates";
    let Some(not_after) = not_after else {
        return fail(
            S,
            format!("no readable certificate {served_at}"),
            "see the webhook's log: kubectl -n resize-guard logs deploy/resize-guard-webhook",
        );
    };
    let renew = "the controller renews the certificate at 2/3 of its lifetime when it leads (see the controller check); \
                 kubectl -n resize-guard delete secret resize-guard-webhook-tls makes it issue a new one now";
    match not_after.duration_since(now) {
        Err(past) => fail(
            S,
            format!(
                "the certificate {served_at} expired {} ago",
                age(past.duration())
            ),
            renew,
        ),
        Ok(left) if left < MIN_VALIDITY => fail(
            S,
            format!(
                "the certificate {served_at} expires in {} (less than 30d)",
                age(left)
            ),
            renew,
        ),
        Ok(left) => line(
            S,
            Mark::Ok,
            format!(
                "the certificate {served_at} is valid for {} more",
                age(left)
            ),
        ),
    }
}

/// `https://host:port/path` → host and port.
fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    Some((host, uri.port_u16().unwrap_or(443)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_needs_thirty_days_left() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let day = Duration::from_secs(86400);
        let l = expiry_line(Some(now + 89 * day), now, "served at h:1");
        assert_eq!(
            (l.mark, l.text.as_str()),
            (
                Mark::Ok,
                "the certificate served at h:1 is valid for 89d more"
            )
        );
        let l = expiry_line(Some(now + 12 * day), now, "served at h:1");
        assert_eq!(l.mark, Mark::Fail);
        assert_eq!(
            l.text,
            "the certificate served at h:1 expires in 12d (less than 30d)"
        );
        let l = expiry_line(Some(now - 3 * day), now, "served at h:1");
        assert_eq!(l.text, "the certificate served at h:1 expired 3d ago");
        assert_eq!(expiry_line(None, now, "x").mark, Mark::Fail);
    }

    #[test]
    fn urls_give_host_and_port() {
        assert_eq!(
            host_port("https://127.0.0.1:8443/mutate"),
            Some(("127.0.0.1".into(), 8443))
        );
        assert_eq!(
            host_port("https://[::1]:9443/x"),
            Some(("::1".into(), 9443))
        );
        assert_eq!(
            host_port("https://hook.example/x"),
            Some(("hook.example".into(), 443))
        );
    }
}
