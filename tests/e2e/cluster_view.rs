//! The view against a real kube-apiserver: with RBAC missing, readiness names the forbidden
//! watches and their 403s and every error is counted — the PDB watch's only as a degraded note
//! where PDBs only shape warnings (the webhook), as unreadiness and a stale cache where the
//! program acts on them (the controller); once the rules exist the view becomes ready
//! without a restart; the controller's API (the pod store and the pod event broadcast) carries
//! trimmed pods from the same single watch, the store updated before the event is sent; where
//! the API server refuses streaming lists (its `WatchList` gate off), the view lists in pages.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use resize_guard_cluster::{ClusterView, ViewConfig, Watched};
use resize_guard_harness::control_plane::{ControlPlane, Identity, Options, WEBHOOK_USER};
use resize_guard_runtime::Events;

async fn eventually<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn from_json<T: k8s_openapi::serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn grant_read_access(admin: &kube::Client) {
    let role: ClusterRole = from_json(serde_json::json!({
        "metadata": {"name": "view-reader"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "nodes", "configmaps"], "verbs": ["list", "watch"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]},
        ],
    }));
    let binding: ClusterRoleBinding = from_json(serde_json::json!({
        "metadata": {"name": "view-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": WEBHOOK_USER}],
    }));
    let pp = PostParams::default();
    Api::<ClusterRole>::all(admin.clone())
        .create(&pp, &role)
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&pp, &binding)
        .await
        .unwrap();
}

/// The Events recorder of the view under test, as `e2e-view`.
fn recorder(client: &kube::Client) -> Events {
    let reporter = Reporter {
        controller: "e2e-view".into(),
        instance: None,
    };
    Events::start(client.clone(), reporter)
}

#[test]
fn readiness_names_forbidden_watches_and_recovers_once_rbac_allows_them() {
    let cp = ControlPlane::start(&Options::default()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = cp.client().await.unwrap();
        let as_webhook = cp.client_as(Identity::Webhook).await.unwrap();
        let errors = Arc::new(AtomicUsize::new(0));
        let pod_errors = Arc::new(AtomicUsize::new(0));
        let events = recorder(&as_webhook);
        let view = ClusterView::start(as_webhook.clone(), {
            let (errors, pod_errors) = (errors.clone(), pod_errors.clone());
            ViewConfig {
                keep_pods: true,
                on_watch_error: Arc::new(move |w| {
                    errors.fetch_add(1, Ordering::Relaxed);
                    if w == Watched::Pods {
                        pod_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }),
                ..ViewConfig::new("resize-guard", "resize-guard", events.clone())
            }
        });
        // The controller's kind of view: it acts on PDBs.
        let acting = ClusterView::start(as_webhook, ViewConfig {
            acts_on_pdbs: true,
            ..ViewConfig::new("resize-guard", "resize-guard", events)
        });

        let why = eventually("a readiness reason naming 403s", Duration::from_secs(20), || {
            view.readiness()
                .err()
                .filter(|w| w.matches("403 Forbidden").count() == 4)
        })
        .await;
        assert!(
            why.starts_with("pods: not listed yet (last error "),
            "{why}"
        );
        for part in [
            "pods: not listed yet (last error ",
            "; nodes: not listed yet (last error ",
            "; configmap: not listed yet (last error ",
            "; configmap-last-good: not listed yet (last error ",
            // Pods and nodes start with a streaming list: a watch request.
            "could not start watching: 403 Forbidden: pods is forbidden: User \"system:serviceaccount:resize-guard:resize-guard-webhook\" cannot watch resource \"pods\"",
        ] {
            assert!(why.contains(part), "{part:?} missing from {why}");
        }
        // PDBs only shape the webhook's warnings: their watch degrades, it does not unready.
        assert!(!why.contains("poddisruptionbudgets"), "{why}");
        let note = eventually("a degraded note naming the PDB watch", Duration::from_secs(20), || {
            view.policy_note().filter(|n| n.contains("poddisruptionbudgets: not listed yet (last error "))
        })
        .await;
        assert!(note.contains("403 Forbidden"), "{note}");
        assert!(note.contains("warnings may miss or misstate PodDisruptionBudgets"), "{note}");
        // The controller acts on them: unready, and the cache is not safe to act on.
        let why = eventually("the acting view's reason naming 5 403s", Duration::from_secs(20), || {
            acting.readiness()
                .err()
                .filter(|w| w.matches("403 Forbidden").count() == 5)
        })
        .await;
        assert!(why.contains("; poddisruptionbudgets: not listed yet (last error "), "{why}");
        assert!(acting.stale_for_acting().is_some());
        assert!(acting.pdb_problem().is_none(), "its PDB problem is unreadiness, not a note");
        assert!(pod_errors.load(Ordering::Relaxed) >= 1);
        assert!(errors.load(Ordering::Relaxed) >= 5);
        assert!(!view.is_ready());

        grant_read_access(&admin).await;
        let since_grant = Instant::now();
        eventually("readiness after RBAC allows the watches", Duration::from_secs(40), || {
            view.readiness().ok()
        })
        .await;
        println!("ready {:?} after the rules were created", since_grant.elapsed());
        assert!(!view.lists_in_pages(), "v1.37 serves streaming lists (WatchList is on by default)");
        assert!(view.watch_health().state(Watched::Pods).unwrap().synced);
        eventually("the PDB watch listed", Duration::from_secs(20), || {
            view.pdb_problem().is_none().then_some(())
        })
        .await;
        eventually("the acting view ready and current", Duration::from_secs(40), || {
            (acting.readiness().is_ok() && acting.stale_for_acting().is_none()).then_some(())
        })
        .await;

        // The controller's side: store and events from the same watch, trimmed.
        let mut events = view.pod_events();
        let store = view.pod_store().expect("keep_pods");
        let ns: Namespace = from_json(serde_json::json!({"metadata": {"name": "e2e-view"}}));
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let pods: Api<Pod> = Api::namespaced(admin.clone(), "e2e-view");
        let pod: Pod = from_json(serde_json::json!({
            "metadata": {"name": "app", "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"big\":true}"}},
            "spec": {"containers": [{"name": "c", "image": "registry.example/app:1",
                "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"cpu": "100m", "memory": "64Mi"}}}]},
        }));
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let key = ObjectRef::new("app").within("e2e-view");
        let got = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let p = events.recv().await.unwrap();
                if p.metadata.name.as_deref() == Some("app") {
                    break p;
                }
            }
        })
        .await
        .expect("the pod's event");
        let stored = store.get(&key).expect("in the store before the event");
        for p in [&*got, &*stored] {
            assert!(p.metadata.managed_fields.is_none());
            assert!(p.metadata.annotations.is_none(), "last-applied dropped");
            let c = &p.spec.as_ref().unwrap().containers[0];
            assert!(c.image.is_none() && c.env.is_none());
            assert!(c.resources.is_some());
        }
        pods.patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"app": "api"}}})),
        )
        .await
        .unwrap();
        let relabelled = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let p = events.recv().await.unwrap();
                if p.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str)
                    == Some("api")
                {
                    break p;
                }
            }
        })
        .await
        .expect("the relabelled pod's event");
        let stored = store.get(&key).unwrap();
        assert_eq!(stored.metadata.resource_version, relabelled.metadata.resource_version);
    });
}

#[test]
fn the_view_lists_in_pages_where_the_api_server_refuses_streaming_lists() {
    let cp = ControlPlane::start(&Options {
        feature_gates: vec!["WatchList=false".into()],
        ..Options::default()
    })
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = cp.client().await.unwrap();
        let ns: Namespace = from_json(serde_json::json!({"metadata": {"name": "e2e-paged"}}));
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let pod: Pod = from_json(serde_json::json!({
            "metadata": {"name": "listed"},
            "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]},
        }));
        Api::<Pod>::namespaced(admin.clone(), "e2e-paged")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        let errors = Arc::new(AtomicUsize::new(0));
        let events = recorder(&admin);
        let view = ClusterView::start(admin.clone(), {
            let errors = errors.clone();
            ViewConfig {
                keep_pods: true,
                on_watch_error: Arc::new(move |_| {
                    errors.fetch_add(1, Ordering::Relaxed);
                }),
                ..ViewConfig::new("resize-guard", "resize-guard", events)
            }
        });
        eventually(
            "readiness with paged lists",
            Duration::from_secs(30),
            || view.readiness().ok(),
        )
        .await;
        assert!(
            view.lists_in_pages(),
            "the refusal was seen and the view fell back"
        );
        let store = view.pod_store().expect("keep_pods");
        assert!(
            store
                .get(&ObjectRef::new("listed").within("e2e-paged"))
                .is_some(),
            "the pod created before the view started was listed"
        );
        assert_eq!(
            errors.load(Ordering::Relaxed),
            0,
            "a refused streaming list is an answer, not a watch error"
        );
    });
}
