//! Removing one victim: `DisruptionTarget` (reason `PreemptionByResizeGuard`), then the Eviction
//! API or DELETE as the [`Removal`] says, with its grace period and the victim's UID as a
//! precondition, and the `Preempted` Event on the victim ([`Removal::event`]). A victim already
//! gone, or another pod now, is not an error.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions as K8sDeleteOptions, ObjectMeta, Preconditions as K8sPreconditions,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use resize_guard_policy::pod::PodKey;
use serde_json::json;

use super::{Actuator, WriteError};
use crate::preemption::decision::{Removal, Via};

/// The Eviction body for `r`: its grace period, and its UID as a precondition.
fn eviction(r: &Removal) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(r.victim.name.clone()),
            namespace: Some(r.victim.namespace.clone()),
            ..Default::default()
        },
        delete_options: Some(K8sDeleteOptions {
            grace_period_seconds: Some(i64::from(r.grace_seconds)),
            preconditions: Some(K8sPreconditions {
                uid: Some(r.victim.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        }),
    }
}

impl Actuator {
    /// Removes one victim; `Ok(false)` if it is already gone or is another pod now (the UID
    /// precondition failed).
    pub(super) async fn remove(&self, preemptor: &Pod, r: &Removal) -> Result<bool, WriteError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &r.victim.namespace);
        let preemptor_key = PodKey::of(preemptor);
        let condition = json!({
            "metadata": {"uid": r.victim.uid},
            "status": {"conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByResizeGuard",
                "message": r.condition_message(preemptor),
                "lastTransitionTime": Timestamp::now().to_string(),
            }]}
        });
        let delete = DeleteParams {
            grace_period_seconds: Some(r.grace_seconds),
            preconditions: Some(Preconditions {
                uid: Some(r.victim.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        // 404: gone; 409: the UID precondition failed (a new pod of that name); 422: the UID in
        // a patch did not match (metadata.uid is immutable).
        let gone = |e: &WriteError| matches!(e.status(), Some(404 | 409 | 422));
        let params = PatchParams::default();
        let condition = Patch::Strategic(&condition);
        let mark = || api.patch_status(&r.victim.name, &params, &condition);
        match r.via {
            Via::Eviction => {
                // The Eviction API writes its own DisruptionTarget (EvictionByEvictionAPI), so
                // ours goes on after it, naming the real cause. The body is spelled here: kube 5's
                // `Api::evict` sends `delete_options`, a key the API server ignores, which would
                // drop both the grace period and the UID precondition.
                let eviction = eviction(r);
                let post = PostParams::default();
                let evict = api.create_subresource::<_, serde_json::Value>(
                    "eviction",
                    &r.victim.name,
                    &post,
                    &eviction,
                );
                match self.write(evict).await {
                    Err(e) if gone(&e) => return Ok(false),
                    other => other?,
                };
                match self.write(mark()).await {
                    Err(e) if gone(&e) => {}
                    other => {
                        other?;
                    }
                }
            }
            Via::Delete => {
                // Like kube-scheduler: mark, then delete.
                match self.write(mark()).await {
                    Err(e) if gone(&e) => return Ok(false),
                    other => {
                        other?;
                    }
                }
                match self.write(api.delete(&r.victim.name, &delete)).await {
                    Err(e) if gone(&e) => return Ok(false),
                    other => {
                        other?;
                    }
                }
            }
        }
        tracing::info!(victim = %r.victim, preemptor = %preemptor_key, "preempted");
        self.record_event(r.event(preemptor));
        Ok(true)
    }
}
