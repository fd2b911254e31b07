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
//!
//! A seal proves who wrote a record, not that it is the latest: a resize that was re-planned
//! (a budget refused an eviction, a plan helped nobody) has several sealed records of one
//! generation, and the pod's author could put an earlier one back. [`PlanSeal::verify`] refuses
//! a record older than the newest this process wrote or read for the same pod and generation
//! ([`Untrusted::Superseded`]). The newest times live in the leader's memory: a new leader
//! learns them from the records it reads, so a record put back in the moment between two
//! leaders is taken as the latest once — and is still only resumed for the victims a fresh
//! reprieve over it needs (`crate::preemption::decision::spare_the_unneeded`).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
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
    /// Sealed by the controller, but an earlier record of the same generation than one the
    /// controller wrote or read since: put back by someone else.
    #[error(
        "the plan annotation is an earlier record (made {recorded}) than the latest resize-guard's controller made for this resize ({newest}): a superseded plan is never resumed"
    )]
    Superseded {
        /// The put-back record's time.
        recorded: Timestamp,
        /// The newest record's time for the same pod and generation.
        newest: Timestamp,
    },
}

/// How long the newest record's time is remembered for a pod (a resize Deferred longer than
/// this gets fresh plans that supersede each other anyway).
const NEWEST_TTL: SignedDuration = SignedDuration::from_hours(24);

/// The newest plan record's generation and time per preemptor UID.
#[derive(Debug, Default)]
struct Newest(Mutex<HashMap<String, (i64, Timestamp)>>);

impl Newest {
    /// Notes `rec` for the pod with UID `uid`; the record it supersedes, if `rec` is older than
    /// the newest known for the same generation.
    fn note(&self, uid: &str, rec: &PlanRecord) -> Option<Timestamp> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&(generation, newest)) = map.get(uid)
            && generation == rec.generation
            && rec.time < newest
        {
            return Some(newest);
        }
        let keep = match map.get(uid) {
            Some(&(generation, newest)) => rec.generation > generation || rec.time >= newest,
            None => true,
        };
        if keep {
            map.insert(uid.to_owned(), (rec.generation, rec.time));
        }
        let horizon = rec.time - NEWEST_TTL;
        map.retain(|_, (_, t)| *t >= horizon);
        None
    }
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

/// The plan-sealing key, loaded once per process (created on first need), and the newest
/// record seen for each preemptor.
pub struct PlanSeal {
    namespace: String,
    key: OnceCell<hmac::Key>,
    newest: Newest,
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
            newest: Newest::default(),
        }
    }

    /// A seal with a given key, for tests.
    #[cfg(any(test, feature = "testing"))]
    pub fn fixed(key: &[u8]) -> PlanSeal {
        PlanSeal {
            namespace: "resize-guard".into(),
            key: OnceCell::new_with(Some(hmac::Key::new(hmac::HMAC_SHA256, key))),
            newest: Newest::default(),
        }
    }

    /// `rec` sealed with `key` for the preemptor with UID `preemptor_uid`, noted as the newest
    /// record for that pod: any earlier record of the same generation is superseded from now on.
    pub fn seal(&self, key: &hmac::Key, rec: PlanRecord, preemptor_uid: &str) -> PlanRecord {
        self.newest.note(preemptor_uid, &rec);
        seal(key, rec, preemptor_uid)
    }

    /// The record on `pod`, if it carries one: [`verified`], and not older than the newest
    /// record of the same generation this process wrote or read for the pod.
    pub fn verify(
        &self,
        key: &hmac::Key,
        pod: &k8s_openapi::api::core::v1::Pod,
    ) -> Option<Result<PlanRecord, Untrusted>> {
        let rec = match verified(key, pod)? {
            Ok(rec) => rec,
            Err(why) => return Some(Err(why)),
        };
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        Some(match self.newest.note(uid, &rec) {
            Some(newest) => Err(Untrusted::Superseded {
                recorded: rec.time,
                newest,
            }),
            None => Ok(rec),
        })
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
    fn an_earlier_record_of_the_same_generation_put_back_is_superseded() {
        let seal = PlanSeal::fixed(&[7; 32]);
        let key = hmac::Key::new(hmac::HMAC_SHA256, &[7; 32]);
        let first = seal.seal(&key, record(), "u-app");
        let mut later = record();
        later.time = Timestamp::from_second(1_700_000_060).unwrap();
        later.victims[0].name = "other".into();
        let later = seal.seal(&key, later, "u-app");
        let on =
            |rec: &PlanRecord| seal.verify(&key, &pod_with("u-app", Some(rec.to_annotation())));
        assert_eq!(on(&later), Some(Ok(later.clone())));
        assert_eq!(
            on(&first),
            Some(Err(Untrusted::Superseded {
                recorded: first.time,
                newest: later.time
            }))
        );
        // A new generation's record is never superseded by an older generation's time.
        let mut next = record();
        next.generation = 3;
        let next = seal.seal(&key, next, "u-app");
        assert_eq!(on(&next), Some(Ok(next.clone())));
        // Another pod's records are its own.
        let other = seal.seal(&key, record(), "u-other");
        assert_eq!(
            seal.verify(&key, &pod_with("u-other", Some(other.to_annotation()))),
            Some(Ok(other))
        );
        // A replica that never wrote one learns the newest from what it reads.
        let fresh = PlanSeal::fixed(&[7; 32]);
        let read =
            |rec: &PlanRecord| fresh.verify(&key, &pod_with("u-app", Some(rec.to_annotation())));
        assert_eq!(read(&later), Some(Ok(later.clone())));
        assert!(matches!(
            read(&first),
            Some(Err(Untrusted::Superseded { .. }))
        ));
    }

    #[test]
    fn hex_round_trips_and_rejects_odd_or_bad_digits() {
        assert_eq!(unhex(&hex(&[0, 1, 254, 255])), Some(vec![0, 1, 254, 255]));
        for bad in ["", "a", "zz", "0g"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
