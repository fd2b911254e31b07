//! Pods and nodes decoded lean: straight from the API server's JSON into exactly what
//! [`crate::trim`] keeps, every other field skipped as it is read.
//!
//! Decoding a whole k8s-openapi `Pod` and then trimming it builds everything a decision never
//! reads — `managedFields` as JSON trees, the last-applied copy of the manifest, env, probes,
//! volumes — only to drop it: most of a review's time (two ~22 kB pods) and of a list's (a
//! page of pods at a time). [`LeanPod`] and [`LeanNode`] are the wire types of the view's
//! watches and of the webhook's AdmissionReview: serde skips an unread field without
//! allocating it, and what is read lands in the trimmed k8s-openapi object the rest of the code
//! uses. `trim/lossless.rs` checks that decoding a pod or node lean gives exactly what trimming the
//! whole one gives, on generated pods with noise and a real Deployment pod.
//!
//! Nulls and missing fields decode as k8s-openapi decodes them (a required list or string
//! absent or `null` is empty), and `apiVersion`/`kind`, when present, must name the type, as
//! k8s-openapi requires. A field nothing reads is not checked at all: a pod whose `hostNetwork`
//! is a string decodes here, where k8s-openapi would refuse the whole pod.

mod meta;
mod node;
mod pod;
#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

/// A pod decoded lean: the trimmed [`Pod`] inside.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeanPod(pub Pod);

/// A node decoded lean: the trimmed [`Node`] inside.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeanNode(pub Node);

impl<'de> Deserialize<'de> for LeanPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        pod::WirePod::deserialize(d).map(|w| Self(w.into()))
    }
}

impl<'de> Deserialize<'de> for LeanNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        node::WireNode::deserialize(d).map(|w| Self(w.into()))
    }
}

impl From<LeanPod> for Pod {
    fn from(p: LeanPod) -> Self {
        p.0
    }
}

impl From<LeanNode> for Node {
    fn from(n: LeanNode) -> Self {
        n.0
    }
}

/// The wire types name the API of the object they decode, so `kube::Api` lists and watches
/// them at the same URLs.
macro_rules! same_resource {
    ($lean:ty, $full:ty) => {
        impl k8s_openapi::Resource for $lean {
            const API_VERSION: &'static str = <$full as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$full as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$full as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$full as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str =
                <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$full as k8s_openapi::Resource>::Scope;
        }

        impl k8s_openapi::ListableResource for $lean {
            const LIST_KIND: &'static str = <$full as k8s_openapi::ListableResource>::LIST_KIND;
        }

        impl k8s_openapi::Metadata for $lean {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.0.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.0.metadata
            }
        }
    };
}

same_resource!(LeanPod, Pod);
same_resource!(LeanNode, Node);
