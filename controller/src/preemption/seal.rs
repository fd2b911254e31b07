//! The preemption plan recorded on the preemptor, so a restarted or newly elected controller
//! resumes the same plan instead of choosing again. The record's formats live in the policy crate
//! ([`resize_guard_policy::plan`]) because `kubectl resize-guard explain` reads the clear part
//! too; when it is written is decided with the plan ([`crate::preemption::decision::Record`]).
//!
//! The annotation is on a pod its author may edit and read, so the controller trusts only
//! records it sealed and writes no other tenant's pod in clear: [`PlanSeal`] keeps a secret in
//! the Secret [`PLAN_KEY_SECRET`] of the install namespace (created by the first leader that
//! needs it, mounted by no pod, readable only by the controller's ServiceAccount), derives from
//! it with HKDF-SHA256 a ChaCha20-Poly1305 key ([`PlanKey`]), and [`seal`]s each record it
//! writes: the victim list encrypted under a fresh random nonce, with the clear part (format,
//! generation, time, count, own-namespace names) and the preemptor's UID as associated data, so
//! the tag covers every field and binds the record to its pod. [`verified`] opens a record
//! before it is resumed. A record that does not open is dropped with a Warning Event; one that
//! does is still re-checked against the rules of a fresh plan (`crate::preemption::decision`).
//!
//! A record of the older format (format 1: victims in clear beside an HMAC) is
//! [`Untrusted::Unreadable`]: it is dropped with `PreemptionPlanRejected` and the resize is
//! planned afresh. That is the safe direction — a fresh plan is checked against every rule,
//! and a resumed one would have been re-checked against the same rules anyway; the only cost is
//! that an upgrade in the middle of a plan may choose other victims than the one it replaced.
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
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta};
use resize_guard_policy::pod::PodKey;
use ring::{aead, hkdf};
use tokio::sync::OnceCell;

pub use resize_guard_policy::plan::{PLAN_ANNOTATION, PLAN_FORMAT, PlanRecord, SealedPlan};

use crate::preemption::write::WriteError;

/// The Secret (in the install namespace) holding the key that seals plan records.
pub const PLAN_KEY_SECRET: &str = "resize-guard-plan-key";
/// The key's entry in that Secret (named after the format-1 seal; its 32 random bytes are now
/// the HKDF input of [`PlanKey`], so an install keeps its Secret across the format change).
pub const PLAN_KEY_FIELD: &str = "hmac-sha256";
/// Secret length: at least the 32 bytes of the derived key.
const KEY_BYTES: usize = 32;
/// HKDF `info` for the record cipher's key: distinct from any other use of the same secret.
const AEAD_INFO: &[u8] = b"resize-guard.io/preemption v2 victims chacha20-poly1305";

/// The key that seals plan records: ChaCha20-Poly1305 under a key derived with HKDF-SHA256 from
/// the Secret's bytes.
pub struct PlanKey {
    aead: aead::LessSafeKey,
}

impl std::fmt::Debug for PlanKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanKey").finish_non_exhaustive()
    }
}

impl PlanKey {
    /// The record key derived from `secret` (`None` if it is shorter than 32 bytes).
    pub fn new(secret: &[u8]) -> Option<PlanKey> {
        if secret.len() < KEY_BYTES {
            return None;
        }
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &[]).extract(secret);
        let okm = prk.expand(&[AEAD_INFO], &aead::CHACHA20_POLY1305).ok()?;
        Some(PlanKey {
            aead: aead::LessSafeKey::new(aead::UnboundKey::from(okm)),
        })
    }
}

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
    /// Could not draw random bytes for a new key or a record's nonce.
    #[error("drawing random bytes (a new key or a plan record's nonce)")]
    Random,
    /// The cipher refused to seal a record.
    #[error("sealing the plan record")]
    Seal,
}

/// The plan-sealing key, loaded once per process (created on first need), and the newest
/// record seen for each preemptor.
pub struct PlanSeal {
    namespace: String,
    key: OnceCell<PlanKey>,
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
            key: OnceCell::new_with(PlanKey::new(key)),
            newest: Newest::default(),
        }
    }

    /// `rec` sealed with `key` for `preemptor`, noted as the newest record for that pod: any
    /// earlier record of the same generation is superseded from now on.
    pub fn seal(
        &self,
        key: &PlanKey,
        rec: &PlanRecord,
        preemptor: &Pod,
    ) -> Result<SealedPlan, KeyError> {
        let sealed = seal(key, rec, preemptor)?;
        self.newest
            .note(preemptor.metadata.uid.as_deref().unwrap_or_default(), rec);
        Ok(sealed)
    }

    /// The record on `pod`, if it carries one: [`verified`], and not older than the newest
    /// record of the same generation this process wrote or read for the pod.
    pub fn verify(&self, key: &PlanKey, pod: &Pod) -> Option<Result<PlanRecord, Untrusted>> {
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
    pub async fn key<F, Fut>(&self, client: &kube::Client, create: F) -> Result<&PlanKey, KeyError>
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
                    Ok(()) => PlanKey::new(&bytes).ok_or(KeyError::Malformed {
                        namespace: self.namespace.clone(),
                    }),
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

    fn parse(&self, s: &Secret) -> Result<PlanKey, KeyError> {
        s.data
            .as_ref()
            .and_then(|d| d.get(PLAN_KEY_FIELD))
            .and_then(|k| PlanKey::new(&k.0))
            .ok_or(KeyError::Malformed {
                namespace: self.namespace.clone(),
            })
    }
}

/// `rec` sealed for `preemptor`: the clear part its namespace may read, the victims encrypted
/// under a fresh random nonce (96 random bits per record: a repeat under one key is negligible
/// at the few records a cluster writes), the tag over both and the preemptor's UID.
pub fn seal(key: &PlanKey, rec: &PlanRecord, preemptor: &Pod) -> Result<SealedPlan, KeyError> {
    let namespace = preemptor.metadata.namespace.as_deref().unwrap_or_default();
    let uid = preemptor.metadata.uid.as_deref().unwrap_or_default();
    let mut nonce = [0u8; aead::NONCE_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
        .map_err(|_| KeyError::Random)?;
    let mut out = SealedPlan {
        v: PLAN_FORMAT,
        generation: rec.generation,
        time: rec.time,
        count: rec.victims.len(),
        own: rec.names_in(namespace),
        nonce: hex(&nonce),
        sealed: String::new(),
    };
    let mut buf = serde_json::to_vec(&rec.victims).map_err(|_| KeyError::Seal)?;
    key.aead
        .seal_in_place_append_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(out.associated_data(uid)),
            &mut buf,
        )
        .map_err(|_| KeyError::Seal)?;
    out.sealed = hex(&buf);
    Ok(out)
}

/// The record on `pod`, if it carries one: opened, or why it may not be acted on.
pub fn verified(key: &PlanKey, pod: &Pod) -> Option<Result<PlanRecord, Untrusted>> {
    Some(match SealedPlan::read(pod)? {
        Ok(clear) => open(key, &clear, pod).ok_or(Untrusted::BadSeal),
        Err(why) => Err(Untrusted::Unreadable(why)),
    })
}

/// `clear`'s victims, if it opens under `key` for `pod` and its clear part agrees with them.
fn open(key: &PlanKey, clear: &SealedPlan, pod: &Pod) -> Option<PlanRecord> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let nonce = aead::Nonce::try_assume_unique_for_key(&unhex(&clear.nonce)?).ok()?;
    let mut buf = unhex(&clear.sealed)?;
    let plain = key
        .aead
        .open_in_place(nonce, aead::Aad::from(clear.associated_data(uid)), &mut buf)
        .ok()?;
    let rec = PlanRecord {
        generation: clear.generation,
        victims: serde_json::from_slice::<Vec<PodKey>>(plain).ok()?,
        time: clear.time,
    };
    // Only this controller's key seals, and it writes the clear part from the same list; a
    // disagreement is still refused rather than believed.
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    (rec.victims.len() == clear.count && rec.names_in(namespace) == clear.own).then_some(rec)
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

    fn key_of(byte: u8) -> PlanKey {
        PlanKey::new(&[byte; 32]).unwrap()
    }

    fn victim(namespace: &str, name: &str) -> PodKey {
        PodKey {
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("u-{name}"),
        }
    }

    /// A plan of the preemptor in `shop`: one victim in another tenant's namespace, one in its own.
    fn record() -> PlanRecord {
        PlanRecord {
            generation: 2,
            victims: vec![victim("batch", "filler"), victim("shop", "spare")],
            time: Timestamp::from_second(1_700_000_000).unwrap(),
        }
    }

    fn pod_with(uid: &str, annotation: Option<String>) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("shop".into());
        p.metadata.uid = Some(uid.into());
        p.metadata.annotations = annotation.map(|a| [(PLAN_ANNOTATION.to_owned(), a)].into());
        p
    }

    fn sealed_for(key: &PlanKey, rec: &PlanRecord, uid: &str) -> SealedPlan {
        seal(key, rec, &pod_with(uid, None)).unwrap()
    }

    #[test]
    fn a_sealed_record_opens_on_its_own_pod_only() {
        let key = key_of(7);
        let rec = sealed_for(&key, &record(), "u-app");
        let on = |uid: &str| verified(&key, &pod_with(uid, Some(rec.to_annotation())));
        assert_eq!(on("u-app"), Some(Ok(record())));
        assert_eq!(on("u-other"), Some(Err(Untrusted::BadSeal)));
        // The same UID in another namespace is another pod's record too.
        let mut elsewhere = pod_with("u-app", Some(rec.to_annotation()));
        elsewhere.metadata.namespace = Some("batch".into());
        assert_eq!(verified(&key, &elsewhere), Some(Err(Untrusted::BadSeal)));
    }

    #[test]
    fn the_annotation_names_no_pod_of_another_namespace() {
        let key = key_of(7);
        let rec = sealed_for(&key, &record(), "u-app");
        assert_eq!(rec.v, PLAN_FORMAT);
        assert_eq!(rec.count, 2);
        assert_eq!(rec.own, ["spare"]);
        let text = rec.to_annotation();
        for secret in ["batch", "filler", "u-filler", "u-spare"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        // A fresh nonce per record: the same plan sealed twice differs.
        let again = sealed_for(&key, &record(), "u-app");
        assert_ne!(rec.nonce, again.nonce);
        assert_ne!(rec.sealed, again.sealed);
    }

    #[test]
    fn tampered_unsealed_or_foreign_key_records_do_not_open() {
        let key = key_of(7);
        let good = sealed_for(&key, &record(), "u-app");
        let flip = |hex: &str| {
            let mut b = unhex(hex).unwrap();
            b[0] ^= 1;
            super::hex(&b)
        };
        let tampered: [(&str, SealedPlan); 8] = [
            (
                "ciphertext",
                SealedPlan {
                    sealed: flip(&good.sealed),
                    ..good.clone()
                },
            ),
            (
                "nonce",
                SealedPlan {
                    nonce: flip(&good.nonce),
                    ..good.clone()
                },
            ),
            (
                "short nonce",
                SealedPlan {
                    nonce: "00".into(),
                    ..good.clone()
                },
            ),
            (
                "not hex",
                SealedPlan {
                    sealed: "zz".into(),
                    ..good.clone()
                },
            ),
            (
                "generation",
                SealedPlan {
                    generation: 3,
                    ..good.clone()
                },
            ),
            (
                "count",
                SealedPlan {
                    count: 1,
                    ..good.clone()
                },
            ),
            (
                "own names",
                SealedPlan {
                    own: vec!["kube-dns".into()],
                    ..good.clone()
                },
            ),
            (
                "time",
                SealedPlan {
                    time: Timestamp::from_second(1_700_000_001).unwrap(),
                    ..good.clone()
                },
            ),
        ];
        for (what, rec) in tampered {
            let pod = pod_with("u-app", Some(rec.to_annotation()));
            assert_eq!(
                verified(&key, &pod),
                Some(Err(Untrusted::BadSeal)),
                "{what}"
            );
        }
        let foreign = sealed_for(&key_of(8), &record(), "u-app");
        let pod = pod_with("u-app", Some(foreign.to_annotation()));
        assert_eq!(verified(&key, &pod), Some(Err(Untrusted::BadSeal)));

        let garbage = pod_with("u-app", Some("{oops".into()));
        assert!(matches!(
            verified(&key, &garbage),
            Some(Err(Untrusted::Unreadable(_)))
        ));
        assert_eq!(verified(&key, &pod_with("u-app", None)), None);
    }

    #[test]
    fn a_format_one_record_is_unreadable_and_so_dropped() {
        // What the previous controller wrote: victims in clear, an HMAC beside them.
        let v1 = r#"{"generation":2,"victims":[{"namespace":"batch","name":"filler","uid":"u-filler"}],"time":"2023-11-14T22:13:20Z","mac":"00ff"}"#;
        let pod = pod_with("u-app", Some(v1.into()));
        match verified(&key_of(7), &pod) {
            Some(Err(Untrusted::Unreadable(why))) => assert!(why.contains("older format"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_record_key_is_derived_not_the_secret_itself() {
        assert!(PlanKey::new(&[7; 31]).is_none());
        // Sealed with the Secret's bytes used directly as the cipher key: does not open.
        let raw = PlanKey {
            aead: aead::LessSafeKey::new(
                aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &[7; 32]).unwrap(),
            ),
        };
        let rec = sealed_for(&raw, &record(), "u-app");
        let pod = pod_with("u-app", Some(rec.to_annotation()));
        assert_eq!(verified(&key_of(7), &pod), Some(Err(Untrusted::BadSeal)));
    }

    #[test]
    fn an_earlier_record_of_the_same_generation_put_back_is_superseded() {
        let seal = PlanSeal::fixed(&[7; 32]);
        let key = key_of(7);
        let app = pod_with("u-app", None);
        let first = seal.seal(&key, &record(), &app).unwrap();
        let mut later = record();
        later.time = Timestamp::from_second(1_700_000_060).unwrap();
        later.victims[0].name = "other".into();
        let later_sealed = seal.seal(&key, &later, &app).unwrap();
        let on =
            |rec: &SealedPlan| seal.verify(&key, &pod_with("u-app", Some(rec.to_annotation())));
        assert_eq!(on(&later_sealed), Some(Ok(later.clone())));
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
        let next_sealed = seal.seal(&key, &next, &app).unwrap();
        assert_eq!(on(&next_sealed), Some(Ok(next)));
        // Another pod's records are its own.
        let other = seal
            .seal(&key, &record(), &pod_with("u-other", None))
            .unwrap();
        assert_eq!(
            seal.verify(&key, &pod_with("u-other", Some(other.to_annotation()))),
            Some(Ok(record()))
        );
        // A replica that never wrote one learns the newest from what it reads.
        let fresh = PlanSeal::fixed(&[7; 32]);
        let read =
            |rec: &SealedPlan| fresh.verify(&key, &pod_with("u-app", Some(rec.to_annotation())));
        assert_eq!(read(&later_sealed), Some(Ok(later)));
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
