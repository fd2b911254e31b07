//! The admission adapter on its own: each bad input refused with its own error, and a judged
//! request naming its pod, namespace and user for the denial log.

use super::*;

fn refused(body: &[u8]) -> ReviewError {
    let cluster =
        resize_guard_cluster::FixedCluster::new(Default::default(), vec![], vec![], vec![]);
    review(Stage::Validate, body, &cluster).unwrap_err()
}

fn resize(request: serde_json::Value) -> Vec<u8> {
    let mut r = serde_json::json!({
        "uid": "u", "operation": "UPDATE", "subResource": "resize",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "userInfo": {}
    });
    if let (Some(r), Some(extra)) = (r.as_object_mut(), request.as_object()) {
        r.extend(extra.clone());
    }
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": r
    }))
    .unwrap()
}

#[test]
fn a_judged_request_names_its_pod_namespace_and_user_for_the_denial_log() {
    let cluster =
        resize_guard_cluster::FixedCluster::new(Default::default(), vec![], vec![], vec![]);
    let pod = serde_json::json!({
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "p1"},
        "spec": {"containers": [{"name": "app"}]}
    });
    let body = resize(serde_json::json!({
        "name": "web-0", "namespace": "shop",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": pod, "oldObject": pod
    }));
    let reviewed = review(Stage::Validate, &body, &cluster).unwrap();
    assert_eq!(
        reviewed.asked,
        Asked {
            namespace: "shop".into(),
            pod: "web-0".into(),
            user: "alice".into()
        }
    );
}

#[test]
fn each_bad_input_is_refused_with_its_own_variant_and_each_cause_once() {
    let e = refused(b"{not json");
    assert!(matches!(e, ReviewError::NotJson(_)), "{e:?}");
    let chain = resize_guard_runtime::error_chain(&e);
    assert_eq!(
        chain.matches("malformed AdmissionReview").count(),
        1,
        "{chain}"
    );
    assert!(chain.contains("line 1"), "the serde error follows: {chain}");

    let e = refused(br#"{"apiVersion": "admission.k8s.io/v1beta1"}"#);
    assert!(matches!(e, ReviewError::Version(ref v) if v == "admission.k8s.io/v1beta1"));
    let e = refused(br#"{"apiVersion": "admission.k8s.io/v1"}"#);
    assert!(matches!(e, ReviewError::NoRequest), "{e:?}");
    assert!(matches!(
        refused(&resize(serde_json::json!({"uid": ""}))),
        ReviewError::NoUid
    ));
    let e = refused(&resize(serde_json::json!({"object": {"spec": 7}})));
    assert!(matches!(e, ReviewError::NotPods(_)), "{e:?}");
    assert_eq!(e.reason(), "NotPods");
    assert!(matches!(
        refused(&resize(
            serde_json::json!({"object": {"metadata": {"name": "p"}}})
        )),
        ReviewError::NoObjects
    ));
}
