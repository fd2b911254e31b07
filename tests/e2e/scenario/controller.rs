//! Shared setup of the controller's end-to-end suites: the real `resize-guard-controller`
//! binary, running as the resize-guard ServiceAccount, against the harness's kube-apiserver with
//! hollow nodes (upstream's v1.37.2 kubelet, `resize_guard_harness::hollow_node`).
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use resize_guard_harness::control_plane::Identity;
use resize_guard_harness::env::Env;
use resize_guard_harness::install::{apply_rbac, spawn_as_service_account, wait_ready};
use resize_guard_harness::process::{Process, free_port};

/// A running controller replica.
pub struct Controller {
    pub process: Process,
    pub health_port: u16,
    pub identity: String,
}

/// Starts a replica named `identity` (short lease for fast failover tests) and waits until it
/// is ready.
pub async fn start(env: &Env, identity: &str) -> Controller {
    apply_rbac(env).await;
    let c = start_unready(env, identity).await;
    wait_ready(c.health_port, &c.process, Duration::from_secs(30)).await;
    c
}

/// Starts a replica named `identity` as installed so far (nothing re-applied) without waiting
/// for it to be ready (with no policy in force it never is).
pub async fn start_unready(env: &Env, identity: &str) -> Controller {
    start_unready_with(env, identity, &[])
}

/// [`start_unready`] with `extra` flags.
pub fn start_unready_with(env: &Env, identity: &str, extra: &[String]) -> Controller {
    let health_port = free_port().unwrap();
    let mut args = vec![
        format!("--health-addr=127.0.0.1:{health_port}"),
        "--namespace=resize-guard".into(),
        format!("--identity={identity}"),
        "--lease-duration=4s".into(),
        "--renew-interval=1s".into(),
    ];
    args.extend_from_slice(extra);
    let process = spawn_as_service_account(
        env,
        Identity::Controller,
        &crate::scenario::program("resize-guard-controller"),
        &format!("controller-{identity}"),
        &args,
    );
    Controller {
        process,
        health_port,
        identity: identity.to_owned(),
    }
}

/// The controller `cell` holds for this suite's process, started once as `identity`, once it leads
/// (or after 10 s, when the tests will show why not).
pub async fn leading(
    cell: &'static tokio::sync::OnceCell<Controller>,
    env: &'static Env,
    identity: &str,
) -> &'static Controller {
    let controller = cell.get_or_init(|| start(env, identity)).await;
    for _ in 0..100 {
        if controller.is_leader().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    controller
}

/// A PodDisruptionBudget the Eviction API and a cache disagree on: `name` in `ns` over the pods
/// labelled `key: value`, counted by kube-controller-manager's disruption controller with
/// `minAvailable: 0` and `healthy` pods, then raised to `min_available` with no disruption
/// controller left to count it again: its status still allows evictions the API refuses.
/// Returns the budgets' API in `ns`, and the budget as counted and as changed.
pub async fn stale_budget(
    env: &Env,
    ns: &str,
    name: &str,
    (key, value): (&str, &str),
    healthy: i32,
    min_available: i32,
) -> (
    Api<PodDisruptionBudget>,
    PodDisruptionBudget,
    PodDisruptionBudget,
) {
    env.cp.start_controller_manager().unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client().await, ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"minAvailable": 0, "selector": {"matchLabels": {key: value}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let counted = resize_guard_harness::objects::wait_pdb_counted(
        &pdbs,
        name,
        healthy,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    env.cp.stop_controller_manager();
    let patch = serde_json::json!({"spec": {"minAvailable": min_available}});
    let changed = pdbs
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    (pdbs, counted, changed)
}

/// Resizes container `app` of pod `name` to `cpu` and waits until the kubelet has held it
/// pending. Watched, not polled: a running controller may make room and the kubelet admit the
/// resize within a poll interval.
pub async fn resize_pending_on(env: &Env, pods: &Api<Pod>, ns: &str, name: &str, cpu: &str) {
    let history = History::start(pods, name).await;
    let out = env
        .kubectl()
        .resize(ns, name, &resize_guard_harness::objects::cpu_resize(cpu))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    history
        .wait(Duration::from_secs(30), |p| {
            resize_guard_harness::objects::resize_pending(p).is_some()
        })
        .await;
}

impl Controller {
    /// Waits until this replica leads (another test's replica may hold the Lease until it
    /// expires).
    pub async fn wait_leading(&self) {
        if self.leads_within(400).await {
            return;
        }
        panic!(
            "{} never led:\n{}",
            self.identity,
            self.process.log_tail(4000)
        );
    }

    /// Polls [`Self::is_leader`] every 50 ms, at most `polls` times: true as soon as it leads.
    pub async fn leads_within(&self, polls: u32) -> bool {
        for _ in 0..polls {
            if self.is_leader().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// `resize_guard_leader` from /metrics.
    pub async fn is_leader(&self) -> bool {
        resize_guard_harness::install::http_get(self.health_port, "/metrics")
            .await
            .is_ok_and(|m| m.lines().any(|l| l.trim() == "resize_guard_leader 1"))
    }

    /// Waits until this replica's latest `policy loaded` log line satisfies `loaded` (the
    /// effective policy is logged as YAML after it).
    pub async fn wait_policy(&self, loaded: impl Fn(&str) -> bool) {
        resize_guard_harness::install::wait_policy(&self.process, loaded).await;
    }
}

/// Events in `ns` with `reason`, as (object name, note, reporting instance).
pub async fn events(env: &Env, ns: &str, reason: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(env.client().await, ns);
    let mut out = Vec::new();
    if let Ok(list) = api.list(&ListParams::default()).await {
        for e in list.items {
            if e.reason.as_deref() == Some(reason) {
                out.push((
                    e.involved_object.name.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    e.reporting_instance.unwrap_or_default(),
                ));
            }
        }
    }
    out
}

/// Waits until an Event with `reason` exists in `ns`.
pub async fn wait_event(env: &Env, ns: &str, reason: &str) -> Vec<(String, String, String)> {
    for _ in 0..300 {
        let e = events(env, ns, reason).await;
        if !e.is_empty() {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {reason} event in {ns}");
}

/// Waits until an Event with `reason` about the object `name` exists in `ns`; returns every Event
/// with `reason` in `ns`.
pub async fn wait_event_for(
    env: &Env,
    ns: &str,
    reason: &str,
    name: &str,
) -> Vec<(String, String, String)> {
    for _ in 0..300 {
        let e = events(env, ns, reason).await;
        if e.iter().any(|e| e.0 == name) {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {reason} event for {name} in {ns}");
}

/// A positive marker that the controller has had its chance to act on node `node` after the
/// state under test settled: a `low` pod `marker` (10m) is added and resized to `cpu` — more than
/// the node has free, so the kubelet defers it — and no pod on the node has a lower priority, so
/// the controller must answer with `ResizePreemptionFailed` on it. Any victim the controller would
/// have taken for the earlier state is taken by then; assert absences after this.
pub async fn controller_caught_up(env: &Env, pods: &Api<Pod>, ns: &str, node: &str, cpu: &str) {
    let marker =
        resize_guard_harness::objects::guaranteed_pod("marker", node, "low", "10m", "16Mi");
    resize_guard_harness::objects::create_running(pods, &marker)
        .await
        .unwrap();
    resize_pending_on(env, pods, ns, "marker", cpu).await;
    let failed = wait_event_for(env, ns, "ResizePreemptionFailed", "marker").await;
    assert!(
        failed
            .iter()
            .any(|e| e.0 == "marker" && e.1.contains("no pod on node")),
        "{failed:?}"
    );
}

/// Names of pods in `ns` that are terminating or gone, out of `names`.
pub async fn preempted(pods: &Api<Pod>, names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for n in names {
        match pods.get_opt(n).await.unwrap() {
            Some(p) if p.metadata.deletion_timestamp.is_none() => {}
            _ => out.push((*n).to_owned()),
        }
    }
    out
}

/// Polls until [`preempted`] over `names` is exactly `want` (in `names` order).
pub async fn wait_preempted(pods: &Api<Pod>, names: &[&str], want: &[&str], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let got = preempted(pods, names).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "preempted {got:?}, want {want:?} after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until pod `app` has `cpu` allocated and no plan annotation left: the controller saw its
/// resize through.
pub async fn wait_app_done(pods: &Api<Pod>, cpu: &str, timeout: Duration) -> Pod {
    resize_guard_harness::objects::wait_pod(pods, "app", timeout, |p| {
        resize_guard_harness::objects::allocated_cpu(p).as_deref() == Some(cpu) && !has_plan(p)
    })
    .await
    .unwrap()
}

/// True while the pod carries the controller's plan annotation.
pub fn has_plan(p: &Pod) -> bool {
    p.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("resize-guard.io/preemption"))
}

/// Every version of one pod a watch delivered, so a state that lasts only a moment (a victim
/// terminating for a fraction of a second with the real kubelet and a fake runtime) is not missed
/// by polling. Start it before the action.
pub struct History {
    seen: Arc<Mutex<Vec<Pod>>>,
    task: tokio::task::JoinHandle<()>,
}

impl History {
    /// Starts watching pod `name` through `pods`; returns once the watch has listed.
    pub async fn start(pods: &Api<Pod>, name: &str) -> History {
        let seen: Arc<Mutex<Vec<Pod>>> = Arc::default();
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut stream = watcher(pods.clone(), config).boxed();
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed_tx);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                        sink.lock().unwrap().push(p);
                    }
                    Ok(watcher::Event::Delete(p)) => sink.lock().unwrap().push(p),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Init) | Err(_) => {}
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), listed_rx)
            .await
            .expect("the pod watch listed")
            .expect("the pod watch runs");
        History { seen, task }
    }

    /// Every version seen so far, oldest first.
    pub fn all(&self) -> Vec<Pod> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until some version seen so far satisfies `pred`; returns it.
    pub async fn wait(&self, timeout: Duration, pred: impl Fn(&Pod) -> bool) -> Pod {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(p) = self.seen.lock().unwrap().iter().find(|p| pred(p)) {
                return p.clone();
            }
            if Instant::now() > deadline {
                let last = self.seen.lock().unwrap().last().cloned();
                panic!(
                    "no version of the pod matched after {timeout:?}; last seen: {}",
                    last.and_then(|p| serde_json::to_string_pretty(&p).ok())
                        .unwrap_or_else(|| "(none)".into())
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The plan-sealing key a controller keeps (created here, as the first leader would, when no
/// controller has run yet; resize-guard is installed first, whichever test runs first).
pub async fn plan_key(env: &Env) -> resize_guard_controller::preemption::seal::PlanKey {
    use k8s_openapi::api::core::v1::Secret;
    use resize_guard_controller::preemption::seal::{PLAN_KEY_FIELD, PLAN_KEY_SECRET, PlanKey};
    apply_rbac(env).await;
    let api: Api<Secret> = Api::namespaced(env.client().await, "resize-guard");
    if api.get_opt(PLAN_KEY_SECRET).await.unwrap().is_none() {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": PLAN_KEY_SECRET},
            "data": {PLAN_KEY_FIELD: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="},
        }))
        .unwrap();
        let _ = api.create(&kube::api::PostParams::default(), &secret).await;
    }
    let secret = api.get(PLAN_KEY_SECRET).await.unwrap();
    PlanKey::new(&secret.data.unwrap()[PLAN_KEY_FIELD].0).unwrap()
}

/// Resizes each of `names` to `cpu` through pods/resize, all at once.
pub async fn resize_all(pods: &Api<Pod>, names: &[String], cpu: &str) {
    let resize = serde_json::json!({"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}});
    let answers = futures::future::join_all(names.iter().map(|name| {
        let (pods, resize) = (pods.clone(), resize.clone());
        async move { resize_guard_harness::objects::patch_resize(&pods, name, &resize).await }
    }))
    .await;
    for a in answers {
        a.unwrap();
    }
}
