//! In-process router tests: every verdict and every class of bad input through the real axum
//! routers (`Router::oneshot`), with AdmissionReviews shaped like kube-apiserver's.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use resize_guard_cluster::FixedCluster;
use resize_guard_policy::fixture::{
    PodBuilder, container, field_app, field_filler, field_node, node,
};
use resize_guard_policy::policy::Policy;
use resize_guard_policy::upstream::qos::{QosClass, qos_class};
use resize_guard_webhook::metrics::Metrics;
use resize_guard_webhook::server::{AppState, admission_router, health_router};
use resize_guard_webhook::usage::MetricsApi;
use serde_json::{Value, json};
use tower::ServiceExt;

/// The field-test world: a t3.medium node with a 1500m low-priority filler and a 250m
/// Guaranteed high-priority app.
fn field_test(policy: Policy) -> (FixedCluster, Pod) {
    let app = field_app("250m").build();
    let pods = vec![app.clone(), field_filler().priority(100).build()];
    (field_cluster(policy, pods), app)
}

/// A copy of `pod` with one `change` (a forged review's pod).
fn altered(pod: &Pod, change: impl FnOnce(&mut Pod)) -> Pod {
    let mut copy = pod.clone();
    change(&mut copy);
    copy
}

/// The field test's node `n1` holding `pods`, under `policy`.
fn field_cluster(policy: Policy, pods: Vec<Pod>) -> FixedCluster {
    FixedCluster::new(policy, vec![field_node()], pods, vec![])
}

/// The field test under `policy` with the app's CPU resized to `(request, limit)`, answered at
/// `path`: the state (for further requests), the app as it was, and the answer.
async fn field_resize(
    policy: Policy,
    path: &str,
    (request, limit): (&str, &str),
    dry_run: bool,
) -> (AppState, Pod, Value) {
    let (cluster, app) = field_test(policy);
    let st = state(cluster);
    let review = resize_review(&app, &with_cpu(&app, request, limit), dry_run);
    let answer = post(&st, path, &review).await;
    (st, app, answer)
}

/// An answer's first warning (empty when it has none).
fn warning(answer: &Value) -> &str {
    answer["warnings"][0].as_str().unwrap_or_default()
}

/// A denial's message (empty when there is none).
fn denial(answer: &Value) -> &str {
    answer["status"]["message"].as_str().unwrap_or_default()
}

fn with_cpu(pod: &Pod, request: &str, limit: &str) -> Pod {
    let mut p = pod.clone();
    let r = p.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap();
    r.requests.as_mut().unwrap().insert(
        "cpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(request.into()),
    );
    r.limits.as_mut().unwrap().insert(
        "cpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(limit.into()),
    );
    p.metadata.generation = Some(2);
    p
}

/// An AdmissionReview as kube-apiserver v1.37 sends it for `kubectl patch --subresource resize`.
fn resize_review(old: &Pod, new: &Pod, dry_run: bool) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0d9a7f7e-3f0e-4a8e-8b8e-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "resize",
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "resize",
            "name": old.metadata.name,
            "namespace": old.metadata.namespace,
            "operation": "UPDATE",
            "userInfo": {"username": "admin", "uid": "uid-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": new,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-patch"}
        }
    })
}

fn state(cluster: FixedCluster) -> AppState {
    AppState {
        cluster: Arc::new(cluster),
        metrics: Arc::new(Metrics::new()),
        events: None,
        ready: Arc::new(|| true),
        usage: None,
    }
}

async fn post_raw(
    state: &AppState,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let app = admission_router(state.clone(), 64 * 1024);
    let resp = app
        .oneshot(
            Request::post(path)
                .header("content-type", content_type)
                .body(Body::from(body))
                .unwrap(),
        )
        .await
        .unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn post(state: &AppState, path: &str, review: &Value) -> Value {
    let (status, body) = post_raw(
        state,
        path,
        "application/json",
        serde_json::to_vec(review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    assert_eq!(
        body["response"]["uid"], review["request"]["uid"],
        "uid echoed"
    );
    body["response"].clone()
}

#[tokio::test]
async fn mutate_denies_a_qos_change_naming_the_container_and_the_fix() {
    let (_, _, r) = field_resize(Policy::default(), "/mutate", ("500m", "250m"), false).await;
    assert_eq!(r["allowed"], false);
    // `ValidatePodResize`'s answer (422 Invalid, `errors.NewInvalid`), the request raised above
    // its limit first, as `validatePodMetadataAndSpec` reports it, then the QoS rule.
    assert_eq!(r["status"]["code"], 422);
    assert_eq!(r["status"]["reason"], "Invalid");
    assert_eq!(r["status"]["status"], "Failure");
    let msg = denial(&r);
    let explanation = &msg[msg.find("resize-guard: ").unwrap()..];
    assert_eq!(
        r["status"]["details"],
        json!({"name": "app", "kind": "Pod", "causes": [
            {"reason": "FieldValueInvalid", "field": "spec.containers[0].resources.requests",
             "message": "Invalid value: \"500m\": must be less than or equal to cpu limit of 250m"},
            {"reason": "FieldValueInvalid", "field": "spec",
             "message": "Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"},
            {"reason": "resize-guard.io/Explanation", "field": "spec", "message": explanation},
        ]})
    );
    assert!(
        msg.starts_with("Pod \"app\" is invalid: [spec.containers[0].resources.requests: Invalid value: \"500m\": must be less than or equal to cpu limit of 250m, spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing]. resize-guard: "),
        "{msg}"
    );
    assert!(msg.contains("from Guaranteed to Burstable"), "{msg}");
    assert!(
        msg.contains("container app: cpu request 500m ≠ limit 250m"),
        "{msg}"
    );
    assert!(msg.contains("qos.onChange: repair"), "{msg}");
    assert_eq!(r["auditAnnotations"]["decision"], "qos-change");
    assert_eq!(r["auditAnnotations"]["qos"], "Guaranteed->Burstable");
}

#[tokio::test]
async fn mutate_steps_aside_for_a_resize_the_api_server_refuses_itself() {
    // A request above its limit that would also exceed the node: upstream's validation error
    // is the reason, so /mutate allows it (no Infeasible denial, no event) and says why in the
    // audit annotations.
    let old = PodBuilder::new("prod", "burst")
        .node("n1")
        .container(container("app").request("cpu", "100m").limit("cpu", "200m"))
        .running(0)
        .qos_status("Burstable")
        .build();
    let cluster = FixedCluster::new(
        Policy::default(),
        vec![node("n1", "1930m", "3Gi")],
        vec![old.clone()],
        vec![],
    );
    let st = state(cluster);
    let new = with_cpu(&old, "9", "8");
    let r = post(&st, "/mutate", &resize_review(&old, &new, false)).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(r.get("warnings").is_none(), "{r}");
    assert_eq!(r["auditAnnotations"]["decision"], "invalid");
    let why = r["auditAnnotations"]["invalid"].as_str().unwrap();
    assert!(
        why.contains("must be less than or equal to cpu limit of 8"),
        "{why}"
    );
}

#[tokio::test]
async fn mutate_repairs_a_qos_change_with_a_json_patch_when_policy_says_so() {
    let mut policy = Policy::default();
    policy.qos.on_change = resize_guard_policy::policy::OnQosChange::Repair;
    let (cluster, app) = field_test(policy);
    let st = state(cluster);
    let new = with_cpu(&app, "400m", "250m");
    let r = post(&st, "/mutate", &resize_review(&app, &new, false)).await;
    assert_eq!(r["allowed"], true);
    assert_eq!(r["patchType"], "JSONPatch");
    // kube-core serializes the patch bytes as a JSON array (Go decodes both forms into []byte).
    let patch_bytes: Vec<u8> = match &r["patch"] {
        Value::String(s) => base64_decode(s),
        Value::Array(a) => a.iter().map(|b| b.as_u64().unwrap() as u8).collect(),
        other => panic!("no patch: {other}"),
    };
    let patch: json_patch::Patch = serde_json::from_slice(&patch_bytes).unwrap();
    let mut doc = serde_json::to_value(&new).unwrap();
    json_patch::patch(&mut doc, &patch).unwrap();
    let repaired: Pod = serde_json::from_value(doc).unwrap();
    assert_eq!(qos_class(&repaired), QosClass::Guaranteed);
    let limits = repaired.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .limits
        .unwrap();
    assert_eq!(limits["cpu"].0, "400m");
    assert!(warning(&r).contains("limits.cpu 250m → 400m"), "{r}");
    assert_eq!(r["auditAnnotations"]["decision"], "qos-repaired");
}

#[tokio::test]
async fn a_repair_that_would_be_infeasible_is_denied_instead() {
    let mut policy = Policy::default();
    policy.qos.on_change = resize_guard_policy::policy::OnQosChange::Repair;
    let (_, _, r) = field_resize(policy, "/mutate", ("2430m", "250m"), false).await;
    assert_eq!(r["allowed"], false);
    assert!(denial(&r).contains("can never fit on node n1"), "{r}");
    assert_eq!(
        r["auditAnnotations"]["decision"],
        "qos-repaired-then-infeasible"
    );
}

#[tokio::test]
async fn infeasible_resizes_are_denied_at_both_stages_with_the_nodes_numbers() {
    for minor in [None, Some(37), Some(36), Some(35), Some(33)] {
        let (mut cluster, app) = field_test(Policy::default());
        cluster.minor = minor;
        let st = state(cluster);
        let review = resize_review(&app, &with_cpu(&app, "2430m", "2430m"), false);
        for path in ["/mutate", "/validate"] {
            infeasible_answer(&post(&st, path, &review).await, minor, path);
        }
    }
}

/// The field test's 2430m resize refused in `PodResizeValidator`'s shape on `minor`.
fn infeasible_answer(r: &Value, minor: Option<u32>, path: &str) {
    assert_eq!(r["allowed"], false, "{path}");
    assert_eq!(r["status"]["code"], 403);
    assert_eq!(r["status"]["reason"], "Forbidden");
    assert_eq!(
        r["status"]["details"],
        json!({"name": "app", "kind": "pods", "causes": [{"reason": "NodeCapacity"}]})
    );
    let msg = denial(r);
    assert!(
        msg.contains("node n1") && msg.contains("2430m") && msg.contains("1930m"),
        "{msg}"
    );
    if minor.is_none_or(|m| m >= 36) {
        assert!(
                msg.starts_with("pods \"app\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930. resize-guard: this resize can never fit on node n1"),
                "{msg}"
            );
    } else {
        assert!(
            msg.starts_with(
                "pods \"app\" is forbidden: resize-guard: this resize can never fit on node n1"
            ) && msg
                .contains("Node didn't have enough capacity: cpu, requested: 2430, capacity: 1930"),
            "{msg}"
        );
    }
    assert_eq!(r["auditAnnotations"]["decision"], "infeasible");
    assert_eq!(
        r["auditAnnotations"]["infeasible"],
        "cpu requested 2430m > allocatable 1930m"
    );
}

#[tokio::test]
async fn with_no_policy_in_force_nothing_is_denied_or_repaired_and_the_warning_says_why() {
    let (mut cluster, app) = field_test(Policy::default());
    cluster.policy = None;
    let st = state(cluster);
    // An Infeasible resize and a QoS change, each denied under any policy that was read.
    for new in [
        with_cpu(&app, "2430m", "2430m"),
        with_cpu(&app, "300m", "400m"),
    ] {
        let review = resize_review(&app, &new, false);
        for path in ["/mutate", "/validate"] {
            let r = post(&st, path, &review).await;
            assert_eq!(r["allowed"], true, "{path}: {r}");
            assert!(r.get("patch").is_none(), "{path}: {r}");
            assert_eq!(
                r["warnings"][0],
                "resize-guard judged nothing: no policy in force"
            );
            assert_eq!(r["auditAnnotations"]["decision"], "no-policy");
        }
    }
}

/// The field test's victim, `batch/filler`, is in another namespace than the app (`prod`):
/// the app's user learns that one pod would go, not which (`shared/src/audience.rs`).
#[tokio::test]
async fn validate_warns_about_a_deferred_resize_and_counts_a_victim_of_another_namespace() {
    let (_, _, r) = field_resize(Policy::default(), "/validate", ("550m", "550m"), false).await;
    assert_eq!(r["allowed"], true);
    assert_eq!(
        r["warnings"][0],
        "resize-guard: node n1 lacks cpu 120m; the resize will be Deferred; resize-guard will preempt 1 pod in another namespace"
    );
    assert_eq!(r["auditAnnotations"]["decision"], "deferred-preemptible");
    assert_eq!(
        r["auditAnnotations"]["victims"],
        "1 pod in another namespace"
    );
    assert_eq!(r["auditAnnotations"]["shortfall"], "cpu 120m, memory 0");
    assert!(!r.to_string().contains("filler"), "{r}");
}

/// A victim in the resizing pod's own namespace is named, and a forged review (the app's
/// names with a UID the view does not hold) names no pod at all.
#[tokio::test]
async fn a_victim_in_the_pods_own_namespace_is_named_and_a_forged_review_names_none() {
    let app = field_app("250m").build();
    // The field test's filler, moved into the app's namespace.
    let mut filler = field_filler().build();
    filler.metadata.namespace = Some("prod".into());
    let st = state(field_cluster(Policy::default(), vec![app.clone(), filler]));
    let forged = altered(&app, |p| p.metadata.uid = Some("forged".into()));
    for (pod, victims) in [(&app, "prod/filler"), (&forged, "1 pod")] {
        let review = resize_review(pod, &with_cpu(pod, "550m", "550m"), false);
        let r = post(&st, "/mutate", &review).await;
        let preempts = format!("resize-guard will preempt {victims}");
        assert!(warning(&r).ends_with(&preempts), "{r}");
        assert_eq!(r["auditAnnotations"]["victims"], victims);
        // The forged review's answer names the victim nowhere.
        let named = victims.contains("filler");
        assert_eq!(r.to_string().contains("filler"), named, "{r}");
    }
}

/// The default install calls only `/mutate`: it answers a Deferred resize as `/validate` does.
#[tokio::test]
async fn mutate_judges_a_deferred_resize_as_validate_does() {
    let (cluster, app) = field_test(Policy::default());
    let st = state(cluster);
    let review = resize_review(&app, &with_cpu(&app, "550m", "550m"), false);
    let m = post(&st, "/mutate", &review).await;
    let v = post(&st, "/validate", &review).await;
    assert_eq!(m, v, "one call is enough");
    assert_eq!(m["allowed"], true);
    assert!(
        warning(&m).contains("resize-guard will preempt 1 pod in another namespace"),
        "{m}"
    );
    assert!(m.get("patch").is_none() || m["patch"].is_null());
    assert_eq!(m["auditAnnotations"]["decision"], "deferred-preemptible");
}

#[tokio::test]
async fn a_resize_that_fits_is_allowed_silently() {
    let (_, _, r) = field_resize(Policy::default(), "/validate", ("400m", "400m"), false).await;
    assert_eq!(r["allowed"], true);
    assert!(r["warnings"].is_null(), "{r}");
    assert_eq!(r["auditAnnotations"]["decision"], "fits");
}

#[tokio::test]
async fn stuck_deferred_resizes_warn_or_are_denied_by_policy() {
    let mut policy = Policy::default();
    policy.preemption.enabled = false;
    let (cluster, app) = field_test(policy.clone());
    let st = state(cluster);
    let review = resize_review(&app, &with_cpu(&app, "550m", "550m"), false);
    let r = post(&st, "/validate", &review).await;
    assert_eq!(r["allowed"], true);
    assert!(warning(&r).contains("wait: PreemptionDisabled"), "{r}");
    assert_eq!(r["auditAnnotations"]["no-plan"], "PreemptionDisabled");
    policy.feasibility.reject_stuck_deferred = true;
    let (cluster, _) = field_test(policy);
    let r = post(&state(cluster), "/validate", &review).await;
    assert_eq!(r["allowed"], false);
    assert!(denial(&r).contains("this resize will wait"), "{r}");
    // resize-guard's own refusal (Kubernetes would store it): 403 Forbidden, its own cause.
    assert_eq!(r["status"]["code"], 403);
    assert_eq!(r["status"]["reason"], "Forbidden");
    assert_eq!(
        r["status"]["details"],
        json!({"name": "app", "kind": "pods", "causes": [{"reason": "resize-guard.io/DeferredStuck"}]})
    );
    assert!(denial(&r).starts_with("resize-guard: node n1"), "{r}");
}

#[tokio::test]
async fn audit_mode_allows_and_records_what_it_would_have_done() {
    let mut policy = Policy::default();
    policy.mode = resize_guard_policy::policy::Mode::Audit;
    let (_, _, r) = field_resize(policy, "/mutate", ("2430m", "2430m"), false).await;
    assert_eq!(r["allowed"], true);
    assert_eq!(r["auditAnnotations"]["decision"], "would-deny:infeasible");
    assert!(
        warning(&r).starts_with("resize-guard (audit mode) would deny"),
        "{r}"
    );
}

#[tokio::test]
async fn excluded_namespaces_are_not_judged() {
    let (cluster, _) = field_test(Policy::default());
    let st = state(cluster);
    let sys = PodBuilder::new("kube-system", "dns")
        .node("n1")
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(0)
        .build();
    let r = post(
        &st,
        "/validate",
        &resize_review(&sys, &with_cpu(&sys, "5", "5"), false),
    )
    .await;
    assert_eq!(r["allowed"], true);
    assert_eq!(r["auditAnnotations"]["decision"], "skipped");
}

#[tokio::test]
async fn other_resources_and_operations_are_allowed_with_a_warning() {
    let (cluster, app) = field_test(Policy::default());
    let st = state(cluster);
    let review: Value =
        serde_json::from_str(include_str!("fixtures/deployment-update.json")).unwrap();
    let r = post(&st, "/validate", &review).await;
    assert_eq!(r["allowed"], true);
    assert!(warning(&r).contains("apps/deployments/"), "{r}");
    let mut status_update = resize_review(&app, &app, false);
    status_update["request"]["subResource"] = json!("status");
    let r = post(&st, "/validate", &status_update).await;
    assert_eq!(r["allowed"], true);
    let mut create = resize_review(&app, &app, false);
    create["request"]["operation"] = json!("CREATE");
    let r = post(&st, "/mutate", &create).await;
    assert!(warning(&r).contains("CREATE"), "{r}");
}

#[tokio::test]
async fn malformed_bodies_get_a_400_with_a_json_error() {
    let (cluster, app) = field_test(Policy::default());
    let st = state(cluster);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("not json", b"{not json".to_vec()),
        ("empty", Vec::new()),
        ("array", b"[]".to_vec()),
        (
            "v1beta1",
            include_bytes!("fixtures/v1beta1-review.json").to_vec(),
        ),
        (
            "no oldObject",
            include_bytes!("fixtures/resize-without-old-object.json").to_vec(),
        ),
        (
            "garbage object",
            include_bytes!("fixtures/resize-with-garbage-object.json").to_vec(),
        ),
        (
            "no request",
            serde_json::to_vec(
                &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            )
            .unwrap(),
        ),
    ];
    for (name, body) in cases {
        let (status, err) = post_raw(&st, "/validate", "application/json", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {err}");
        assert!(
            err["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{name}: {err}"
        );
    }
    let mut no_uid = resize_review(&app, &app, false);
    no_uid["request"]["uid"] = json!("");
    let (status, _) = post_raw(
        &st,
        "/validate",
        "application/json",
        serde_json::to_vec(&no_uid).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn wrong_content_type_and_oversize_bodies_are_refused() {
    let (cluster, app) = field_test(Policy::default());
    let st = state(cluster);
    let body = serde_json::to_vec(&resize_review(&app, &app, false)).unwrap();
    let (status, err) = post_raw(&st, "/validate", "text/plain", body.clone()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(err["error"].as_str().unwrap().contains("application/json"));
    let (status, _) = post_raw(&st, "/validate", "application/json; charset=utf-8", body).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post_raw(&st, "/validate", "application/json", vec![b' '; 128 * 1024]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        st.metrics
            .render()
            .contains("resize_guard_admission_bad_requests_total 1")
    );
    // The intake counts the oversize body (undeclared length: the large lane) on its own.
    let text = st.metrics.render();
    assert!(
        text.contains(
            "resize_guard_admission_refusals_total{reason=\"too-large\",lane=\"large\"} 1"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn events_are_only_for_a_pod_the_cluster_view_knows_with_the_same_uid() {
    use resize_guard_webhook::review::{Stage, review};
    let (cluster, app) = field_test(Policy::default());
    let infeasible = |old: &Pod| {
        let new = with_cpu(old, "2430m", "2430m");
        serde_json::to_vec(&resize_review(old, &new, false)).unwrap()
    };
    // The real pod: the Event is addressed from the view's entry.
    let r = review(Stage::Validate, &infeasible(&app), &cluster).unwrap();
    let ev = r.event.expect("event for the known pod");
    assert_eq!(
        (
            ev.regarding.namespace.as_deref(),
            ev.regarding.name.as_deref(),
            ev.regarding.uid.as_deref(),
            ev.regarding.kind.as_deref()
        ),
        (
            Some("prod"),
            Some("app"),
            app.metadata.uid.as_deref(),
            Some("Pod")
        )
    );
    assert!(r.event_withheld.is_none());
    // Forged requests: another namespace with the real UID, a made-up UID, no UID. Each is
    // still judged (denied) but records nothing; nor does a request naming an unknown node.
    let other_ns = altered(&app, |p| p.metadata.namespace = Some("elsewhere".into()));
    let other_uid = altered(&app, |p| p.metadata.uid = Some("forged".into()));
    let no_uid = altered(&app, |p| p.metadata.uid = None);
    let other_node = altered(&app, |p| {
        p.spec.as_mut().unwrap().node_name = Some("n9".into())
    });
    let r = review(Stage::Validate, &infeasible(&other_node), &cluster).unwrap();
    assert!(r.event.is_none(), "{:?}", r.event);
    for forged in [other_ns, other_uid, no_uid] {
        let r = review(Stage::Validate, &infeasible(&forged), &cluster).unwrap();
        assert!(!r.allowed, "{}", r.decision);
        assert!(r.event.is_none(), "{:?}", r.event);
        let why = r.event_withheld.expect("why no Event");
        assert!(why.contains("not in the cluster view"), "{why}");
    }
    // Through the router, a withheld Event is counted.
    let st = state(cluster);
    let forged = altered(&app, |p| p.metadata.uid = Some("forged".into()));
    let (status, _) = post_raw(&st, "/validate", "application/json", infeasible(&forged)).await;
    assert_eq!(status, StatusCode::OK);
    let text = st.metrics.render();
    assert!(
        text.contains("resize_guard_events_withheld_total 1"),
        "{text}"
    );
}

#[tokio::test]
async fn denials_carry_an_event_intent_except_on_dry_run() {
    use resize_guard_webhook::review::{Stage, review};
    let (cluster, app) = field_test(Policy::default());
    let body = |dry_run| {
        let review = resize_review(&app, &with_cpu(&app, "2430m", "2430m"), dry_run);
        serde_json::to_vec(&review).unwrap()
    };
    let r = review(Stage::Validate, &body(false), &cluster).unwrap();
    let ev = r.event.expect("event");
    assert_eq!(
        (ev.reason.as_str(), ev.reason.is_warning()),
        ("ResizeRejected", true)
    );
    assert_eq!(ev.regarding.name.as_deref(), Some("app"));
    let r = review(Stage::Validate, &body(true), &cluster).unwrap();
    assert!(!r.allowed);
    assert!(r.event.is_none(), "no side effects on dry-run");
    // The decision comes back as a warning (audit annotations reach only the audit log), on
    // dry run only.
    let warnings = |r: &resize_guard_webhook::review::Reviewed| {
        r.review
            .response
            .as_ref()
            .unwrap()
            .warnings
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(
        warnings(&r).last().map(String::as_str),
        Some("resize-guard (dry run): validate decision infeasible")
    );
    let real = review(Stage::Validate, &body(false), &cluster).unwrap();
    assert!(
        warnings(&real).iter().all(|w| !w.contains("dry run")),
        "{:?}",
        warnings(&real)
    );
}

#[tokio::test]
async fn health_endpoints_reflect_readiness_and_metrics() {
    let (cluster, app) = field_test(Policy::default());
    let mut st = state(cluster);
    post(
        &st,
        "/validate",
        &resize_review(&app, &with_cpu(&app, "400m", "400m"), false),
    )
    .await;
    st.ready = Arc::new(|| false);
    let app_router = health_router(st.clone());
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    let status = async |path| {
        app_router
            .clone()
            .oneshot(get(path))
            .await
            .unwrap()
            .status()
    };
    assert_eq!(status("/livez").await, StatusCode::OK);
    assert_eq!(status("/readyz").await, StatusCode::SERVICE_UNAVAILABLE);
    let resp = app_router.oneshot(get("/metrics")).await.unwrap();
    let text = String::from_utf8(
        axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(text.contains("resize_guard_admission_reviews_total{webhook=\"validate\",decision=\"fits\",allowed=\"true\"} 1"), "{text}");
}

fn base64_decode(s: &str) -> Vec<u8> {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = T.iter().position(|t| *t == c).unwrap() as u32;
        buf = (buf << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
            buf &= (1 << bits) - 1;
        }
    }
    out
}

/// A `metrics.k8s.io` that reports every pod's containers at `working_set`, and every path it
/// was asked for (the webhook's only I/O on the request path).
fn metrics_api(working_set: &str) -> (MetricsApi, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let working_set = working_set.to_owned();
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let path = req.uri().path().to_owned();
        seen.lock().unwrap().push(path.clone());
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        let body = json!({
            "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {"name": name},
            "timestamp": k8s_openapi::jiff::Timestamp::now().to_string(),
            "window": "10s",
            "containers": [{"name": "app", "usage": {"cpu": "1m", "memory": working_set}}]
        });
        async move {
            Ok::<_, std::convert::Infallible>(axum::http::Response::new(http_body_util::Full::new(
                axum::body::Bytes::from(body.to_string()),
            )))
        }
    });
    let client = kube::Client::new(service, "default");
    let api = MetricsApi::new(
        client,
        std::time::Duration::from_secs(5),
        Arc::new(Metrics::new()),
    );
    (api, asked)
}

/// `pod` with its `app` container's memory request and limit at `memory`.
fn with_memory(pod: &Pod, memory: &str) -> Pod {
    let mut p = pod.clone();
    let r = p.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap();
    for list in [r.requests.as_mut().unwrap(), r.limits.as_mut().unwrap()] {
        list.insert(
            "memory".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity(memory.into()),
        );
    }
    p.metadata.generation = Some(2);
    p
}

/// The webhook is no oracle for other tenants' usage: it reads `PodMetrics` only for a pod its
/// view knows by UID on the named node, under the view's names, and an answer carries no
/// other pod's numbers.
#[tokio::test]
async fn usage_is_read_only_for_a_pod_the_view_knows_and_never_for_the_names_a_review_claims() {
    let app = field_app("250m").build();
    let secret = PodBuilder::new("other", "secret")
        .owned_by("ReplicaSet")
        .node("n1")
        .container(container("app").guaranteed("100m", "1Gi"))
        .running(3)
        .qos_status("Guaranteed")
        .build();
    let (api, asked) = metrics_api("777Mi");
    let mut st = state(field_cluster(
        Policy::default(),
        vec![app.clone(), secret.clone()],
    ));
    st.usage = Some(api);

    // The real request: the app's own usage is read (once) and judged: denied with its numbers.
    let r = post(
        &st,
        "/mutate",
        &resize_review(&app, &with_memory(&app, "128Mi"), false),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(denial(&r).contains("working set 777Mi"), "{r}");
    assert_eq!(
        *asked.lock().unwrap(),
        ["/apis/metrics.k8s.io/v1beta1/namespaces/prod/pods/app"]
    );

    // Forged: another tenant's pod with a UID the view does not hold, on its node, on another
    // node, or with no UID. No read, no usage, no denial by the memory rule; said and counted.
    let forged_uid = altered(&secret, |p| p.metadata.uid = Some("guessed".into()));
    let no_uid = altered(&secret, |p| p.metadata.uid = None);
    let other_node = altered(&secret, |p| {
        p.spec.as_mut().unwrap().node_name = Some("n9".into())
    });
    let renamed = altered(&secret, |p| p.metadata.namespace = Some("prod".into()));
    let forgeries = [forged_uid, no_uid, other_node, renamed];
    for forged in &forgeries {
        let r = post(
            &st,
            "/mutate",
            &resize_review(forged, &with_memory(forged, "128Mi"), false),
        )
        .await;
        assert_eq!(r["allowed"], true, "{r}");
        let text = r.to_string();
        assert!(!text.contains("777"), "{text}");
        if r["auditAnnotations"]["decision"] == "skipped" {
            continue; // a node the view does not know: nothing is judged at all
        }
        assert!(
            r["warnings"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|w| w.as_str().unwrap_or_default().contains("usage not read")),
            "{r}"
        );
    }
    assert_eq!(
        asked.lock().unwrap().len(),
        1,
        "{:?}",
        asked.lock().unwrap()
    );

    // Forged the other way: the app's own object (known to the view) under another tenant's
    // request names: no read either.
    let mut review = resize_review(&app, &with_memory(&app, "128Mi"), false);
    review["request"]["namespace"] = json!("other");
    review["request"]["name"] = json!("secret");
    let r = post(&st, "/mutate", &review).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(!r.to_string().contains("777"), "{r}");
    assert_eq!(asked.lock().unwrap().len(), 1);
    let text = st.metrics.render();
    assert!(
        text.contains("resize_guard_usage_withheld_total 4"),
        "{text}"
    );
}
