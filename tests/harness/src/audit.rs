//! What kube-apiserver's audit log ([`ControlPlane::audit_events`]) says the suites' programs
//! did: the evictions it answered, in the order it received them.

use k8s_openapi::jiff::Timestamp;

use crate::control_plane::ControlPlane;

/// An eviction kube-apiserver answered, from its audit log.
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    /// When kube-apiserver received it.
    pub received: Timestamp,
    /// The same, in seconds since the Unix epoch (milliseconds kept).
    pub at: f64,
    /// The victim's namespace.
    pub namespace: String,
    /// The victim's name.
    pub victim: String,
    /// Who sent it (a controller replica's identity is in its user agent).
    pub agent: String,
}

/// Every eviction kube-apiserver answered with HTTP `code` (201 granted, 429 refused by a
/// PodDisruptionBudget) in `namespaces`, in the order it received them.
pub fn evictions(cp: &ControlPlane, namespaces: &[&str], code: u16) -> Vec<Eviction> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let mut out: Vec<Eviction> = cp
        .audit_events()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "create"
                && e["objectRef"]["subresource"] == "eviction"
                && namespaces.contains(&e["objectRef"]["namespace"].as_str().unwrap_or_default())
                && e["responseStatus"]["code"] == code
        })
        .map(|e| {
            let received: Timestamp = e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("an audit event with no requestReceivedTimestamp: {e}"));
            Eviction {
                received,
                at: received.as_millisecond() as f64 / 1000.0,
                namespace: text(&e["objectRef"]["namespace"]),
                victim: text(&e["objectRef"]["name"]),
                agent: text(&e["userAgent"]),
            }
        })
        .collect();
    out.sort_by_key(|e| e.received);
    out
}
