//! What every lean object shares: the kept metadata, the annotation map read without the
//! last-applied copy, and k8s-openapi's treatment of `null` and of `apiVersion`/`kind`.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::Resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::{Error, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::trim::LAST_APPLIED;

/// What every lean object's JSON holds around its own fields: an `apiVersion` and a `kind`
/// naming `K` when present, the kept metadata, the object's spec and status.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "Spec: Deserialize<'de>, Status: Deserialize<'de>")
)]
pub(super) struct WireObject<K: Resource, Spec, Status> {
    #[serde(
        default,
        rename = "apiVersion",
        deserialize_with = "api_version_of::<K, _>"
    )]
    _api_version: PhantomData<K>,
    #[serde(default, rename = "kind", deserialize_with = "kind_of::<K, _>")]
    _kind: PhantomData<K>,
    #[serde(default, deserialize_with = "nullable")]
    pub(super) metadata: WireMeta,
    pub(super) spec: Option<Spec>,
    pub(super) status: Option<Status>,
}

/// The metadata [`crate::trim`] keeps.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<Annotations>,
    deletion_timestamp: Option<Time>,
    owner_references: Option<Vec<OwnerReference>>,
    creation_timestamp: Option<Time>,
}

impl From<WireMeta> for ObjectMeta {
    fn from(m: WireMeta) -> Self {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            labels: m.labels,
            annotations: m.annotations.map(|a| a.0).filter(|a| !a.is_empty()),
            deletion_timestamp: m.deletion_timestamp,
            owner_references: m.owner_references,
            creation_timestamp: m.creation_timestamp,
            ..Default::default()
        }
    }
}

/// Annotations without `kubectl.kubernetes.io/last-applied-configuration`, whose value (the
/// whole manifest again) is skipped, not read.
#[derive(Debug, Default)]
struct Annotations(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Skipping;
        impl<'de> Visitor<'de> for Skipping {
            type Value = Annotations;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of annotations")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Annotations, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == LAST_APPLIED {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        let value = map.next_value::<String>()?;
                        kept.insert(key, value);
                    }
                }
                Ok(Annotations(kept))
            }
        }
        d.deserialize_map(Skipping)
    }
}

/// A field k8s-openapi decodes as "absent or `null` is the default" (required strings, lists
/// and numbers).
pub(super) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `apiVersion` or `kind`, which k8s-openapi refuses unless it names the type.
fn must_be<'de, D: Deserializer<'de>>(d: D, want: &str) -> Result<(), D::Error> {
    let got = String::deserialize(d)?;
    if got == want {
        Ok(())
    } else {
        Err(D::Error::invalid_value(
            serde::de::Unexpected::Str(&got),
            &want,
        ))
    }
}

/// `apiVersion`, which must be `K`'s (`v1` for pods and nodes, of the core group).
fn api_version_of<'de, K: Resource, D: Deserializer<'de>>(
    d: D,
) -> Result<PhantomData<K>, D::Error> {
    must_be(d, K::API_VERSION).map(|()| PhantomData)
}

/// `kind`, which must be `K`'s.
fn kind_of<'de, K: Resource, D: Deserializer<'de>>(d: D) -> Result<PhantomData<K>, D::Error> {
    must_be(d, K::KIND).map(|()| PhantomData)
}
