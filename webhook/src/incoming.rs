//! The AdmissionReview as it arrives, decoded in one streaming pass.
//!
//! kube's `AdmissionReview<T>` flattens its `TypeMeta` (`#[serde(flatten)]`), which makes serde
//! buffer the whole document into an intermediate tree before building the objects: every body
//! was tokenized into that tree and then decoded again (and, before this module, after a third
//! pass that read the routing fields). [`Incoming`] names only the fields a review reads, with no
//! flattening, so serde_json builds the two pods straight from the bytes and skips everything
//! else without allocating it. The same shape with [`serde::de::IgnoredAny`] objects reads only
//! the routing fields; the adapter ([`crate::review`]) runs that pass only when the typed one
//! failed, to tell a request it does not judge from a broken one.

use serde::Deserialize;

/// An AdmissionReview: `O` is the object type (`Pod`, or `IgnoredAny` to skip them).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Incoming<O> {
    /// `admission.k8s.io/v1` is the only version served.
    #[serde(default)]
    pub api_version: String,
    /// The request (absent in a malformed review).
    pub request: Option<IncomingRequest<O>>,
}

/// The fields of an `AdmissionRequest` the webhook reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IncomingRequest<O> {
    /// Echoed in the response.
    #[serde(default)]
    pub uid: String,
    /// What is being admitted.
    #[serde(default)]
    pub resource: GroupResource,
    /// `resize` for the requests judged here.
    #[serde(default)]
    pub sub_resource: String,
    /// `UPDATE` for the requests judged here.
    #[serde(default)]
    pub operation: String,
    /// A dry run: no side effects (no Event).
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// The object after the change.
    pub object: Option<O>,
    /// The object before the change.
    pub old_object: Option<O>,
    /// The pod's name (for the log line of a denial).
    #[serde(default)]
    pub name: String,
    /// The pod's namespace (for the log line of a denial).
    #[serde(default)]
    pub namespace: String,
    /// Who asked (for the log line of a denial).
    #[serde(default)]
    pub user_info: IncomingUser,
}

/// `request.userInfo`: the authenticated user the API server names.
#[derive(Debug, Default, Deserialize)]
pub struct IncomingUser {
    /// `userInfo.username` (`system:serviceaccount:ns:name` for a service account).
    #[serde(default)]
    pub username: String,
}

/// `request.resource` without the version.
#[derive(Debug, Deserialize, Default)]
pub struct GroupResource {
    /// The API group (`""` for the core group).
    #[serde(default)]
    pub group: String,
    /// The resource (`pods`).
    #[serde(default)]
    pub resource: String,
}

impl<O> IncomingRequest<O> {
    /// Why this is not a `pods/resize` UPDATE, if it is not.
    pub fn not_ours(&self) -> Option<String> {
        let r = &self.resource;
        if !r.group.is_empty() || r.resource != "pods" || self.sub_resource != "resize" {
            let group = if r.group.is_empty() {
                String::new()
            } else {
                format!("{}/", r.group)
            };
            return Some(format!(
                "this request is for {group}{}/{}",
                r.resource, self.sub_resource
            ));
        }
        if self.operation != "UPDATE" {
            return Some(format!("operation {} is not a resize", self.operation));
        }
        None
    }
}
