//! The two Secrets, as data: what each key and annotation means, [`Stored`] (the plain contents
//! of a Secret as read, what the decision looks at) and the Secrets the actuator writes
//! ([`ca_secret`], [`serving_secret`]), built from values without touching the API.
//!
//! | Secret | type | keys | read by |
//! |---|---|---|---|
//! | `resize-guard-ca` | Opaque | `ca.crt`, `ca.key` (signs leaves); `next-ca.crt`, `next-ca.key` (rotation phase 1: trusted, not yet signing); `previous-ca.crt` (phase 2: still trusted); annotation `resize-guard.io/ca-rotation-since` (when the current phase began, RFC 3339) | the controller only; no pod mounts it |
//! | `resize-guard-webhook-tls` | `kubernetes.io/tls` | `tls.crt`, `tls.key`, `ca.crt` (the signing CA) | every webhook replica, through a watch on its name |

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use resize_guard_certs::{Authority, CertError, Leaf};

use super::rotation::{CaPlan, CaSlots, Material};

/// The CA that signs serving certificates.
pub const CA_CERT: &str = "ca.crt";
/// Its private key.
pub const CA_KEY: &str = "ca.key";
/// Rotation phase 1: the successor, in caBundle but not yet signing.
pub const NEXT_CA_CERT: &str = "next-ca.crt";
/// The successor's private key.
pub const NEXT_CA_KEY: &str = "next-ca.key";
/// Rotation phase 2: the predecessor, still in caBundle while its leaves may be served.
pub const PREVIOUS_CA_CERT: &str = "previous-ca.crt";
/// When the current rotation phase began (RFC 3339), present only during a rotation.
pub const ROTATION_SINCE: &str = "resize-guard.io/ca-rotation-since";

/// The serving certificate.
pub const TLS_CERT: &str = "tls.crt";
/// Its private key.
pub const TLS_KEY: &str = "tls.key";
/// The type of the serving Secret.
pub const TLS_TYPE: &str = "kubernetes.io/tls";

/// Who writes the Secrets and caBundle (server-side apply field manager, Secret label).
pub const MANAGER: &str = "resize-guard-controller";

/// The plain contents of a Secret as read. `Debug` lists the keys, not the values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// `type`.
    pub type_: Option<String>,
    /// `data` (with `stringData` never present on read).
    pub data: BTreeMap<String, Vec<u8>>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("type_", &self.type_)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .field("annotations", &self.annotations)
            .finish()
    }
}

impl Stored {
    /// The contents of `secret`.
    pub fn from_secret(secret: &Secret) -> Stored {
        Stored {
            type_: secret.type_.clone(),
            data: secret
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
            annotations: secret.metadata.annotations.clone().unwrap_or_default(),
        }
    }

    /// Whether `key` is present (even if empty).
    pub fn has(&self, key: &str) -> bool {
        self.data.contains_key(key)
    }

    /// The value of `key` as text, or why there is none.
    pub fn text(&self, key: &str) -> Result<&str, String> {
        match self.data.get(key) {
            None => Err(format!("has no {key}")),
            Some(v) if v.is_empty() => Err(format!("has an empty {key}")),
            Some(v) => std::str::from_utf8(v).map_err(|_| format!("{key} is not text")),
        }
    }
}

/// What the CA Secret holds after a write: every slot resolved to real material.
pub type CaContents = CaSlots<Authority>;

impl CaContents {
    /// What the CA Secret holds once `plan` is carried out: every [`Material::Generate`] issued
    /// as a new CA valid for `validity` from `now`, every kept CA as it is.
    pub fn of(plan: &CaPlan, validity: Duration, now: SystemTime) -> Result<CaContents, CertError> {
        let resolve = |m: &Material| match m {
            Material::Keep(a) => Ok(a.clone()),
            Material::Generate => Authority::issue(validity, now),
        };
        Ok(CaContents {
            current: resolve(&plan.current)?,
            next: plan.next.as_ref().map(resolve).transpose()?,
            previous: plan.previous.clone(),
            rotation_since: plan.rotation_since,
        })
    }
}

/// `t` as RFC 3339 with whole seconds (annotations, messages).
pub fn rfc3339(t: SystemTime) -> String {
    Timestamp::try_from(t)
        .and_then(|t| Timestamp::from_second(t.as_second()))
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{t:?}"))
}

/// Parses an RFC 3339 timestamp.
pub fn parse_rfc3339(s: &str) -> Result<SystemTime, String> {
    s.parse::<Timestamp>()
        .map(SystemTime::from)
        .map_err(|e| format!("{s:?} is not an RFC 3339 time: {e}"))
}

/// The CA Secret holding `contents`, written over `existing` (keeping its other metadata and
/// its resourceVersion, so the write fails if someone changed it since it was read) or new.
pub fn ca_secret(
    namespace: &str,
    name: &str,
    contents: &CaContents,
    existing: Option<&Secret>,
) -> Secret {
    let mut data = BTreeMap::new();
    let mut put = |key: &str, value: &str| {
        data.insert(key.to_owned(), ByteString(value.as_bytes().to_vec()));
    };
    put(CA_CERT, contents.current.cert_pem());
    put(CA_KEY, contents.current.key_pem());
    if let Some(next) = &contents.next {
        put(NEXT_CA_CERT, next.cert_pem());
        put(NEXT_CA_KEY, next.key_pem());
    }
    if let Some(previous) = &contents.previous {
        put(PREVIOUS_CA_CERT, previous);
    }
    let mut secret = base(namespace, name, existing, "Opaque");
    let annotations = secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    match contents.rotation_since {
        Some(t) => {
            annotations.insert(ROTATION_SINCE.to_owned(), rfc3339(t));
        }
        None => {
            annotations.remove(ROTATION_SINCE);
        }
    }
    if annotations.is_empty() {
        secret.metadata.annotations = None;
    }
    secret.data = Some(data);
    secret
}

/// The serving Secret holding `leaf` and its signing CA, over `existing` or new (see
/// [`ca_secret`]).
pub fn serving_secret(
    namespace: &str,
    name: &str,
    leaf: &Leaf,
    ca_cert_pem: &str,
    existing: Option<&Secret>,
) -> Secret {
    let mut secret = base(namespace, name, existing, TLS_TYPE);
    secret.data = Some(BTreeMap::from([
        (
            TLS_CERT.to_owned(),
            ByteString(leaf.cert_pem.clone().into_bytes()),
        ),
        (
            TLS_KEY.to_owned(),
            ByteString(leaf.key_pem.clone().into_bytes()),
        ),
        (
            CA_CERT.to_owned(),
            ByteString(ca_cert_pem.as_bytes().to_vec()),
        ),
    ]));
    secret
}

fn base(namespace: &str, name: &str, existing: Option<&Secret>, type_: &str) -> Secret {
    let mut secret = existing.cloned().unwrap_or_else(|| Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some(type_.to_owned()),
        ..Secret::default()
    });
    // `type` cannot change in place: a differing one makes the actuator delete and re-create.
    secret.type_ = Some(type_.to_owned());
    secret.string_data = None;
    secret.metadata.managed_fields = None;
    secret
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGER.to_owned(),
        );
    secret
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn authority() -> Authority {
        Authority::issue(Duration::from_secs(3600), SystemTime::now()).unwrap()
    }

    #[test]
    fn the_ca_secret_round_trips_every_slot_and_the_timestamp() {
        let (current, next) = (authority(), authority());
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let contents = CaContents {
            current: current.clone(),
            next: Some(next.clone()),
            previous: Some("PREVIOUS".into()),
            rotation_since: Some(since),
        };
        let secret = ca_secret("ns", "resize-guard-ca", &contents, None);
        assert_eq!(secret.type_.as_deref(), Some("Opaque"));
        let stored = Stored::from_secret(&secret);
        assert_eq!(stored.text(CA_CERT).unwrap(), current.cert_pem());
        assert_eq!(stored.text(NEXT_CA_KEY).unwrap(), next.key_pem());
        assert_eq!(stored.text(PREVIOUS_CA_CERT).unwrap(), "PREVIOUS");
        let ts = &stored.annotations[ROTATION_SINCE];
        assert_eq!(ts, "2030-03-17T17:46:40Z");
        assert_eq!(parse_rfc3339(ts).unwrap(), since);
        assert!(!format!("{stored:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn a_rewrite_keeps_foreign_metadata_and_the_resource_version_but_drops_old_keys() {
        let mut existing = ca_secret(
            "ns",
            "ca",
            &CaContents {
                current: authority(),
                next: Some(authority()),
                previous: None,
                rotation_since: Some(SystemTime::now()),
            },
            None,
        );
        existing.metadata.resource_version = Some("42".into());
        existing
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("team".into(), "platform".into());
        let done = CaContents {
            current: authority(),
            next: None,
            previous: None,
            rotation_since: None,
        };
        let secret = ca_secret("ns", "ca", &done, Some(&existing));
        assert_eq!(secret.metadata.resource_version.as_deref(), Some("42"));
        let stored = Stored::from_secret(&secret);
        assert!(!stored.has(NEXT_CA_CERT) && !stored.has(NEXT_CA_KEY));
        assert!(!stored.annotations.contains_key(ROTATION_SINCE));
        assert_eq!(stored.annotations["team"], "platform");
    }

    #[test]
    fn the_serving_secret_is_a_tls_secret_with_the_signing_ca() {
        let ca = authority();
        let leaf = ca
            .sign(
                &resize_guard_certs::CertSpec::for_loopback(),
                SystemTime::now(),
            )
            .unwrap();
        let secret = serving_secret("ns", "tls", &leaf, ca.cert_pem(), None);
        assert_eq!(secret.type_.as_deref(), Some(TLS_TYPE));
        let stored = Stored::from_secret(&secret);
        assert_eq!(stored.text(TLS_CERT).unwrap(), leaf.cert_pem);
        assert_eq!(stored.text(CA_CERT).unwrap(), ca.cert_pem());
        assert_eq!(
            secret.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
            MANAGER
        );
    }

    #[test]
    fn text_says_what_is_wrong_with_a_key() {
        let mut s = Stored::default();
        assert_eq!(s.text("ca.crt").unwrap_err(), "has no ca.crt");
        s.data.insert("ca.crt".into(), Vec::new());
        assert_eq!(s.text("ca.crt").unwrap_err(), "has an empty ca.crt");
        s.data.insert("ca.crt".into(), vec![0xff, 0xfe]);
        assert_eq!(s.text("ca.crt").unwrap_err(), "ca.crt is not text");
    }

    #[test]
    fn garbage_timestamps_are_refused() {
        assert!(parse_rfc3339("yesterday").is_err());
    }
}
