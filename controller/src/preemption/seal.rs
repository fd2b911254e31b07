//! The preemption plan recorded on the preemptor, so a restarted or newly elected controller
//! resumes the same plan instead of choosing again. The record's type lives in the policy crate
//! ([`resize_guard_policy::plan`]) because `kubectl resize-guard explain` reads it too; when it
//! is written is decided with the plan ([`crate::preemption::decision::Record`]).
//!
//! The annotation is on a pod its author may edit, so the controller trusts only records it
//! sealed: [`PlanSeal`] keeps an HMAC-SHA256 key in the Secret [`PLAN_KEY_SECRET`] of the
//! install namespace (created by the first leader that needs it, mounted by no pod, readable
//! only by the controller's ServiceAccount), seals each record it writes over the preemptor's
//! UID and every field, and [`verified`] checks a record before it is resumed. A record
//! that does not verify is dropped with a Warning Event; one that does is still re-checked
//! against the rules of a fresh plan (`crate::preemption::decision`).

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta};
use ring::hmac;
use tokio::sync::OnceCell;

pub use resize_guard_policy::plan::{PLAN_ANNOTATION, PlanRecord};

use crate::preemption::actuate::WriteError;

/// The Secret (in the install namespace) holding the key that seals plan records.
pub const PLAN_KEY_SECRET: &str = "resize-guard-plan-key";
/// The key's entry in that Secret.
pub const PLAN_KEY_FIELD: &str = "hmac-sha256";
/// Key length: the HMAC-SHA256 block-size recommendation of RFC 2104 is at least the output
/// length (32 bytes).
const KEY_BYTES: usize = 32;

/// Why a record may not be acted on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Untrusted {
    /// The annotation is not a plan record.
    #[error("the plan annotation is unreadable ({0})")]
    Unreadable(String),
    /// No seal, or a seal that does not verify for this pod.
    #[error(
        "the plan annotation was not written by resize-guard's controller for this pod (its seal does not verify)"
    )]
    BadSeal,
}

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Reading the Secret failed.
    #[error("reading Secret {namespace}/{PLAN_KEY_SECRET}")]
    Api {
        /// The install namespace.
        namespace: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Creating the Secret failed (or was not made: this replica does not lead).
    #[error("creating Secret {namespace}/{PLAN_KEY_SECRET}")]
    Create {
        /// The install namespace.
        namespace: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// The Secret exists but holds no usable key.
    #[error(
        "Secret {namespace}/{PLAN_KEY_SECRET} has no {PLAN_KEY_FIELD} entry of at least {KEY_BYTES} bytes; delete it and the controller creates a new key"
    )]
    Malformed {
        /// The install namespace.
        namespace: String,
    },
    /// Could not draw random bytes for a new key.
    #[error("drawing a random key")]
    Random,
}

/// The plan-sealing key, loaded once per process (created on first need).
pub struct PlanSeal {
    namespace: String,
    key: OnceCell<hmac::Key>,
}

impl std::fmt::Debug for PlanSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanSeal")
            .field("namespace", &self.namespace)
            .field("loaded", &self.key.initialized())
            .finish_non_exhaustive()
    }
}

impl PlanSeal {
    /// A seal whose key lives in `namespace` (loaded on first use).
    pub fn new(namespace: &str) -> PlanSeal {
        PlanSeal {
            namespace: namespace.to_owned(),
            key: OnceCell::new(),
        }
    }

    /// A seal with a given key, for tests.
    #[cfg(any(test, feature = "testing"))]
    pub fn fixed(key: &[u8]) -> PlanSeal {
        PlanSeal {
            namespace: "resize-guard".into(),
            key: OnceCell::new_with(Some(hmac::Key::new(hmac::HMAC_SHA256, key))),
        }
    }

    /// The key: read from the Secret, or created there when it does not exist. `create` makes
    /// the one write (the caller fences it); losing a create race reads the winner's key.
    pub async fn key<F, Fut>(
        &self,
        client: &kube::Client,
        create: F,
    ) -> Result<&hmac::Key, KeyError>
    where
        F: FnOnce(Api<Secret>, Secret) -> Fut,
        Fut: std::future::Future<Output = Result<(), WriteError>>,
    {
        self.key
            .get_or_try_init(|| async {
                let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
                let api_error = |source| KeyError::Api {
                    namespace: self.namespace.clone(),
                    source,
                };
                if let Some(s) = api.get_opt(PLAN_KEY_SECRET).await.map_err(api_error)? {
                    return self.parse(&s);
                }
                let mut bytes = [0u8; KEY_BYTES];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
                    .map_err(|_| KeyError::Random)?;
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(PLAN_KEY_SECRET.to_owned()),
                        namespace: Some(self.namespace.clone()),
                        labels: Some(
                            [(
                                "app.kubernetes.io/part-of".to_owned(),
                                "resize-guard".to_owned(),
                            )]
                            .into(),
                        ),
                        ..Default::default()
                    },
                    data: Some([(PLAN_KEY_FIELD.to_owned(), ByteString(bytes.to_vec()))].into()),
                    type_: Some("Opaque".into()),
                    ..Default::default()
                };
                match create(api.clone(), secret).await {
                    Ok(()) => Ok(hmac::Key::new(hmac::HMAC_SHA256, &bytes)),
                    Err(e) if e.status() == Some(409) => {
                        let s = api.get(PLAN_KEY_SECRET).await.map_err(api_error)?;
                        self.parse(&s)
                    }
                    Err(source) => Err(KeyError::Create {
                        namespace: self.namespace.clone(),
                        source,
                    }),
                }
            })
            .await
    }

    fn parse(&self, s: &Secret) -> Result<hmac::Key, KeyError> {
        match s.data.as_ref().and_then(|d| d.get(PLAN_KEY_FIELD)) {
            Some(k) if k.0.len() >= KEY_BYTES => Ok(hmac::Key::new(hmac::HMAC_SHA256, &k.0)),
            _ => Err(KeyError::Malformed {
                namespace: self.namespace.clone(),
            }),
        }
    }
}

/// `rec` sealed for the preemptor with UID `preemptor_uid`.
pub fn seal(key: &hmac::Key, mut rec: PlanRecord, preemptor_uid: &str) -> PlanRecord {
    let tag = hmac::sign(key, &rec.sealed_message(preemptor_uid));
    rec.mac = hex(tag.as_ref());
    rec
}

/// The record on `pod`, if it carries one: verified, or why it may not be acted on.
pub fn verified(
    key: &hmac::Key,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> Option<Result<PlanRecord, Untrusted>> {
    let rec = match PlanRecord::read(pod)? {
        Ok(rec) => rec,
        Err(why) => return Some(Err(Untrusted::Unreadable(why))),
    };
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let ok = unhex(&rec.mac)
        .is_some_and(|tag| hmac::verify(key, &rec.sealed_message(uid), &tag).is_ok());
    Some(if ok { Ok(rec) } else { Err(Untrusted::BadSeal) })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.is_empty() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::jiff::Timestamp;
    use resize_guard_policy::pod::PodKey;

    fn record() -> PlanRecord {
        PlanRecord {
            generation: 2,
            victims: vec![PodKey {
                namespace: "batch".into(),
                name: "filler".into(),
                uid: "u-filler".into(),
            }],
            time: Timestamp::from_second(1_700_000_000).unwrap(),
            mac: String::new(),
        }
    }

    fn pod_with(uid: &str, annotation: Option<String>) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.annotations = annotation.map(|a| [(PLAN_ANNOTATION.to_owned(), a)].into());
        p
    }

    #[test]
    fn a_sealed_record_verifies_on_its_own_pod_only() {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &[7; 32]);
        let rec = seal(&key, record(), "u-app");
        let on = |uid: &str| verified(&key, &pod_with(uid, Some(rec.to_annotation())));
        assert_eq!(on("u-app"), Some(Ok(rec.clone())));
        assert_eq!(on("u-other"), Some(Err(Untrusted::BadSeal)));
    }

    #[test]
    fn unsealed_edited_or_foreign_key_records_do_not_verify() {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &[7; 32]);
        let planted = pod_with("u-app", Some(record().to_annotation()));
        assert_eq!(verified(&key, &planted), Some(Err(Untrusted::BadSeal)));

        let mut edited = seal(&key, record(), "u-app");
        edited.victims[0].uid = "u-kube-dns".into();
        let edited = pod_with("u-app", Some(edited.to_annotation()));
        assert_eq!(verified(&key, &edited), Some(Err(Untrusted::BadSeal)));

        let other = hmac::Key::new(hmac::HMAC_SHA256, &[8; 32]);
        let foreign = pod_with(
            "u-app",
            Some(seal(&other, record(), "u-app").to_annotation()),
        );
        assert_eq!(verified(&key, &foreign), Some(Err(Untrusted::BadSeal)));

        let garbage = pod_with("u-app", Some("{oops".into()));
        assert!(matches!(
            verified(&key, &garbage),
            Some(Err(Untrusted::Unreadable(_)))
        ));
        assert_eq!(verified(&key, &pod_with("u-app", None)), None);
    }

    #[test]
    fn hex_round_trips_and_rejects_odd_or_bad_digits() {
        assert_eq!(unhex(&hex(&[0, 1, 254, 255])), Some(vec![0, 1, 254, 255]));
        for bad in ["", "a", "zz", "0g"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
