//! The AdmissionReview kube-apiserver sends a webhook for a `pods/resize` UPDATE, for callers that
//! POST one straight to the webhook (benchmarks, forged requests) instead of going through
//! kube-apiserver.

use serde_json::{Value, json};

/// The `admission.k8s.io/v1` AdmissionReview of a `pods/resize` UPDATE of pod `old` to `new` by
/// `user_info`, with request `uid`, as kube-apiserver sends it: name and namespace are `old`'s
/// metadata; not a dry run. Nothing here checks what `old`, `new` or `user_info` claim.
pub fn resize_review(uid: &str, user_info: Value, old: &Value, new: &Value) -> Value {
    // Pods are served at v1 only, so what was requested is what the webhook is sent.
    let kind = json!({"group": "", "version": "v1", "kind": "Pod"});
    let resource = json!({"group": "", "version": "v1", "resource": "pods"});
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": kind, "requestKind": kind,
            "resource": resource, "requestResource": resource,
            "subResource": "resize", "requestSubResource": "resize",
            "name": old["metadata"]["name"], "namespace": old["metadata"]["namespace"],
            "operation": "UPDATE",
            "userInfo": user_info,
            "object": new, "oldObject": old, "dryRun": false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_review_names_the_old_pod_and_carries_both_objects() {
        let old = json!({"metadata": {"name": "app", "namespace": "team-a"}});
        let new = json!({"metadata": {"name": "app", "namespace": "team-a"}, "spec": {}});
        let r = resize_review("u1", json!({"username": "mallory"}), &old, &new);
        let req = &r["request"];
        assert_eq!(req["uid"], "u1");
        assert_eq!(
            (&req["name"], &req["namespace"]),
            (&json!("app"), &json!("team-a"))
        );
        assert_eq!(req["subResource"], "resize");
        assert_eq!(req["requestKind"]["kind"], "Pod");
        assert_eq!(req["requestResource"]["resource"], "pods");
        assert_eq!(req["userInfo"]["username"], "mallory");
        assert_eq!((&req["object"], &req["oldObject"]), (&new, &old));
    }
}
