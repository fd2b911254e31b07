//! What kube-apiserver v1.37.2 lets the controller's ServiceAccount write, with the grants of
//! `deploy/` plus both policy components (`deploy/components/best-effort-deletes`,
//! `deploy/components/revert-infeasible`): every write outside what the controller's code sends is
//! refused (403) by the ValidatingAdmissionPolicy of `deploy/base/controller-writes.yaml` that
//! names it — a status change other than adding `DisruptionTarget`, a `pods/resize` to values the
//! kubelet does not report, an eviction or DELETE in kube-system or the install namespace, any
//! change but `caBundle` to either webhook configuration — and the writes the controller makes
//! still go through. The token is the controller's own (`Identity::Controller`), so RBAC and the
//! policies judge it as they judge the controller.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use resize_guard_harness::control_plane::Identity;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::install::{Install, install};
use resize_guard_harness::objects::{create_all, guaranteed_pod, wait_pod};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);
const INSTALL_NS: &str = "resize-guard";

/// What each policy's refusal says (its `message`, so a CEL compilation or evaluation error,
/// which also names the policy, is not mistaken for it).
const STATUS: &str = "may only add the DisruptionTarget condition";
const RESIZE: &str = "may only resize a pod's containers back to the resources";
const REMOVALS: &str =
    "its own namespace (ValidatingAdmissionPolicy resize-guard-controller-removals)";
const WEBHOOKS: &str = "may change only webhooks[*].clientConfig.caBundle";
const STATUS_NAMESPACES: &str = "may not write the status of pods in kube-system";

async fn setup() -> &'static Env {
    let env = shared(EnvOptions::default());
    // The webhook configurations as shipped, pointed at a port nothing serves (failurePolicy
    // Ignore): only their writes are under test here.
    install(
        env,
        &Install {
            webhook_url: Some("https://127.0.0.1:1".into()),
            with_policy_grants: true,
            ..Default::default()
        },
    )
    .await;
    env
}

/// True when `r` is a 403 whose message carries `says`.
fn refused<T>(r: &Result<T, kube::Error>, says: &str) -> bool {
    matches!(r, Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains(says))
}

/// The policies reach kube-apiserver's admission through an informer: retries `write` (a dry
/// run, which admission judges but nothing stores, so a write let through before the policy
/// arrived changes nothing) until the first refusal carrying `says`; then every later answer of
/// that policy is the policy's.
async fn first_refusal<T, F, Fut>(what: &str, says: &str, write: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
    T: std::fmt::Debug,
{
    let deadline = Instant::now() + T_POLICY;
    loop {
        let r = write().await;
        if refused(&r, says) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not refused by the policy within {T_POLICY:?}; last answer {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

const T_POLICY: Duration = Duration::from_secs(30);

async fn controller_client(env: &Env) -> kube::Client {
    env.cp.client_as(Identity::Controller).await.unwrap()
}

/// A pod Pod Security `restricted` admits (the install namespace enforces it), not scheduled.
pub(super) fn restricted_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "app", "image": "registry.example/app:1",
                "securityContext": {"allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}}}]
        }
    }))
    .unwrap()
}

fn eviction(name: &str) -> Eviction {
    serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}
    }))
    .unwrap()
}

async fn evict(api: &Api<Pod>, name: &str) -> Result<Value, kube::Error> {
    api.create_subresource::<_, Value>("eviction", name, &PostParams::default(), &eviction(name))
        .await
}

fn disruption_target(reason: &str) -> Value {
    json!({"status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": reason,
        "message": "resize-guard: preempting to make room for the in-place resize of t/app",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}})
}

#[tokio::test]
async fn the_controllers_status_writes_reach_only_its_disruption_target() {
    let env = setup().await;
    let _g = env.guard();
    let ns = env.namespace("status").await;
    let admin: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let controller: Api<Pod> = Api::namespaced(controller_client(env).await, &ns);
    crate::scenario::create_unbound(&admin, "victim").await;
    let status_with = |v: Value, params: PatchParams| {
        let api = controller.clone();
        async move {
            api.patch_status("victim", &params, &Patch::Strategic(&v))
                .await
        }
    };
    let status = |v: Value| status_with(v, PatchParams::default());
    first_refusal("a PodScheduled condition", STATUS, || {
        status_with(
            json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}),
            PatchParams::default().dry_run(),
        )
    })
    .await;
    for (what, body) in [
        ("the phase", json!({"status": {"phase": "Failed"}})),
        ("the message", json!({"status": {"message": "x"}})),
        (
            "DisruptionTarget with another reason",
            disruption_target("EvictionByEvictionAPI"),
        ),
        (
            "DisruptionTarget False",
            json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "False",
                "reason": "PreemptionByResizeGuard"}]}}),
        ),
        (
            "a label through pods/status",
            json!({"metadata": {"labels": {"tampered": "yes"}}}),
        ),
    ] {
        let r = status(body).await;
        assert!(refused(&r, STATUS), "the controller changed {what}: {r:?}");
    }
    // What controller/src/preemption/actuator/removal.rs sends goes through, also over the
    // Eviction API's own DisruptionTarget.
    let mut body = disruption_target("PreemptionByResizeGuard");
    status(body.clone()).await.unwrap();
    body["status"]["conditions"][0]["message"] = json!("again, for another preemptor");
    let marked = status(body).await.unwrap();
    let conditions = marked.status.unwrap().conditions.unwrap_or_default();
    assert_eq!(
        conditions
            .iter()
            .filter(|c| c.type_ == "DisruptionTarget")
            .count(),
        1
    );
    // Not in kube-system or the install namespace.
    for protected in ["kube-system", INSTALL_NS] {
        let admin: Api<Pod> = Api::namespaced(env.client().await, protected);
        let name = format!("status-{}", env.unique("p"));
        admin
            .create(&PostParams::default(), &restricted_pod(&name))
            .await
            .unwrap();
        let api: Api<Pod> = Api::namespaced(controller_client(env).await, protected);
        let r = api
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Strategic(&disruption_target("PreemptionByResizeGuard")),
            )
            .await;
        assert!(
            refused(&r, STATUS_NAMESPACES),
            "marked a pod in {protected}: {r:?}"
        );
        admin.delete(&name, &DeleteParams::default()).await.unwrap();
    }
}

#[tokio::test]
async fn the_controllers_resizes_reach_only_the_resources_the_kubelet_reports() {
    let env = setup().await;
    let _g = env.guard();
    let ns = env.namespace("resize").await;
    let node = env.node("revert", "1000m", "2Gi").await;
    let admin: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let controller: Api<Pod> = Api::namespaced(controller_client(env).await, &ns);
    let pods_on_node = [
        ("filler", "low", "800m", "256Mi"),
        ("app", "high", "100m", "64Mi"),
    ];
    create_all(&admin, &node, &pods_on_node).await.unwrap();
    // Resized past what the node has free: the kubelet defers it, so spec (500m) and what the
    // kubelet reports the container runs with (100m) differ.
    let out = env
        .kubectl()
        .resize(
            &ns,
            "app",
            &resize_guard_harness::objects::cpu_resize("500m"),
        )
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    let app = wait_pod(&admin, "app", T, |p| {
        resize_guard_harness::objects::resize_pending(p).is_some()
    })
    .await
    .unwrap();
    let actual = app.status.unwrap().container_statuses.unwrap()[0]
        .resources
        .clone()
        .unwrap();
    assert_eq!(
        actual.requests.as_ref().unwrap()["cpu"].0,
        "100m",
        "{actual:?}"
    );
    let resize_with = |resources: Value, params: PatchParams| {
        let api = controller.clone();
        async move {
            let body = json!({"spec": {"containers": [{"name": "app", "resources": resources}]}});
            api.patch_subresource("resize", "app", &params, &Patch::Strategic(&body))
                .await
        }
    };
    let resize = |resources: Value| resize_with(resources, PatchParams::default());
    let cpu = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": cpu, "memory": "64Mi"}});
    first_refusal("a resize to 300m", RESIZE, || {
        resize_with(cpu("300m"), PatchParams::default().dry_run())
    })
    .await;
    for (what, body) in [
        ("a resize to 900m", cpu("900m")),
        (
            "a memory change",
            json!({"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}}),
        ),
    ] {
        let r = resize(body).await;
        assert!(refused(&r, RESIZE), "the controller made {what}: {r:?}");
    }
    // What controller/src/preemption/decision/infeasible.rs sends: the reported resources.
    let reverted = resize(serde_json::to_value(&actual).unwrap())
        .await
        .unwrap();
    let spec = reverted.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap();
    assert_eq!(spec.requests.unwrap()["cpu"].0, "100m");
}

#[tokio::test]
async fn the_controller_removes_no_pod_in_kube_system_or_its_own_namespace() {
    let env = setup().await;
    let _g = env.guard();
    let tenant = env.namespace("tenant").await;
    let client = controller_client(env).await;
    let mut first = true;
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    for protected in ["kube-system", INSTALL_NS] {
        let admin: Api<Pod> = Api::namespaced(env.client().await, protected);
        let controller: Api<Pod> = Api::namespaced(client.clone(), protected);
        let name = format!("removal-{}", env.unique("p"));
        admin
            .create(&PostParams::default(), &restricted_pod(&name))
            .await
            .unwrap();
        if first {
            first_refusal("a DELETE in kube-system", REMOVALS, || {
                controller.delete(&name, &dry_delete)
            })
            .await;
            first = false;
        }
        let r = controller.delete(&name, &DeleteParams::default()).await;
        assert!(refused(&r, REMOVALS), "deleted a pod in {protected}: {r:?}");
        let r = evict(&controller, &name).await;
        assert!(refused(&r, REMOVALS), "evicted a pod in {protected}: {r:?}");
        assert!(
            admin
                .get(&name)
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none(),
            "{protected}/{name} is still there, not terminating"
        );
        admin.delete(&name, &DeleteParams::default()).await.unwrap();
    }
    // A tenant's pods: the Eviction API and, with the best-effort-deletes grant, DELETE.
    let admin: Api<Pod> = Api::namespaced(env.client().await, &tenant);
    let controller: Api<Pod> = Api::namespaced(client, &tenant);
    for name in ["evicted", "deleted"] {
        admin
            .create(
                &PostParams::default(),
                &guaranteed_pod(name, "", "low", "100m", "64Mi"),
            )
            .await
            .unwrap();
    }
    evict(&controller, "evicted").await.unwrap();
    controller
        .delete("deleted", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn the_controller_changes_only_ca_bundle_on_the_webhook_configurations() {
    let env = setup().await;
    let _g = env.guard();
    let admin = env.client().await;
    // The validating configuration as deploy/overlays/validating-only ships it (beside the
    // installed mutating one, both named resize-guard), pointed at the same closed port.
    let validating: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "resize-guard"},
        "webhooks": [{
            "name": "validate.resize-guard.io",
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods/resize"], "scope": "Namespaced"}],
            "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Ignore", "timeoutSeconds": 3, "matchPolicy": "Equivalent",
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                "operator": "NotIn", "values": ["kube-system", "resize-guard"]}]},
        }]
    }))
    .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .patch(
            "resize-guard",
            &PatchParams::apply("privileges-test").force(),
            &Patch::Apply(&validating),
        )
        .await
        .unwrap();
    let client = controller_client(env).await;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let ca = |n: u8| if n == 1 { "Y2EtMQo=" } else { "Y2EtMgo=" };
    // Strategic merge patches of one field of the webhook (merged by name).
    let one = |field: Value| json!({"webhooks": [field]});
    let refusals = [
        ("failurePolicy", json!({"failurePolicy": "Fail"})),
        (
            "rules",
            json!({"rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*"]}]}),
        ),
        ("timeoutSeconds", json!({"timeoutSeconds": 30})),
        ("namespaceSelector", json!({"namespaceSelector": null})),
        (
            "clientConfig.url",
            json!({"clientConfig": {"url": "https://203.0.113.1/x"}}),
        ),
    ];
    let params = PatchParams::default();
    let dry = PatchParams::default().dry_run();
    let named = |name: &str, field: &Value| {
        let mut f = field.clone();
        f["name"] = json!(name);
        one(f)
    };
    let (m, v) = ("mutate.resize-guard.io", "validate.resize-guard.io");
    let (fail_m, fail_v) = (
        Patch::Strategic(named(m, &refusals[0].1)),
        Patch::Strategic(named(v, &refusals[0].1)),
    );
    first_refusal(
        "failurePolicy of the mutating configuration",
        WEBHOOKS,
        || mutating.patch("resize-guard", &dry, &fail_m),
    )
    .await;
    first_refusal(
        "failurePolicy of the validating configuration",
        WEBHOOKS,
        || validating.patch("resize-guard", &dry, &fail_v),
    )
    .await;
    // Each field of each webhook, then an annotation of each configuration.
    let annotation =
        json!({"metadata": {"annotations": {"cert-manager.io/inject-ca-from": "x/y"}}});
    let changes = refusals
        .iter()
        .map(|(what, field)| (*what, named(m, field), named(v, field)))
        .chain([("an annotation", annotation.clone(), annotation)]);
    for (what, on_m, on_v) in changes {
        let r = mutating
            .patch("resize-guard", &params, &Patch::Strategic(on_m))
            .await;
        assert!(refused(&r, WEBHOOKS), "mutating: changed {what}: {r:?}");
        let r = validating
            .patch("resize-guard", &params, &Patch::Strategic(on_v))
            .await;
        assert!(refused(&r, WEBHOOKS), "validating: changed {what}: {r:?}");
    }
    // caBundle, as the certificate manager writes it (server-side apply of that field alone).
    let bundle = |kind: &str, hook: &str, n: u8| {
        Patch::Apply(json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind, "metadata": {"name": "resize-guard"},
            "webhooks": [{"name": hook, "clientConfig": {"caBundle": ca(n)}}]}))
    };
    let manager = PatchParams::apply("resize-guard-controller").force();
    for n in [1, 2] {
        let m = bundle("MutatingWebhookConfiguration", "mutate.resize-guard.io", n);
        let applied = mutating.patch("resize-guard", &manager, &m).await.unwrap();
        assert_eq!(
            applied.webhooks.unwrap()[0].failure_policy.as_deref(),
            Some("Ignore")
        );
        let v = bundle(
            "ValidatingWebhookConfiguration",
            "validate.resize-guard.io",
            n,
        );
        validating
            .patch("resize-guard", &manager, &v)
            .await
            .unwrap();
    }
}
