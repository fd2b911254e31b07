//! The realistic pod set of the memory and scale benchmarks (`resize-guard-rss`,
//! `resize-guard-scale`): namespaces, Node objects and pods, each pod shaped like a Deployment's
//! pod as a real cluster stores it — two containers with ten env vars, probes, ports and security
//! contexts, three volumes and their mounts, owner reference, labels, a ~3.5 KB
//! `kubectl.kubernetes.io/last-applied-configuration` annotation, `spec.nodeName` and
//! managedFields from two server-side-apply managers ([`template`]).
//!
//! Pod `i` is a replica of Deployment `i / REPLICAS` in namespace `i % namespaces`, on node
//! `i % nodes`; every name follows from the index, so a benchmark can create pods in steps
//! ([`create_pods`] on a range) and address any of them later ([`pod_key`]).
//!
//! With [`Layout::running`] the objects also carry what a kubelet would write ([`status`]): Nodes
//! are created with their status (a kubelet registers its node that way), and each pod's status
//! is written through the `status` subresource after it is created (phase `Running`, conditions,
//! IPs, container statuses with `allocatedResources`). That is benchmark data on Node objects no
//! kubelet runs behind — the end-to-end tests never write kubelet-owned status and run hollow
//! nodes instead — so a benchmark can hold tens of thousands of running pods on a thousand nodes.
//! Without it no status is written beyond what kube-apiserver sets (the pods stay Pending).

pub mod status;
pub mod template;

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Pods per Deployment (consecutive pods share an app name, labels and the last-applied copy).
pub const REPLICAS: usize = 6;

/// The field manager the pods' status is written with (the kubelet's).
pub const STATUS_MANAGER: &str = "kubelet";

/// How the generated objects are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Namespaces the pods are spread over.
    pub namespaces: usize,
    /// Nodes the pods are spread over.
    pub nodes: usize,
    /// Nodes carry their status and every pod gets a `Running` status (see the module
    /// documentation).
    pub running: bool,
}

impl Layout {
    /// Checks that the layout can hold pods.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.namespaces > 0 && self.nodes > 0,
            "namespaces and nodes must be positive"
        );
        Ok(())
    }
}

/// Namespace `i`'s name.
pub fn namespace_name(i: usize) -> String {
    format!("team-{i:02}")
}

/// Node `i`'s name.
pub fn node_name(i: usize) -> String {
    format!("node-{i:03}")
}

/// Pod `i`'s Deployment: (app name, pod-template-hash).
fn deployment_of(i: usize) -> (usize, String, String) {
    let deployment = i / REPLICAS;
    let app = format!("svc-{deployment:04}");
    let hash = format!(
        "{:010x}",
        (deployment as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24
    );
    (deployment, app, hash)
}

/// Pod `i`'s (namespace, name).
pub fn pod_key(layout: &Layout, i: usize) -> (String, String) {
    let (_, app, hash) = deployment_of(i);
    (
        namespace_name(i % layout.namespaces),
        format!("{app}-{hash}-{:05x}", i.wrapping_mul(7919) % 0xfffff),
    )
}

/// The current time as the API stores it (RFC 3339, whole seconds).
fn now() -> String {
    let seconds = k8s_openapi::jiff::Timestamp::now().as_second();
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Creates the layout's namespaces.
pub async fn create_namespaces(client: &kube::Client, layout: &Layout) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0..layout.namespaces {
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace_name(i), "labels": {"team": namespace_name(i)}},
        }))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    Ok(())
}

/// Creates the layout's nodes, `concurrency` at a time (with their status when
/// [`Layout::running`]).
pub async fn create_nodes(
    client: &kube::Client,
    layout: &Layout,
    concurrency: usize,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let now = now();
    futures::stream::iter((0..layout.nodes).map(|i| {
        let (nodes, now) = (nodes.clone(), &now);
        async move {
            let node: Node =
                serde_json::from_value(status::node_json(i, &node_name(i), layout.running, now))?;
            nodes
                .create(&PostParams::default(), &node)
                .await
                .with_context(|| format!("node {}", node_name(i)))?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(concurrency.max(1))
    .try_collect::<Vec<()>>()
    .await?;
    Ok(())
}

/// What [`create_pods`] did.
#[derive(Debug, Clone, Copy)]
pub struct Created {
    /// Pods created.
    pub pods: usize,
    /// API requests made.
    pub requests: usize,
    /// Wall time.
    pub elapsed: Duration,
}

impl Created {
    /// Pods per second.
    pub fn pods_per_second(&self) -> f64 {
        self.pods as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// API requests per second.
    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Creates pods `range`, `concurrency` at a time, printing progress every 1,000 pods to stderr
/// prefixed with `tag`.
pub async fn create_pods(
    client: &kube::Client,
    layout: &Layout,
    range: Range<usize>,
    concurrency: usize,
    tag: &str,
) -> anyhow::Result<Created> {
    let started = Instant::now();
    let (count, first) = (range.len(), range.start);
    let done = AtomicUsize::new(0);
    let done = &done;
    futures::stream::iter(range.map(|i| {
        let client = client.clone();
        async move {
            create_pod(&client, layout, i)
                .await
                .with_context(|| format!("pod {i}"))?;
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_multiple_of(1000) {
                eprintln!(
                    "{tag}: {} pods ({:.0} pods/s)",
                    first + n,
                    n as f64 / started.elapsed().as_secs_f64().max(1e-9)
                );
            }
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(concurrency.max(1))
    .try_collect::<Vec<()>>()
    .await?;
    Ok(Created {
        pods: count,
        requests: count * if layout.running { 3 } else { 2 },
        elapsed: started.elapsed(),
    })
}

/// Pod `i`, written as a cluster writes it (see the module documentation).
pub async fn create_pod(client: &kube::Client, layout: &Layout, i: usize) -> anyhow::Result<()> {
    let (ns, name) = pod_key(layout, i);
    let node_index = i % layout.nodes;
    let node = node_name(node_index);
    let (deployment, app, hash) = deployment_of(i);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // Manager 1 creates the pod (spec and the template's labels).
    let template = template::pod_template(&app, &hash, &ns);
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": template["metadata"]["labels"],
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-{hash}"),
                "uid": format!("{deployment:08x}-1111-4222-8333-{deployment:012x}"),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": template["spec"],
    });
    pod["spec"]["nodeName"] = json!(node);
    pods.patch(
        &name,
        &PatchParams::apply("kube-controller-manager").force(),
        &Patch::Apply(&pod),
    )
    .await?;

    // Manager 2 adds metadata: more labels, the last-applied copy, scrape annotations. (Not as
    // `kubectl`: kube-apiserver rewrites the last-applied annotation of an apply by `kubectl` to
    // that apply's own body.)
    let meta = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {"app.kubernetes.io/part-of": "shop", "cost-center": format!("cc-{}", deployment % 17)},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": template::last_applied(&app, &ns, &template),
                "prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                "prometheus.io/path": "/metrics",
            },
        },
    });
    pods.patch(
        &name,
        &PatchParams::apply("argocd-controller").force(),
        &Patch::Apply(&meta),
    )
    .await?;

    if layout.running {
        let slot = i / layout.nodes;
        let status = status::running_pod_status(i, &app, &ns, node_index, slot, &now());
        let params = PatchParams {
            field_manager: Some(STATUS_MANAGER.to_owned()),
            ..Default::default()
        };
        pods.patch_status(&name, &params, &Patch::Strategic(json!({"status": status})))
            .await
            .context("status")?;
    }
    Ok(())
}

/// One line about a stored generated pod (the first of namespace 0): its size as JSON (as the API
/// serves it), its managers, the last-applied copy's size and its phase.
pub async fn describe_sample(client: &kube::Client) -> anyhow::Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace_name(0));
    let list = pods.list(&ListParams::default().limit(1)).await?;
    let Some(pod) = list.items.first() else {
        return Ok("no pods".to_owned());
    };
    let bytes = serde_json::to_vec(pod)?.len();
    let managers: Vec<String> = pod
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    let last_applied = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kubectl.kubernetes.io/last-applied-configuration"))
        .map_or(0, String::len);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    Ok(format!(
        "a stored pod is {bytes} bytes of JSON: managedFields by {}, last-applied {last_applied} \
         bytes, phase {}",
        managers.join(", "),
        phase.unwrap_or("unset")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_of_one_deployment_share_a_namespace_only_by_index() {
        let layout = Layout {
            namespaces: 50,
            nodes: 100,
            running: false,
        };
        let (ns0, a) = pod_key(&layout, 0);
        let (ns1, b) = pod_key(&layout, 1);
        assert_eq!(ns0, "team-00");
        assert_eq!(ns1, "team-01");
        assert!(a.starts_with("svc-0000-") && b.starts_with("svc-0000-"));
        assert_ne!(a, b);
        assert!(pod_key(&layout, 6).1.starts_with("svc-0001-"));
    }
}
