//! The version-sensitive suite: every behaviour of resize-guard that depends on the Kubernetes
//! minor, on a real kube-apiserver and hollow nodes (upstream's kubelet) of the minor
//! `RESIZE_GUARD_K8S_VERSION` names (1.33 … 1.37). `make test` runs it on v1.37 (with the full
//! suite) and on v1.35, the first GA minor; `make test-matrix` on all five, and prints the table
//! docs/src/versions.md shows.
//!
//! One test plays every behaviour; each is a named check run in its own task, so one failure
//! does not hide the others. The results go to `$RESIZE_GUARD_MATRIX_DIR/v1.N.json` (when set)
//! for the table (a detail `short — long` shows `short` in the table: how the minors differ), and
//! the test fails if any check failed. A check that cannot exist on a minor
//! (the node opt-out field before v1.37, drift repair where the API server refuses the drift) is
//! recorded as not applicable, with the reason.
//!
//! First without resize-guard (upstream's own answers), then with it installed from `deploy/`
//! (webhook binary as its ServiceAccount, the controller as its own) and
//! `feasibility.revertInfeasible: true`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::run_guaranteed;
use crate::scenario::webhook as support;

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;
use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::binaries::requested_minor;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::hollow_node::HollowNodeConfig;
use resize_guard_harness::objects::*;
use serde_json::json;

/// Upstream's wording of the QoS rule in `ValidatePodResize`.
const QOS_RULE: &str = "Pod QOS Class may not change as a result of resizing";
const T: Duration = Duration::from_secs(60);
const QOS_PATCH: &str =
    r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m"}}}]}}"#;
/// More cpu than the field test's node (1930m allocatable) has.
const TOO_BIG: &str = "2430m";

/// One behaviour's result on this minor.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    id: &'static str,
    behaviour: &'static str,
    /// `pass`, `fail` or `n/a`.
    result: &'static str,
    detail: String,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

/// Upstream's refusals without resize-guard (`qos`, `infeasible` on v1.36+), to compare its
/// refusals with.
static UPSTREAM: Mutex<Vec<(&'static str, Status)>> = Mutex::new(Vec::new());

fn upstream_refusal(key: &str) -> Status {
    UPSTREAM
        .lock()
        .unwrap()
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("no upstream {key} refusal recorded (see the *-upstream rows)"))
}

/// Resizes pod `app` in `ns` by `patch` through the API, as a client (the VPA updater,
/// upstream's e2e) reads the answer: the Status of a refusal.
async fn api_resize(env: &Env, ns: &str, patch: &str, dry_run: bool) -> Result<(), Status> {
    let pods: Api<Pod> = Api::namespaced(env.client().await, ns);
    let patch: serde_json::Value = serde_json::from_str(patch).unwrap();
    let params = if dry_run {
        PatchParams::default().dry_run()
    } else {
        PatchParams::default()
    };
    match pods
        .patch_subresource("resize", "app", &params, &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err(*s),
        Err(e) => panic!("resize: {e}"),
    }
}

/// A Status's causes as (type, field, message).
fn causes(s: &Status) -> Vec<(String, String, String)> {
    s.details
        .iter()
        .flat_map(|d| &d.causes)
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

/// A Status's `details` kind and name.
fn subject(s: &Status) -> (String, String) {
    s.details
        .as_ref()
        .map(|d| (d.kind.clone(), d.name.clone()))
        .unwrap_or_default()
}

/// What kube-apiserver puts before the mutating webhook's message (`ToStatusErr`).
const DENIED: &str = "admission webhook \"mutate.resize-guard.io\" denied the request: ";

fn record(id: &'static str, behaviour: &'static str, result: &'static str, detail: String) {
    println!("[{result}] {id}: {behaviour} — {detail}");
    ROWS.lock().unwrap().push(Row {
        id,
        behaviour,
        result,
        detail,
    });
}

/// Runs `check` in its own task and records whether it passed (its value is the detail) or
/// panicked (the panic message is).
async fn check<F>(id: &'static str, behaviour: &'static str, check: F)
where
    F: Future<Output = String> + Send + 'static,
{
    match tokio::spawn(check).await {
        Ok(detail) => record(id, behaviour, "pass", detail),
        Err(e) => {
            let why = match e.try_into_panic() {
                Ok(p) => p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panicked".into()),
                Err(e) => e.to_string(),
            };
            record(id, behaviour, "fail", why);
        }
    }
}

fn not_applicable(id: &'static str, behaviour: &'static str, why: &str) {
    record(id, behaviour, "n/a", why.to_owned());
}

/// The cpu the kubelet allocated to sidecar `name`.
fn sidecar_allocated_cpu(p: &Pod, name: &str) -> Option<String> {
    p.status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == name)?
        .allocated_resources
        .as_ref()?
        .get("cpu")
        .map(|q| q.0.clone())
}

/// A Guaranteed pod `mesh` with a sidecar `proxy` (a restartable init container) and `app`, 250m
/// each, bound to `node`.
fn sidecar_pod(node: &str) -> Pod {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": cpu, "memory": "64Mi"}});
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "mesh", "labels": {"app": "mesh"}},
        "spec": {
            "nodeName": node,
            "priorityClassName": "high",
            "terminationGracePeriodSeconds": 30,
            "initContainers": [{"name": "proxy", "image": "registry.example/proxy:1", "restartPolicy": "Always", "resources": res("250m")}],
            "containers": [{"name": "app", "image": "registry.example/app:1", "resources": res("250m")}],
        },
    }))
    .unwrap()
}

/// Upstream alone refuses a QoS-changing resize in its own words.
async fn qos_upstream(env: &'static Env) -> String {
    let (ns, _, _) = env.field_test("v-qos-up").await;
    let refused = api_resize(env, &ns, QOS_PATCH, true).await.unwrap_err();
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    UPSTREAM.lock().unwrap().push(("qos", refused));
    let out = env.kubectl().resize(&ns, "app", QOS_PATCH).await.unwrap();
    assert!(!out.success, "stored: {}", out.stdout);
    assert!(out.stderr.contains(QOS_RULE), "{}", out.stderr);
    format!("refused by the API server: \"{QOS_RULE}\"")
}

/// Upstream alone on a resize above allocatable: v1.36+ refuse it (`PodResizeValidator`); older
/// minors store it and the kubelet marks it Infeasible. Returns the namespace of a stored one.
async fn infeasible_upstream(env: &'static Env, minor: u32) -> (String, Option<String>) {
    let (ns, _, pods) = env.field_test("v-inf-up").await;
    if minor >= 36 {
        let patch = cpu_resize(TOO_BIG);
        let refused = api_resize(env, &ns, &patch, true).await.unwrap_err();
        assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
        UPSTREAM.lock().unwrap().push(("infeasible", refused));
    }
    let out = env.try_resize_cpu(&ns, "app", TOO_BIG).await;
    if minor >= 36 {
        assert!(!out.success, "v1.{minor} stored it: {}", out.stdout);
        let want = "node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930";
        assert!(out.stderr.contains(want), "{}", out.stderr);
        return (
            format!("refused by the API server (PodResizeValidator) — \"{want}\""),
            None,
        );
    }
    assert!(out.success, "v1.{minor} refused it: {}", out.stderr);
    let p = wait_pod(&pods, "app", T, |p| {
        resize_pending(p).is_some_and(|(r, _)| r == "Infeasible")
    })
    .await
    .unwrap();
    let (_, message) = resize_pending(&p).unwrap();
    // v1.33 kubelet.go canResizePod, v1.34–v1.35 allocation_manager.go handlePodResourcesResize.
    assert_eq!(
        message,
        "Node didn't have enough capacity: cpu, requested: 2430, capacity: 1930"
    );
    (
        format!("stored, the kubelet marks it Infeasible — \"{message}\""),
        Some(ns),
    )
}

/// The drift upstream left (a stored Infeasible resize) is reverted by the controller.
async fn infeasible_reverted(env: &'static Env, ns: String) -> String {
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let p = wait_pod(&pods, "app", T, |p| {
        spec_cpu(p).0.as_deref() == Some("250m") && resize_pending(p).is_none()
    })
    .await
    .unwrap();
    assert_eq!(allocated_cpu(&p).as_deref(), Some("250m"));
    let reverted = wait_events(env, &ns, "ResizeReverted").await;
    assert!(
        reverted.contains("feasibility.revertInfeasible")
            && reverted.contains("Node didn't have enough capacity"),
        "{reverted}"
    );
    "the controller reverted the stored Infeasible resize to the pod's actual 250m (ResizeReverted)"
        .into()
}

async fn wait_events(env: &Env, ns: &str, reason: &str) -> String {
    let mut text = String::new();
    for _ in 0..300 {
        text = env
            .kubectl()
            .run(["events", "-n", ns])
            .await
            .unwrap()
            .stdout;
        if text.contains(reason) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {reason} Event in {ns}: {text}");
}

/// resize-guard refuses a QoS change as `ValidatePodResize` does (422 Invalid, upstream's
/// details, causes and message word for word), then explains it (in the message and as the last
/// cause, which kubectl prints).
async fn qos_explained(env: &'static Env) -> String {
    let (ns, _, _) = env.field_test("v-qos").await;
    let up = upstream_refusal("qos");
    let with = api_resize(env, &ns, QOS_PATCH, false).await.unwrap_err();
    assert_eq!(
        (with.code, with.reason.as_str()),
        (422, "Invalid"),
        "{with:?}"
    );
    assert_eq!(subject(&with), subject(&up));
    let (ours, theirs) = (causes(&with), causes(&up));
    assert_eq!(ours[..ours.len() - 1], theirs[..], "{with:?}");
    let explanation = ours.last().unwrap();
    assert_eq!(
        (explanation.0.as_str(), explanation.1.as_str()),
        ("resize-guard.io/Explanation", "spec")
    );
    assert!(
        with.message.starts_with(&format!(
            "{DENIED}{}. resize-guard: this resize would change the pod's QoS class from Guaranteed to Burstable",
            up.message
        )) && with.message.ends_with(&explanation.2),
        "{with:?}\nupstream: {up:?}"
    );
    let out = env.kubectl().resize(&ns, "app", QOS_PATCH).await.unwrap();
    assert!(!out.success);
    for want in [
        &format!("* spec: Invalid value: \"Guaranteed\": {QOS_RULE}"),
        "* spec: resize-guard: this resize would change the pod's QoS class from Guaranteed to Burstable",
        "container app: cpu request 500m ≠ limit 250m",
    ] {
        assert!(out.stderr.contains(want), "{want:?} in\n{}", out.stderr);
    }
    "upstream's 422 Invalid word for word, then resize-guard's explanation (container app: cpu request 500m ≠ limit 250m)".into()
}

/// resize-guard refuses a resize above allocatable with the node's numbers, on every minor, in
/// `PodResizeValidator`'s shape: on v1.36+ its refusal word for word, then the explanation; on
/// v1.33–v1.35 (which store it) 403 Forbidden with cause NodeCapacity and words true there.
async fn infeasible_refused(env: &'static Env, minor: u32) -> String {
    let (ns, node, pods) = env.field_test("v-inf").await;
    let with = api_resize(env, &ns, &cpu_resize(TOO_BIG), false)
        .await
        .unwrap_err();
    assert_eq!(
        (with.code, with.reason.as_str()),
        (403, "Forbidden"),
        "{with:?}"
    );
    assert_eq!(subject(&with), ("pods".to_owned(), "app".to_owned()));
    assert_eq!(
        causes(&with),
        [("NodeCapacity".to_owned(), String::new(), String::new())]
    );
    let ours = format!(
        "resize-guard: this resize can never fit on node {node}: the pod would request cpu 2430m but the node's allocatable cpu is 1930m"
    );
    let detail = if minor >= 36 {
        let up = upstream_refusal("infeasible");
        assert_eq!(causes(&with), causes(&up));
        assert_eq!(subject(&with), subject(&up));
        assert!(
            with.message
                .starts_with(&format!("{DENIED}{}. {ours}", up.message)),
            "{with:?}\nupstream: {up:?}"
        );
        assert!(
            with.message
                .contains(&format!("Kubernetes v1.{minor} refuses it itself")),
            "{with:?}"
        );
        "PodResizeValidator's 403 (NodeCapacity) word for word, then the node's numbers; nothing stored"
    } else {
        assert!(
            with.message.starts_with(&format!(
                "{DENIED}pods \"app\" is forbidden: {ours}; Kubernetes v1.{minor} would store it and the kubelet would mark it Infeasible"
            )),
            "{with:?}"
        );
        assert!(!with.message.contains("allocatable resources"), "{with:?}");
        "403 Forbidden, cause NodeCapacity, with the node's numbers and the kubelet's; nothing stored"
    };
    let out = env.try_resize_cpu(&ns, "app", TOO_BIG).await;
    assert!(!out.success, "stored: {}", out.stdout);
    assert!(out.stderr.contains(&ours), "{}", out.stderr);
    assert_eq!(pods.get("app").await.unwrap().metadata.generation, Some(1));
    detail.into()
}

/// Waits until pod `name`'s resize is no longer pending and `allocated` holds, and asserts its
/// containers did not restart (the resize was applied in place).
async fn applied_in_place(pods: &Api<Pod>, name: &str, allocated: impl Fn(&Pod) -> bool) {
    let p = wait_pod(pods, name, T, |p| {
        allocated(p) && resize_pending(p).is_none()
    })
    .await
    .unwrap();
    assert_eq!(restart_count(&p), 0, "{name} restarted: not in place");
}

/// A Deferred resize: the lower-priority filler is preempted and the resize completes in place.
async fn deferred_preempted(env: &'static Env) -> String {
    let (ns, _, pods) = env.field_test("v-def").await;
    env.resize_cpu(&ns, "app", "550m").await;
    applied_in_place(&pods, "app", |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await;
    let preempted = wait_events(env, &ns, "Preempted").await;
    // kubectl prints the object as `pod/filler` or (v1.33) `Pod/filler`.
    assert!(
        preempted
            .lines()
            .any(|l| l.contains(" Preempted ") && l.to_ascii_lowercase().contains("pod/filler")),
        "{preempted}"
    );
    "Deferred → filler preempted → 550m allocated in place, 0 restarts".into()
}

/// A node labelled `resize-guard.io/preemption=disabled` never gets victims; the controller says
/// why.
async fn optout_label(env: &'static Env) -> String {
    let ns = env.namespace("v-optout").await;
    let cfg = HollowNodeConfig::with_allocatable(&env.unique("opted-out"), "1930m", "3Gi")
        .unwrap()
        .label("resize-guard.io/preemption", "disabled");
    env.add_node(cfg.clone()).await;
    optout(env, &ns, &cfg.name, "resize-guard.io/preemption=disabled").await
}

/// A node with `spec.podPreemptionPolicy.disableResizePreemption` (v1.37, alpha gate on).
async fn optout_field(env: &'static Env) -> String {
    let ns = env.namespace("v-optfield").await;
    let node = env.node("opted-out-field", "1930m", "3Gi").await;
    env.disable_resize_preemption(&node, &["platform.example/batch"])
        .await;
    optout(
        env,
        &ns,
        &node,
        "spec.podPreemptionPolicy.disableResizePreemption: platform.example/batch",
    )
    .await
}

async fn optout(env: &'static Env, ns: &str, node: &str, why: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(env.client().await, ns);
    create_all(
        &pods,
        node,
        &[
            ("filler", "low", "1500m", "256Mi"),
            ("app", "high", "250m", "256Mi"),
        ],
    )
    .await
    .unwrap();
    env.resize_cpu(ns, "app", "550m").await;
    wait_pod(&pods, "app", T, |p| {
        resize_pending(p).is_some_and(|(r, _)| r == "Deferred")
    })
    .await
    .unwrap();
    let failed = wait_events(env, ns, "ResizePreemptionFailed").await;
    assert!(failed.contains(why), "{failed}");
    let filler = pods.get("filler").await.unwrap();
    assert!(
        filler.metadata.deletion_timestamp.is_none(),
        "filler preempted"
    );
    format!("Deferred, nothing preempted; ResizePreemptionFailed names {why}")
}

/// A sidecar's resize is judged with the pod's sidecar-aware request and completes in place
/// once the filler is preempted.
async fn sidecar_resize(env: &'static Env) -> String {
    let (ns, node, pods) = env
        .scenario("v-sidecar", ("sidecar", "1930m", "3Gi"), &[])
        .await;
    run_guaranteed(&pods, "filler", &node, "low", "1000m", "256Mi").await;
    create_running(&pods, &sidecar_pod(&node)).await.unwrap();
    // 1000m + (250m app + 800m proxy) > 1930m: Deferred, 120m short.
    let patch = r#"{"spec":{"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"800m"},"limits":{"cpu":"800m"}}}]}}"#;
    let out = env.kubectl().resize(&ns, "mesh", patch).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("resize-guard: node {node} lacks cpu 120m; the resize will be Deferred; resize-guard will preempt {ns}/filler")),
        "{}",
        out.stderr
    );
    applied_in_place(&pods, "mesh", |p| {
        sidecar_allocated_cpu(p, "proxy").as_deref() == Some("800m")
    })
    .await;
    "sidecar proxy 250m → 800m: warned 120m short, filler preempted, allocated in place".into()
}

/// A memory-limit decrease without `RestartContainer`: v1.33's API server refuses it in its own
/// words (resize-guard mirrors that minor's validation and steps aside: no warning of its own);
/// from v1.34 it is applied in place.
async fn memory_limit_decrease(env: &'static Env, minor: u32) -> String {
    let (ns, _, pods) = env.field_test("v-mem").await;
    let patch = r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"memory":"128Mi"},"limits":{"memory":"128Mi"}}}]}}"#;
    let out = env.kubectl().resize(&ns, "app", patch).await.unwrap();
    if minor <= 33 {
        assert!(!out.success, "stored: {}", out.stdout);
        let want = "spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer";
        assert!(out.stderr.contains(want), "{}", out.stderr);
        assert!(!out.stderr.contains("resize-guard"), "{}", out.stderr);
        // Judged by v1.33's rules: invalid, left to the API server (not "fits").
        let mut annotations = serde_json::Value::Null;
        for _ in 0..100 {
            if let Some(e) = support::resize_audit(env, &ns, "app").last() {
                annotations = e["annotations"].clone();
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            annotations["mutate.resize-guard.io/decision"], "invalid",
            "{annotations}"
        );
        assert!(
            annotations["mutate.resize-guard.io/invalid"]
                .as_str()
                .is_some_and(|m| m.contains("memory limits cannot be decreased")),
            "{annotations}"
        );
        return format!("refused by the API server — \"{want}\"; resize-guard steps aside");
    }
    assert!(out.success, "{}", out.stderr);
    applied_in_place(&pods, "app", |p| {
        allocated(p, "memory").as_deref() == Some("128Mi")
    })
    .await;
    "applied in place — 256Mi → 128Mi, 0 restarts".into()
}

/// Both programs read the version at start-up and export what it means.
async fn version_reported(env: &'static Env, health_ports: [u16; 2], minor: u32) -> String {
    for port in health_ports {
        version_metrics(env, port, minor).await;
    }
    format!(
        "{} detected at start-up by the webhook and the controller (metrics, log)",
        env.cp.version()
    )
}

async fn version_metrics(env: &'static Env, port: u16, minor: u32) {
    let get = |path| resize_guard_harness::install::http_get(port, path);
    // Read in the background at start-up: wait for it (the controller may have just started).
    let mut metrics = String::new();
    for _ in 0..300 {
        metrics = get("/metrics").await.unwrap();
        if metrics.contains("resize_guard_kubernetes_info") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let info = format!(
        "resize_guard_kubernetes_info{{git_version=\"{}\",minor=\"1.{minor}\",support=\"supported\"}} 1",
        env.cp.version()
    );
    assert!(metrics.contains(&info), "{metrics}");
    // What differs between minors, from each minor's own source (see shared/src/version.rs).
    for (feature, has) in [
        ("resize_subresource", true),
        ("memory_limit_decrease", minor >= 34),
        ("kubelet_marks_capacity_infeasible", minor <= 35),
        ("api_server_capacity_check", minor >= 36),
        ("node_resize_preemption_field", minor >= 37),
    ] {
        let line = format!(
            "resize_guard_kubernetes_feature{{feature=\"{feature}\"}} {}",
            u8::from(has)
        );
        assert!(metrics.contains(&line), "{line} missing:\n{metrics}");
    }
    // Ready follows once the policy has been read too (it may trail the version by a moment).
    let mut ready = get("/readyz").await;
    for _ in 0..300 {
        if ready.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        ready = get("/readyz").await;
    }
    assert!(ready.is_ok(), "never ready: {ready:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_sensitive_behaviour_on_this_minor() {
    let minor = requested_minor().unwrap();
    let gates = if minor >= 37 {
        vec!["InPlacePodVerticalScalingSchedulerPreemption=true".to_owned()]
    } else {
        Vec::new()
    };
    let env = shared(EnvOptions {
        feature_gates: gates,
    });
    let _g = env.guard();
    assert_eq!(env.cp.minor(), minor);
    println!("version-sensitive suite on Kubernetes {}", env.cp.version());

    // 1. Without resize-guard: upstream's own answers.
    let stored = std::sync::Arc::new(Mutex::new(None));
    let kept = stored.clone();
    tokio::join!(
        check(
            "qos-upstream",
            "QoS change, without resize-guard",
            qos_upstream(env)
        ),
        check(
            "infeasible-upstream",
            "resize above allocatable, without resize-guard",
            async move {
                let (detail, ns) = infeasible_upstream(env, minor).await;
                *kept.lock().unwrap() = ns;
                detail
            }
        ),
    );

    // 2. Installed from deploy/, with drift repair on and the grant it needs, as an operator
    // adds it (deploy/components/revert-infeasible; the webhook configurations stay as
    // registered).
    let hook = support::start(env, Webhooks::Mutating).await;
    resize_guard_harness::install::install(
        env,
        &resize_guard_harness::install::Install {
            with_policy_grants: true,
            ..Default::default()
        },
    )
    .await;
    support::set_policy(
        env,
        "mode: enforce\nfeasibility:\n  revertInfeasible: true\n",
    )
    .await;
    let controller = support::controller(env, "versions", &["--certificates=external"]).await;
    let stored_ns = stored.lock().unwrap().take();
    let revert = async {
        match stored_ns {
            Some(ns) => {
                check(
                    "infeasible-revert",
                    "stored Infeasible resize reverted (revertInfeasible)",
                    infeasible_reverted(env, ns),
                )
                .await
            }
            None if minor >= 36 => not_applicable(
                "infeasible-revert",
                "stored Infeasible resize reverted (revertInfeasible)",
                "the API server refuses the resize, so none is stored",
            ),
            None => record(
                "infeasible-revert",
                "stored Infeasible resize reverted (revertInfeasible)",
                "fail",
                "no stored Infeasible resize to revert (see infeasible-upstream)".into(),
            ),
        }
    };
    let field = async {
        if minor >= 37 {
            check(
                "optout-field",
                "node opt-out by spec.podPreemptionPolicy",
                optout_field(env),
            )
            .await
        } else {
            not_applicable(
                "optout-field",
                "node opt-out by spec.podPreemptionPolicy",
                "the Node field arrives in v1.37",
            )
        }
    };
    let ports = [hook.health_port, controller.health_port];
    tokio::join!(
        check(
            "version",
            "version detected at start-up",
            version_reported(env, ports, minor)
        ),
        check("qos", "QoS change, with resize-guard", qos_explained(env)),
        check(
            "infeasible",
            "resize above allocatable, with resize-guard",
            infeasible_refused(env, minor)
        ),
        revert,
        check(
            "deferred",
            "Deferred → preemption → completion",
            deferred_preempted(env)
        ),
        check(
            "optout-label",
            "node opt-out by resize-guard.io/preemption label",
            optout_label(env)
        ),
        field,
        check(
            "memory-limit",
            "memory-limit decrease without RestartContainer",
            memory_limit_decrease(env, minor)
        ),
        check(
            "sidecar",
            "sidecar resize, Deferred → preemption → completion",
            sidecar_resize(env)
        ),
    );
    controller.stop().await;

    let rows = ROWS.lock().unwrap().clone();
    if let Some(dir) = std::env::var_os("RESIZE_GUARD_MATRIX_DIR") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let doc = json!({"kubernetes": env.cp.version(), "minor": minor, "rows": rows});
        std::fs::write(
            dir.join(format!("v1.{minor}.json")),
            serde_json::to_string_pretty(&doc).unwrap(),
        )
        .unwrap();
    }
    let failed: Vec<&Row> = rows.iter().filter(|r| r.result == "fail").collect();
    assert!(
        failed.is_empty(),
        "{} of {} checks failed on {}: {failed:#?}",
        failed.len(),
        rows.len(),
        env.cp.version()
    );
}
