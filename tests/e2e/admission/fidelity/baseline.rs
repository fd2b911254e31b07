//! Phase 1, before resize-guard is installed: RuntimeClasses with overhead, hollow nodes
//! (upstream's v1.37.2 kubelet, with default feature gates or with
//! `InPlacePodLevelResourcesVerticalScaling` off), every pod created and started by its node's
//! kubelet, and upstream's answer to every resize on dry run (`dryRun=All`). For resizes upstream
//! refuses for the QoS rule alone, also the class upstream computes for the resized pod: the
//! patch applied by upstream's own strategic-merge code (`kubectl patch --local`) and the result
//! created on dry run, whose `status.qosClass` is `ComputePodQOS` after the same pod-level
//! defaulting the resize strategy runs.
//!
//! A pod with a plain init container never reaches `Running` on a hollow node: the fake CRI
//! (`k8s.io/cri-client/pkg/fake` over cri-api's `FakeRuntimeService`, whose `StartContainer`
//! sets `CONTAINER_RUNNING` and which never ends a container) runs the init container for ever,
//! so such a pod counts as started once the kubelet has admitted it and runs that init
//! container (phase `Pending`). Nothing kube-apiserver checks on `pods/resize` depends on the
//! phase (`ValidatePodResize` only asks that running containers report `resources`).

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use resize_guard_harness::env::Env;
use resize_guard_harness::hollow_node::HollowNodeConfig;
use serde_json::{Value, json};

use super::answer::{self, Answer, Upstream};
use super::quantities::R;
use super::{cases, quantities, rng, scenarios};

/// At most this many generated pods per node (the kubelet's `maxPods` is 110).
const MAX_PODS_PER_NODE: usize = 100;

/// The kubelet feature gate the gate-off nodes turn off (beta in v1.37, so it can be).
pub const POD_LEVEL_RESIZE_OFF: &str = "InPlacePodLevelResourcesVerticalScaling=false";

/// How long all pods of one batch may take to be started by their kubelets.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// One pod and its resize, with upstream's answer.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Scenario key or `case #N`.
    pub label: String,
    /// Namespace.
    pub ns: String,
    /// Pod name.
    pub name: String,
    /// The stored pod, trimmed to what matters (for reports).
    pub pod: Value,
    /// The resize.
    pub patch: Value,
    /// Upstream's answer (no webhook).
    pub upstream: Answer,
    /// For QoS-only refusals: the class upstream computes for the resized pod.
    pub qos_to: Option<Result<String, String>>,
}

/// Everything phase 1 recorded.
#[derive(Debug)]
pub struct Baseline {
    /// Seed of the generated cases.
    pub seed: u64,
    /// The named scenarios.
    pub named: Vec<Probe>,
    /// The generated cases kube-apiserver stored and the kubelet started.
    pub cases: Vec<Probe>,
    /// Generated pods that were not created or not started, with why.
    pub not_created: Vec<String>,
    /// How many hollow nodes phase 1 started.
    pub nodes: usize,
    /// How long phase 1 took.
    pub elapsed: Duration,
}

impl Baseline {
    /// A named scenario's probe.
    pub fn named(&self, key: &str) -> &Probe {
        match self.named.iter().find(|p| p.label == key) {
            Some(p) => p,
            None => panic!("no scenario {key}"),
        }
    }
}

/// The number of generated cases (`RESIZE_GUARD_FIDELITY_CASES`, default 300).
pub fn case_count() -> usize {
    std::env::var("RESIZE_GUARD_FIDELITY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// The run's seed (`RESIZE_GUARD_FIDELITY_SEED`, default from the clock).
pub fn seed() -> u64 {
    std::env::var("RESIZE_GUARD_FIDELITY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rng::fresh_seed)
}

/// Runs phase 1. Must finish before any resize-guard webhook is registered.
pub async fn record(env: &'static Env) -> Baseline {
    let started = Instant::now();
    let client = env.client().await;
    runtime_classes(&client).await;
    let seed = seed();
    let count = case_count();
    println!(
        "fidelity: seed {seed}, {count} cases (RESIZE_GUARD_FIDELITY_SEED / RESIZE_GUARD_FIDELITY_CASES)"
    );
    let generated: Vec<cases::Case> = (0..count).map(|i| cases::generate(seed, i)).collect();
    let (plan, placement) = place(&generated);

    // Every node at once: the named scenarios' two, then the generated cases'.
    let (cpu, memory) = scenarios::NODE;
    let mut configs = vec![
        node_config(env, "fid-named", cpu, memory, false),
        node_config(env, "fid-named-plr-off", cpu, memory, true),
    ];
    for &gate_off in &plan {
        let prefix = if gate_off {
            "fid-gen-plr-off"
        } else {
            "fid-gen"
        };
        configs.push(node_config(
            env,
            prefix,
            quantities::NODE_CPU,
            quantities::NODE_MEMORY,
            gate_off,
        ));
    }
    let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
    futures::future::join_all(configs.into_iter().map(|c| env.add_node(c))).await;
    let nodes_started = started.elapsed();

    let named = record_named(env, &names[0], &names[1]).await;
    let named_done = started.elapsed();
    let case_nodes: Vec<&str> = placement.iter().map(|&n| names[2 + n].as_str()).collect();
    let (cases, not_created) = record_generated(env, &generated, &case_nodes).await;
    println!(
        "fidelity: phase 1: {} hollow nodes Ready at {:.1}s, named scenarios recorded at {:.1}s, generated cases at {:.1}s",
        names.len(),
        nodes_started.as_secs_f64(),
        named_done.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    Baseline {
        seed,
        named,
        cases,
        not_created,
        nodes: names.len(),
        elapsed: started.elapsed(),
    }
}

/// Next-fit placement of the generated cases, each on a node of its kind: (one entry per node,
/// true for a gate-off node; the node index of each case). A pod goes to the last node of its
/// kind unless the sum of [`cases::Shape::max_requests`] would pass the node's allocatable or
/// [`MAX_PODS_PER_NODE`] would be passed, so the kubelet admits every pod.
fn place(generated: &[cases::Case]) -> (Vec<bool>, Vec<usize>) {
    let allocatable = R::BOTH.map(R::allocatable);
    let mut plan: Vec<bool> = Vec::new();
    // Per kind: (node index, pods, [cpu, memory] used).
    let mut current: [Option<(usize, usize, [u128; 2])>; 2] = [None, None];
    let mut placement = Vec::with_capacity(generated.len());
    for case in generated {
        let need = case.shape.max_requests();
        let slot = &mut current[usize::from(case.shape.old_node)];
        let fits = slot.is_some_and(|(_, pods, used)| {
            pods < MAX_PODS_PER_NODE && (0..2).all(|i| used[i] + need[i] <= allocatable[i])
        });
        if !fits {
            plan.push(case.shape.old_node);
            *slot = Some((plan.len() - 1, 0, [0, 0]));
        }
        if let Some((node, pods, used)) = slot {
            *pods += 1;
            used[0] += need[0];
            used[1] += need[1];
            placement.push(*node);
        }
    }
    (plan, placement)
}

/// A hollow node whose allocatable is `cpu`/`memory`; `pod_level_resize_off` turns the kubelet's
/// `InPlacePodLevelResourcesVerticalScaling` gate off, so the node does not declare it.
fn node_config(
    env: &Env,
    prefix: &str,
    cpu: &str,
    memory: &str,
    pod_level_resize_off: bool,
) -> HollowNodeConfig {
    let cfg = match HollowNodeConfig::with_allocatable(&env.unique(prefix), cpu, memory) {
        Ok(c) => c,
        Err(e) => panic!("node {prefix}: {e:#}"),
    };
    // The kubelet gate exists from v1.35 (alpha, off); older kubelets cannot resize pod-level
    // resources at all.
    if pod_level_resize_off && env.cp.minor() >= 35 {
        cfg.feature_gate(POD_LEVEL_RESIZE_OFF)
    } else {
        cfg
    }
}

async fn runtime_classes(client: &kube::Client) {
    let api: Api<RuntimeClass> = Api::all(client.clone());
    for (name, cpu, memory) in cases::RUNTIME_CLASSES {
        let mut fixed = json!({"cpu": cpu});
        if !memory.is_empty() {
            fixed["memory"] = json!(memory);
        }
        let rc: RuntimeClass = serde_json::from_value(json!({
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": name}, "handler": "runc", "overhead": {"podFixed": fixed},
        }))
        .unwrap();
        match api.create(&PostParams::default(), &rc).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("RuntimeClass {name}: {e}"),
        }
    }
}

/// Started by its kubelet: `Some(Ok)` once `Running` (or `Pending` with a plain init
/// container running, see the module docs), `Some(Err)` once `Failed` (not admitted), `None`
/// while neither.
fn started(p: &Pod) -> Option<Result<(), String>> {
    let status = p.status.as_ref()?;
    match status.phase.as_deref() {
        Some("Running") => Some(Ok(())),
        Some("Failed") => Some(Err(format!(
            "not started: {}: {}",
            status.reason.as_deref().unwrap_or_default(),
            status.message.as_deref().unwrap_or_default()
        ))),
        Some("Pending") => {
            let plain_inits: Vec<&str> = p
                .spec
                .as_ref()?
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() != Some("Always"))
                .map(|c| c.name.as_str())
                .collect();
            let running = status.init_container_statuses.iter().flatten().any(|c| {
                plain_inits.contains(&c.name.as_str())
                    && c.state.as_ref().is_some_and(|s| s.running.is_some())
            });
            running.then_some(Ok(()))
        }
        _ => None,
    }
}

/// Creates the pods (name, object), then waits until the kubelets started them all: each
/// stored pod, or why not.
async fn create_started(
    api: &Api<Pod>,
    pods: Vec<(String, Value)>,
) -> Vec<(String, Result<Pod, String>)> {
    let created: Vec<(String, Result<(), String>)> = stream::iter(pods)
        .map(|(name, pod)| {
            let api = api.clone();
            async move {
                let result = async {
                    let pod: Pod = serde_json::from_value(pod).map_err(|e| e.to_string())?;
                    api.create(&PostParams::default(), &pod)
                        .await
                        .map_err(|e| format!("create: {e}"))?;
                    Ok(())
                }
                .await;
                (name, result)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut out = Vec::with_capacity(created.len());
    let mut waiting = std::collections::BTreeSet::new();
    for (name, result) in created {
        match result {
            Ok(()) => {
                waiting.insert(name);
            }
            Err(e) => out.push((name, Err(e))),
        }
    }
    // A watch rather than polling: phase 1 shares two cores with the control plane and the
    // kubelets, and a LIST of hundreds of pods a few times a second shows.
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    let mut last: std::collections::BTreeMap<String, Pod> = Default::default();
    let mut pods = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while !waiting.is_empty() {
        let p = match tokio::time::timeout_at(deadline, pods.next()).await {
            Ok(Some(Ok(p))) => p,
            Ok(Some(Err(e))) => {
                eprintln!("watch pods: {e}; retrying");
                continue;
            }
            Ok(None) | Err(_) => break,
        };
        let name = p.metadata.name.clone().unwrap_or_default();
        if !waiting.contains(&name) {
            continue;
        }
        match started(&p) {
            Some(result) => {
                waiting.remove(&name);
                last.remove(&name);
                out.push((name, result.map(|()| p)));
            }
            None => {
                last.insert(name, p);
            }
        }
    }
    for name in waiting {
        let status = last
            .get(&name)
            .and_then(|p| serde_json::to_string(&p.status).ok())
            .unwrap_or_else(|| "(never seen)".into());
        out.push((
            name,
            Err(format!(
                "not started after {START_TIMEOUT:?}; last status: {status}"
            )),
        ));
    }
    out
}

/// The parts of a stored pod a disagreement report needs.
fn trimmed(p: &Pod) -> Value {
    let v = serde_json::to_value(p).unwrap_or_default();
    let ctrs = |key: &str| -> Value {
        v["spec"][key]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        let mut t = json!({"name": c["name"], "resources": c["resources"]});
                        if !c["restartPolicy"].is_null() {
                            t["restartPolicy"] = c["restartPolicy"].clone();
                        }
                        t
                    })
                    .collect()
            })
            .unwrap_or(Value::Null)
    };
    let mut spec = json!({"nodeName": v["spec"]["nodeName"], "containers": ctrs("containers")});
    for key in ["resources", "overhead", "runtimeClassName"] {
        if !v["spec"][key].is_null() {
            spec[key] = v["spec"][key].clone();
        }
    }
    if !v["spec"]["initContainers"].is_null() {
        spec["initContainers"] = ctrs("initContainers");
    }
    json!({"spec": spec, "status": {"qosClass": v["status"]["qosClass"]}})
}

/// Upstream's answer to the resize, and for a QoS-only refusal the class after it.
async fn probe(env: &Env, api: &Api<Pod>, label: String, stored: Pod, patch: Value) -> Probe {
    let name = stored.metadata.name.clone().unwrap_or_default();
    let upstream = answer::resize(api, &name, &patch, true).await;
    let qos_to = match answer::upstream(&upstream) {
        Upstream::QosOnly { .. } => Some(qos_after(env, api, &stored, &patch).await),
        _ => None,
    };
    Probe {
        label,
        ns: stored.metadata.namespace.clone().unwrap_or_default(),
        name,
        pod: trimmed(&stored),
        patch,
        upstream,
        qos_to,
    }
}

/// The QoS class upstream gives the pod as the resize would leave it.
async fn qos_after(
    env: &Env,
    api: &Api<Pod>,
    stored: &Pod,
    patch: &Value,
) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("pod.json");
    std::fs::write(
        &file,
        serde_json::to_vec(stored).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let file = file.display().to_string();
    let patch = patch.to_string();
    let out = env
        .kubectl()
        .run([
            "patch",
            "-f",
            &file,
            "--local",
            "--type",
            "strategic",
            "-p",
            &patch,
            "-o",
            "json",
        ])
        .await
        .map_err(|e| e.to_string())?;
    if !out.success {
        return Err(format!("kubectl patch --local: {}", out.stderr));
    }
    let merged: Value = serde_json::from_str(&out.stdout).map_err(|e| e.to_string())?;
    let mut spec = merged["spec"].clone();
    for key in ["nodeName", "priority", "preemptionPolicy", "overhead"] {
        if let Some(m) = spec.as_object_mut() {
            m.remove(key);
        }
    }
    // Through v1.35 the resize keeps the stored pod-level resources (`dropNonResizeUpdates`:
    // no pod-level resize before v1.36), so the resized pod has those, not the patch's.
    if env.cp.minor() <= 35
        && let Some(m) = spec.as_object_mut()
    {
        match stored.spec.as_ref().and_then(|s| s.resources.as_ref()) {
            Some(r) => {
                m.insert(
                    "resources".into(),
                    serde_json::to_value(r).map_err(|e| e.to_string())?,
                );
            }
            None => {
                m.remove("resources");
            }
        }
    }
    let name = format!("{}-after", stored.metadata.name.as_deref().unwrap_or("pod"));
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec,
    }))
    .map_err(|e| e.to_string())?;
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let created = api
        .create(&params, &pod)
        .await
        .map_err(|e| format!("dry-run create of the resized pod: {e}"))?;
    created
        .status
        .and_then(|s| s.qos_class)
        .ok_or_else(|| "no qosClass on the resized pod".to_owned())
}

async fn record_named(env: &'static Env, default: &str, plr_off: &str) -> Vec<Probe> {
    let ns = env.namespace("fidelity-named").await;
    let api: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let scenarios = scenarios::all();
    let pods = scenarios
        .iter()
        .map(|s| {
            let mut spec = s.spec.clone();
            spec["nodeName"] = json!(match s.node {
                scenarios::NodeKind::Default => default,
                scenarios::NodeKind::NoPodLevelResize => plr_off,
            });
            spec["terminationGracePeriodSeconds"] = json!(0);
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": s.key}, "spec": spec});
            (s.key.to_owned(), pod)
        })
        .collect();
    let mut stored: std::collections::BTreeMap<String, Pod> = Default::default();
    for (key, result) in create_started(&api, pods).await {
        match result {
            Ok(p) => {
                stored.insert(key, p);
            }
            Err(e) => panic!("scenario {key}: {e}"),
        }
    }
    let mut out = Vec::new();
    for s in scenarios {
        let pod = stored.remove(s.key).unwrap_or_default();
        out.push(probe(env, &api, s.key.to_owned(), pod, s.patch.clone()).await);
    }
    out
}

async fn record_generated(
    env: &'static Env,
    generated: &[cases::Case],
    nodes: &[&str],
) -> (Vec<Probe>, Vec<String>) {
    let ns = env.namespace("fidelity-gen").await;
    let api: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let pods = generated
        .iter()
        .zip(nodes)
        .map(|(case, node)| {
            let name = format!("c{}", case.index);
            let pod = case.shape.pod(&name, node);
            (name, pod)
        })
        .collect();
    let mut not_created = Vec::new();
    let mut stored = Vec::new();
    for (name, result) in create_started(&api, pods).await {
        let index: usize = name[1..].parse().unwrap_or(usize::MAX);
        match result {
            Ok(p) => stored.push((index, p)),
            Err(e) => not_created.push(format!("case #{index}: {e}")),
        }
    }
    not_created.sort();
    let mut probes: Vec<Probe> = stream::iter(stored)
        .map(|(index, pod)| {
            let api = api.clone();
            let patch = generated[index].patch.clone();
            async move { probe(env, &api, format!("case #{index}"), pod, patch).await }
        })
        .buffer_unordered(4)
        .collect()
        .await;
    probes.sort_by_key(|p| p.name[1..].parse::<usize>().unwrap_or(usize::MAX));
    (probes, not_created)
}
