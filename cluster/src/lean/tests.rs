//! Lean decoding treats `null`, absent fields, `apiVersion`/`kind` and unread fields as this
//! module's docs say, against k8s-openapi's own decoder followed by trimming.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::{LeanNode, LeanPod};
use crate::trim::{trim_node, trim_pod};

fn whole_then_trimmed(v: &serde_json::Value) -> Pod {
    let mut p: Pod = serde_json::from_value(v.clone()).unwrap();
    trim_pod(&mut p);
    p
}

fn lean(v: &serde_json::Value) -> Result<Pod, serde_json::Error> {
    serde_json::from_value::<LeanPod>(v.clone()).map(|p| p.0)
}

#[test]
fn nulls_and_absent_required_fields_decode_as_k8s_openapi_decodes_them() {
    for v in [
        json!({}),
        json!({"metadata": null, "spec": null, "status": null}),
        json!({"metadata": {"name": null, "labels": null, "annotations": null},
            "spec": {"containers": null, "initContainers": null, "nodeName": null},
            "status": {"containerStatuses": [{"name": null, "ready": null,
                "restartCount": null, "state": null, "image": null}],
                "conditions": null}}),
        json!({"spec": {"containers": [{"name": "a", "resources": null}],
            "ephemeralContainers": [{"name": null}]},
            "status": {"containerStatuses": [{"name": "a", "state": {"running": null}}]}}),
        json!({"metadata": {"annotations": {}}, "status": {"conditions": []}}),
    ] {
        assert_eq!(lean(&v).unwrap(), whole_then_trimmed(&v), "{v}");
    }
}

#[test]
fn api_version_and_kind_must_name_the_type_when_present() {
    for v in [
        json!({"apiVersion": "v2", "kind": "Pod"}),
        json!({"apiVersion": "v1", "kind": "Node"}),
        json!({"kind": null}),
    ] {
        assert!(serde_json::from_value::<Pod>(v.clone()).is_err(), "{v}");
        assert!(lean(&v).is_err(), "{v}");
    }
    let node = json!({"apiVersion": "v1", "kind": "Pod"});
    assert!(serde_json::from_value::<LeanNode>(node).is_err());
    let ok = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    assert_eq!(lean(&ok).unwrap(), whole_then_trimmed(&ok));
}

#[test]
fn the_last_applied_copy_is_skipped_whatever_its_shape_but_a_read_field_is_checked() {
    // The value is never read, so even a non-string passes; a read field of the wrong type
    // fails the pod, as it does in k8s-openapi.
    let v = json!({"metadata": {"annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": {"not": "a string"},
        "keep": "me"}}});
    let p = lean(&v).unwrap();
    assert_eq!(
        p.metadata
            .annotations
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        [("keep".to_owned(), "me".to_owned())]
    );
    assert!(lean(&json!({"spec": {"nodeName": 7}})).is_err());
    assert!(lean(&json!({"metadata": {"annotations": {"a": 1}}})).is_err());
}

#[test]
fn an_unread_field_is_not_checked() {
    let v = json!({"spec": {"hostNetwork": "yes", "containers": [{"name": "a", "env": 3}]}});
    assert!(serde_json::from_value::<Pod>(v.clone()).is_err());
    let p = lean(&v).unwrap();
    assert_eq!(p.spec.unwrap().containers[0].name, "a");
}

#[test]
fn a_node_keeps_only_the_preemption_label_and_what_the_ledger_reads() {
    let v = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": "9",
            "labels": {"resize-guard.io/preemption": "disabled", "zone": "a"},
            "annotations": {"x": "y"}, "ownerReferences": []},
        "spec": {"taints": [], "podPreemptionPolicy": {}},
        "status": {"allocatable": {"cpu": "4"}, "images": [{"names": ["i"]}],
            "declaredFeatures": ["F"]}});
    let mut whole: Node = serde_json::from_value(v.clone()).unwrap();
    trim_node(&mut whole);
    assert_eq!(serde_json::from_value::<LeanNode>(v).unwrap().0, whole);
}
