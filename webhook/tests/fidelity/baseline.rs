//! Phase 1, before resize-guard is installed: RuntimeClasses with overhead, nodes (a v1.37.2
//! kubelet's declared features, or none), every pod created and started by the simulated
//! kubelet, and upstream's answer to every resize on dry run (`dryRun=All`). For resizes upstream
//! refuses for the QoS rule alone, also the class upstream computes for the resized pod: the
//! patch applied by upstream's own strategic-merge code (`kubectl patch --local`) and the result
//! created on dry run, whose `status.qosClass` is `ComputePodQOS` after the same pod-level
//! defaulting the resize strategy runs.

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, PostParams};
use resize_guard_harness::env::Env;
use resize_guard_harness::kubelet::NodeConfig;
use resize_guard_harness::objects::wait_pod;
use serde_json::{Value, json};

use super::answer::{self, Answer, Upstream};
use super::{cases, quantities, rng, scenarios};

/// Pods per generated node (each needs at most ~13 cpu of the node's 128).
const PODS_PER_NODE: usize = 8;

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
    /// The generated cases kube-apiserver stored and the simulated kubelet started.
    pub cases: Vec<Probe>,
    /// Generated pods that were not created or not started, with why.
    pub not_created: Vec<String>,
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
    let named = record_named(env).await;
    let seed = seed();
    println!(
        "fidelity: seed {seed}, {} cases (RESIZE_GUARD_FIDELITY_SEED / RESIZE_GUARD_FIDELITY_CASES)",
        case_count()
    );
    let (cases, not_created) = record_generated(env, seed, case_count()).await;
    Baseline {
        seed,
        named,
        cases,
        not_created,
        elapsed: started.elapsed(),
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

async fn add_node(env: &Env, prefix: &str, cpu: &str, memory: &str, features: bool) -> String {
    let mut cfg = NodeConfig::new(&env.unique(prefix), cpu, memory);
    if !features {
        cfg.declared_features = Some(Vec::new());
    }
    let name = cfg.name.clone();
    env.add_node(cfg).await;
    name
}

/// Creates a pod and waits until the simulated kubelet started it: the stored pod, or why not.
async fn create_started(api: &Api<Pod>, pod: &Value) -> Result<Pod, String> {
    let pod: Pod = serde_json::from_value(pod.clone()).map_err(|e| e.to_string())?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    api.create(&PostParams::default(), &pod)
        .await
        .map_err(|e| format!("create: {e}"))?;
    let p = wait_pod(api, &name, Duration::from_secs(60), |p| {
        matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running" | "Failed")
        )
    })
    .await
    .map_err(|e| e.to_string())?;
    match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Running") => Ok(p),
        _ => Err(format!(
            "not started: {}",
            p.status
                .as_ref()
                .and_then(|s| s.message.clone())
                .unwrap_or_default()
        )),
    }
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

async fn record_named(env: &'static Env) -> Vec<Probe> {
    let ns = env.namespace("fidelity-named").await;
    let api: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let (cpu, memory) = scenarios::NODE;
    let default = add_node(env, "fid-named", cpu, memory, true).await;
    let old = add_node(env, "fid-named-old", cpu, memory, false).await;
    let mut out = Vec::new();
    for s in scenarios::all() {
        let mut spec = s.spec.clone();
        spec["nodeName"] = json!(match s.node {
            scenarios::NodeKind::Default => &default,
            scenarios::NodeKind::NoFeatures => &old,
        });
        spec["terminationGracePeriodSeconds"] = json!(0);
        let pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": s.key}, "spec": spec});
        let stored = match create_started(&api, &pod).await {
            Ok(p) => p,
            Err(e) => panic!("scenario {}: {e}", s.key),
        };
        out.push(probe(env, &api, s.key.to_owned(), stored, s.patch.clone()).await);
    }
    out
}

async fn record_generated(env: &'static Env, seed: u64, count: usize) -> (Vec<Probe>, Vec<String>) {
    let ns = env.namespace("fidelity-gen").await;
    let api: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let generated: Vec<cases::Case> = (0..count).map(|i| cases::generate(seed, i)).collect();
    // Bind each case to a node of its kind, PODS_PER_NODE to a node.
    let mut nodes: [(Vec<String>, usize); 2] = [(Vec::new(), 0), (Vec::new(), 0)];
    let mut pods = Vec::new();
    for case in &generated {
        let (names, used) = &mut nodes[usize::from(case.shape.old_node)];
        if *used % PODS_PER_NODE == 0 {
            let prefix = if case.shape.old_node {
                "fid-gen-old"
            } else {
                "fid-gen"
            };
            names.push(
                add_node(
                    env,
                    prefix,
                    quantities::NODE_CPU,
                    quantities::NODE_MEMORY,
                    !case.shape.old_node,
                )
                .await,
            );
        }
        *used += 1;
        let node = names.last().cloned().unwrap_or_default();
        pods.push((case, case.shape.pod(&format!("c{}", case.index), &node)));
    }
    let created: Vec<(usize, Result<Pod, String>)> = stream::iter(pods)
        .map(|(case, pod)| {
            let api = api.clone();
            async move { (case.index, create_started(&api, &pod).await) }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut not_created = Vec::new();
    let mut stored = Vec::new();
    for (index, result) in created {
        match result {
            Ok(p) => stored.push((index, p)),
            Err(e) => not_created.push(format!("case #{index}: {e}")),
        }
    }
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
