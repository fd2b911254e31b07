//! The JSON Patch (RFC 6902) of a plan-annotation write: conditional on the annotation still
//! holding what the controller read when it decided, so a write by the pod's author that lands
//! in between is never erased or overwritten unjudged. The patch opens with `test` operations
//! (the pod's UID, then the annotation as read) and kube-apiserver applies it whole or not at
//! all: a failed `test` makes it refuse the whole patch (422 `Invalid`,
//! [`WriteError::precondition_failed`](super::WriteError::precondition_failed)), and the
//! controller reads the pod again before it writes or evicts anything more for it.

use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation,
};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// The patch that turns `pod`'s `key` annotation, as the controller read it on `pod`, into
/// `write` (`None` removes it); `None` when there is nothing to write (it was absent and stays
/// so). Every patch tests the UID first, so a recreated pod of the same name is never written.
///
/// What was read is tested as follows:
/// - a value: `test` that value, then `replace` or `remove` it;
/// - absent, among other annotations: `test` the annotation against `null`, then `add` it.
///   RFC 6902 has no operation that tests for absence; kube-apiserver's JSON Patch (upstream
///   `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`, `jsonPatcher`, through
///   evanphx/json-patch `Patch.test`) passes a `null` test exactly when the member is missing
///   (an annotation is a string, never `null`), and fails it on any value. The end-to-end
///   suite proves this on the real API server (`tests/e2e/preemption/resume.rs`
///   `plan_writes_are_refused_when_the_annotation_changed_since_it_was_read`);
/// - absent with no annotations at all: `test` the whole map against `null` (it is missing:
///   an empty map is not serialised), then `add` the map holding only `key`. Any annotation
///   written since fails it, and the next read takes the first form.
///
/// A precondition on `metadata.resourceVersion` would also do, but would fail on every write
/// to the pod since the read (the kubelet's status updates included), not only on one to
/// this annotation.
pub fn plan_patch(pod: &Pod, key: &str, write: Option<&str>) -> Option<Patch> {
    let annotations = pod.metadata.annotations.as_ref().filter(|a| !a.is_empty());
    let read = annotations.and_then(|a| a.get(key));
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let map = PointerBuf::from_tokens(["metadata", "annotations"]);
    let path = PointerBuf::from_tokens(["metadata", "annotations", key]);
    let mut ops = vec![PatchOperation::Test(TestOperation {
        path: PointerBuf::from_tokens(["metadata", "uid"]),
        value: Value::String(uid),
    })];
    match (read, write) {
        (None, None) => return None,
        (Some(read), write) => {
            ops.push(PatchOperation::Test(TestOperation {
                path: path.clone(),
                value: Value::String(read.clone()),
            }));
            ops.push(match write {
                Some(value) => PatchOperation::Replace(ReplaceOperation {
                    path,
                    value: Value::String(value.to_owned()),
                }),
                None => PatchOperation::Remove(RemoveOperation { path }),
            });
        }
        (None, Some(value)) if annotations.is_some() => {
            ops.push(PatchOperation::Test(TestOperation {
                path: path.clone(),
                value: Value::Null,
            }));
            ops.push(PatchOperation::Add(AddOperation {
                path,
                value: Value::String(value.to_owned()),
            }));
        }
        (None, Some(value)) => {
            ops.push(PatchOperation::Test(TestOperation {
                path: map.clone(),
                value: Value::Null,
            }));
            ops.push(PatchOperation::Add(AddOperation {
                path: map,
                value: serde_json::json!({ key: value }),
            }));
        }
    }
    Some(Patch(ops))
}

/// `pod` as a successful write of [`plan_patch`]`(pod, key, write)` leaves it: the value the
/// controller's next write of the annotation bases itself on.
pub fn written(pod: &Pod, key: &str, write: Option<&str>) -> Pod {
    let mut pod = pod.clone();
    match write {
        Some(value) => {
            pod.metadata
                .annotations
                .get_or_insert_default()
                .insert(key.to_owned(), value.to_owned());
        }
        None => {
            if let Some(a) = pod.metadata.annotations.as_mut() {
                a.remove(key);
            }
        }
    }
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "resize-guard.io/preemption";

    fn pod(annotations: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "app", "namespace": "prod", "uid": "u-app",
                         "annotations": annotations}
        }))
        .unwrap()
    }

    fn ops(patch: Option<Patch>) -> Value {
        serde_json::to_value(patch.unwrap()).unwrap()
    }

    #[test]
    fn clearing_tests_the_value_read_then_removes_it_with_the_key_escaped() {
        let p = pod(json!({KEY: "old", "other": "x"}));
        assert_eq!(
            ops(plan_patch(&p, KEY, None)),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-app"},
                {"op": "test", "path": "/metadata/annotations/resize-guard.io~1preemption", "value": "old"},
                {"op": "remove", "path": "/metadata/annotations/resize-guard.io~1preemption"},
            ])
        );
    }

    #[test]
    fn replacing_tests_the_value_read_then_replaces_it() {
        let p = pod(json!({KEY: "old"}));
        assert_eq!(
            ops(plan_patch(&p, KEY, Some("new"))),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-app"},
                {"op": "test", "path": "/metadata/annotations/resize-guard.io~1preemption", "value": "old"},
                {"op": "replace", "path": "/metadata/annotations/resize-guard.io~1preemption", "value": "new"},
            ])
        );
    }

    #[test]
    fn writing_over_an_absent_annotation_tests_it_against_null_then_adds_it() {
        let p = pod(json!({"other": "x"}));
        assert_eq!(
            ops(plan_patch(&p, KEY, Some("new"))),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-app"},
                {"op": "test", "path": "/metadata/annotations/resize-guard.io~1preemption", "value": null},
                {"op": "add", "path": "/metadata/annotations/resize-guard.io~1preemption", "value": "new"},
            ])
        );
    }

    #[test]
    fn writing_on_a_pod_without_annotations_tests_the_map_against_null_then_adds_it() {
        for p in [pod(Value::Null), pod(json!({}))] {
            assert_eq!(
                ops(plan_patch(&p, KEY, Some("new"))),
                json!([
                    {"op": "test", "path": "/metadata/uid", "value": "u-app"},
                    {"op": "test", "path": "/metadata/annotations", "value": null},
                    {"op": "add", "path": "/metadata/annotations", "value": {KEY: "new"}},
                ])
            );
        }
    }

    #[test]
    fn clearing_an_annotation_that_was_not_read_writes_nothing() {
        assert!(plan_patch(&pod(json!({"other": "x"})), KEY, None).is_none());
        assert!(plan_patch(&pod(Value::Null), KEY, None).is_none());
    }

    #[test]
    fn tilde_and_slash_are_escaped_as_rfc_6901_says() {
        let p = pod(json!({"a~b/c": "old"}));
        let patch = ops(plan_patch(&p, "a~b/c", None));
        assert_eq!(patch[2]["path"], "/metadata/annotations/a~0b~1c");
    }

    /// Applied to the pod as read, the patch gives the pod [`written`] describes; applied to a
    /// pod whose annotation or UID changed since, it fails and changes nothing. (The `null`
    /// tests of an absent member are kube-apiserver's, not RFC 6902's: the end-to-end suite
    /// proves those.)
    #[test]
    fn the_patch_applies_only_to_the_pod_as_read() {
        let read = pod(json!({KEY: "old", "other": "x"}));
        for write in [Some("new"), None] {
            let patch = plan_patch(&read, KEY, write).unwrap();
            let mut doc = serde_json::to_value(&read).unwrap();
            json_patch::patch(&mut doc, &patch).unwrap();
            let after: Pod = serde_json::from_value(doc).unwrap();
            assert_eq!(after, written(&read, KEY, write), "{write:?}");

            let changed = pod(json!({KEY: "put back", "other": "x"}));
            let mut doc = serde_json::to_value(&changed).unwrap();
            assert!(json_patch::patch(&mut doc, &patch).is_err(), "{write:?}");
            assert_eq!(doc, serde_json::to_value(&changed).unwrap());

            let mut recreated = read.clone();
            recreated.metadata.uid = Some("u-new".into());
            let mut doc = serde_json::to_value(&recreated).unwrap();
            assert!(json_patch::patch(&mut doc, &patch).is_err(), "{write:?}");
        }
    }
}
