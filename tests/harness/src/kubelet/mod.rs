//! A simulated kubelet for any number of nodes, faithful to the resize behaviour of the real one
//! (upstream-resize.md §2): it registers Ready nodes, starts pods bound to them (rejecting those
//! that do not fit, like the kubelet's admission), admits, defers or refuses resizes with the
//! kubelet's conditions, messages and Events, retries Deferred resizes in the kubelet's order when
//! pods go away or shrink and periodically, and finishes graceful deletions with the final delete
//! after the grace period (scaled by [`KubeletOptions::time_scale`] so tests run fast).
//!
//! It is one sequential loop over a pod watch — like the kubelet's sync loop, no busy waiting —
//! so it scales to many nodes and hundreds of pods.

pub mod admission;
pub mod config;
pub mod report;

pub use config::{DEFAULT_DECLARED_FEATURES, KubeletOptions, NodeConfig};

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use resize_guard_policy::pod::{REASON_DEFERRED, REASON_INFEASIBLE, is_terminal, node_name};
use resize_guard_policy::resources::Resources;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use admission::{PendingResize, ResizeDecision, admit_new, decide_resize, held, retry_order};

/// A running simulated kubelet.
pub struct SimKubelet {
    task: JoinHandle<()>,
    stop: Option<oneshot::Sender<()>>,
    commands: mpsc::Sender<Command>,
    client: kube::Client,
}

enum Command {
    AddNode(String, Resources, oneshot::Sender<()>),
}

impl SimKubelet {
    /// Registers the nodes and starts managing their pods on the current runtime.
    pub async fn start(
        client: kube::Client,
        nodes: Vec<NodeConfig>,
        options: KubeletOptions,
    ) -> anyhow::Result<SimKubelet> {
        let (stop_tx, stop_rx) = oneshot::channel();
        let (cmd_tx, cmd_rx) = mpsc::channel(16);
        let state = Kubelet {
            nodes: HashMap::new(),
            pods: HashMap::new(),
            seen: None,
            client: client.clone(),
            options,
        };
        let task = tokio::spawn(state.run(stop_rx, cmd_rx));
        let kubelet = SimKubelet {
            task,
            stop: Some(stop_tx),
            commands: cmd_tx,
            client,
        };
        for n in &nodes {
            kubelet.add_node(n).await?;
        }
        Ok(kubelet)
    }

    /// Registers one more node and manages it from now on (returns once the loop knows it, so
    /// pods bound to it afterwards are never missed).
    pub async fn add_node(&self, node: &NodeConfig) -> anyhow::Result<()> {
        report::register_node(&self.client, node)
            .await
            .map_err(|e| anyhow::anyhow!("registering node {}: {e}", node.name))?;
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::AddNode(node.name.clone(), node.allocatable(), tx))
            .await
            .map_err(|_| anyhow::anyhow!("simulated kubelet has stopped"))?;
        rx.await
            .map_err(|_| anyhow::anyhow!("simulated kubelet has stopped"))
    }

    /// Stops the loop (pods keep their last status).
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl std::fmt::Debug for SimKubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimKubelet").finish_non_exhaustive()
    }
}

impl Drop for SimKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, Clone)]
struct Pending {
    reason: &'static str,
    message: String,
    since: Timestamp,
    generation: Option<i64>,
}

#[derive(Debug)]
struct Tracked {
    node: String,
    allocated: PodSpec,
    pending: Option<Pending>,
    deleting: bool,
    active: bool,
    last: Pod,
}

struct Kubelet {
    client: kube::Client,
    nodes: HashMap<String, Resources>,
    pods: HashMap<String, Tracked>,
    /// UIDs seen during a watch re-list, to find pods deleted while the watch was down.
    seen: Option<Vec<String>>,
    options: KubeletOptions,
}

impl Kubelet {
    async fn run(mut self, mut stop: oneshot::Receiver<()>, mut commands: mpsc::Receiver<Command>) {
        let api: Api<Pod> = Api::all(self.client.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut retry = tokio::time::interval(self.options.retry_period);
        retry.tick().await;
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = retry.tick() => self.retry_pending("periodic_retry").await,
                Some(cmd) = commands.recv() => match cmd {
                    Command::AddNode(name, allocatable, done) => {
                        self.nodes.insert(name, allocatable);
                        let _ = done.send(());
                    }
                },
                ev = events.next() => match ev {
                    Some(Ok(ev)) => self.on_event(ev).await,
                    Some(Err(e)) => tracing::debug!(error = %e, "simulated kubelet watch error"),
                    None => return,
                },
            }
        }
    }

    async fn on_event(&mut self, ev: watcher::Event<Pod>) {
        match ev {
            watcher::Event::Init => self.seen = Some(Vec::new()),
            watcher::Event::InitApply(pod) => {
                if let (Some(seen), Some(uid)) = (self.seen.as_mut(), pod.metadata.uid.clone()) {
                    seen.push(uid);
                }
                self.on_pod(pod).await;
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.seen.take() {
                    let gone: Vec<String> = self
                        .pods
                        .keys()
                        .filter(|u| !seen.contains(u))
                        .cloned()
                        .collect();
                    for uid in gone {
                        self.pods.remove(&uid);
                    }
                    self.retry_pending("pods_removed").await;
                }
            }
            watcher::Event::Apply(pod) => self.on_pod(pod).await,
            watcher::Event::Delete(pod) => {
                if let Some(uid) = pod.metadata.uid.as_deref()
                    && self.pods.remove(uid).is_some()
                {
                    self.retry_pending("pods_removed").await;
                }
            }
        }
    }

    fn used_by_others(&self, node: &str, uid: &str) -> Resources {
        self.pods
            .iter()
            .filter(|(u, t)| u.as_str() != uid && t.node == node && t.active)
            .map(|(_, t)| held(&t.allocated))
            .sum()
    }

    async fn on_pod(&mut self, pod: Pod) {
        let Some(node) = node_name(&pod).map(str::to_owned) else {
            return;
        };
        let Some(&capacity) = self.nodes.get(&node) else {
            return;
        };
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let Some(spec) = pod.spec.clone() else {
            return;
        };
        if let Some(t) = self.pods.get_mut(&uid) {
            t.last = pod.clone();
            if is_terminal(&pod) {
                if t.active {
                    t.active = false;
                    self.retry_pending("pod_terminated").await;
                }
                return;
            }
            if pod.metadata.deletion_timestamp.is_some() {
                if !t.deleting {
                    t.deleting = true;
                    self.schedule_final_delete(&pod);
                }
                return;
            }
            self.resize(&uid).await;
            return;
        }
        // A pod this kubelet has not seen.
        if is_terminal(&pod) {
            return;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            self.schedule_final_delete(&pod);
        }
        if let Some(allocated) = adopt(&pod) {
            // Already running (the simulator restarted): take the allocation from status.
            self.track(uid, node, allocated, pod, true);
            return;
        }
        let used = self.used_by_others(&node, &uid);
        if let Some((reason, message)) = admit_new(&spec, used, capacity) {
            self.patch_status(&pod, &report::rejected_patch(&reason, &message))
                .await;
            report::event(&self.client, &pod, &node, "Warning", &reason, message).await;
            self.track(uid, node, spec, pod, false);
            return;
        }
        self.patch_status(&pod, &report::startup_patch(&pod, &spec))
            .await;
        let deleting = pod.metadata.deletion_timestamp.is_some();
        self.track(uid.clone(), node, spec, pod, true);
        if let Some(t) = self.pods.get_mut(&uid) {
            t.deleting = deleting;
        }
    }

    fn track(&mut self, uid: String, node: String, allocated: PodSpec, pod: Pod, active: bool) {
        self.pods.insert(
            uid,
            Tracked {
                node,
                allocated,
                pending: None,
                deleting: false,
                active,
                last: pod,
            },
        );
    }

    /// Re-evaluates one pod's resize (kubelet `handlePodResourcesResize`).
    async fn resize(&mut self, uid: &str) {
        let Some(t) = self.pods.get(uid) else { return };
        if !t.active || t.deleting {
            return;
        }
        let Some(desired) = t.last.spec.clone() else {
            return;
        };
        let generation = t.last.metadata.generation;
        if let Some(p) = &t.pending
            && p.reason == REASON_INFEASIBLE
            && p.generation == generation
        {
            // The kubelet never retries an Infeasible resize until the spec changes again.
            return;
        }
        let capacity = self.nodes.get(&t.node).copied().unwrap_or_default();
        let used = self.used_by_others(&t.node, uid);
        let decision = decide_resize(&desired, &t.allocated, used, capacity);
        let pod = t.last.clone();
        let node = t.node.clone();
        let previous = t.pending.clone();
        match decision {
            ResizeDecision::Unchanged => {
                if previous.is_some() {
                    self.patch_status(&pod, &report::cleared_patch()).await;
                    if let Some(t) = self.pods.get_mut(uid) {
                        t.pending = None;
                    }
                }
            }
            ResizeDecision::Deferred(message) => {
                self.set_pending(uid, &pod, &node, REASON_DEFERRED, message, previous)
                    .await;
            }
            ResizeDecision::Infeasible(message) => {
                self.set_pending(uid, &pod, &node, REASON_INFEASIBLE, message, previous)
                    .await;
            }
            ResizeDecision::Admit => {
                let before = held(&self.pods[uid].allocated);
                if let Some(t) = self.pods.get_mut(uid) {
                    t.allocated = desired.clone();
                    t.pending = None;
                }
                self.patch_status(&pod, &report::admitted_patch(&pod, &desired, &[]))
                    .await;
                let summary = report::resize_summary(&pod);
                report::event(
                    &self.client,
                    &pod,
                    &node,
                    "Normal",
                    "ResizeStarted",
                    format!("Pod resize started: {summary}"),
                )
                .await;
                let (client, delay) = (self.client.clone(), self.options.actuation_delay);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let api: Api<Pod> = Api::namespaced(
                        client.clone(),
                        pod.metadata.namespace.as_deref().unwrap_or_default(),
                    );
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if api
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Strategic(report::completed_patch()),
                        )
                        .await
                        .is_ok()
                    {
                        report::event(
                            &client,
                            &pod,
                            &node,
                            "Normal",
                            "ResizeCompleted",
                            format!("Pod resize completed: {summary}"),
                        )
                        .await;
                    }
                });
                if !before.fits_in(held(&desired)) {
                    // Something shrank: room may have appeared for others.
                    Box::pin(self.retry_pending("pod_resized")).await;
                }
            }
        }
    }

    /// Writes `PodResizePending` (and a `ResizeDeferred`/`ResizeInfeasible` Event when the reason
    /// or the generation changes), keeping `lastTransitionTime` while the reason stays.
    async fn set_pending(
        &mut self,
        uid: &str,
        pod: &Pod,
        node: &str,
        reason: &'static str,
        message: String,
        previous: Option<Pending>,
    ) {
        let generation = pod.metadata.generation;
        let same = previous.as_ref().is_some_and(|p| {
            p.reason == reason && p.message == message && p.generation == generation
        });
        if same {
            return;
        }
        let since = match &previous {
            Some(p) if p.reason == reason => p.since,
            _ => Timestamp::now(),
        };
        self.patch_status(pod, &report::pending_patch(pod, reason, &message, since))
            .await;
        let changed = previous
            .as_ref()
            .is_none_or(|p| p.reason != reason || p.generation != generation);
        if changed {
            let event_reason = if reason == REASON_INFEASIBLE {
                "ResizeInfeasible"
            } else {
                "ResizeDeferred"
            };
            let text = format!("Pod resize {reason}: {message}");
            report::event(&self.client, pod, node, "Warning", event_reason, text).await;
        }
        if let Some(t) = self.pods.get_mut(uid) {
            t.pending = Some(Pending {
                reason,
                message,
                since,
                generation,
            });
        }
    }

    /// `retryPendingResizes`: every Deferred resize on every node, in the kubelet's order.
    async fn retry_pending(&mut self, trigger: &str) {
        let mut pending: Vec<PendingResize> = self
            .pods
            .iter()
            .filter(|(_, t)| t.active && !t.deleting)
            .filter_map(|(uid, t)| {
                let p = t.pending.as_ref().filter(|p| p.reason == REASON_DEFERRED)?;
                let desired = t.last.spec.as_ref()?;
                Some(PendingResize::new(
                    uid,
                    desired,
                    &t.allocated,
                    Some(p.since),
                ))
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        pending.sort_by(retry_order);
        tracing::debug!(trigger, count = pending.len(), "retrying pending resizes");
        for p in pending {
            Box::pin(self.resize(&p.uid)).await;
        }
    }

    fn schedule_final_delete(&self, pod: &Pod) {
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .unwrap_or(30)
            .max(0) as f64;
        let wait = Duration::from_secs_f64(grace * self.options.time_scale);
        let client = self.client.clone();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let api: Api<Pod> = Api::namespaced(client, &ns);
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid,
                    resource_version: None,
                }),
                ..Default::default()
            };
            if let Err(e) = api.delete(&name, &params).await {
                tracing::debug!(error = %e, pod = %name, "final delete");
            }
        });
    }

    async fn patch_status(&self, pod: &Pod, patch: &Value) {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            tracing::warn!(error = %e, pod = name, "simulated kubelet status update failed");
        }
    }
}

/// The allocation of a pod another incarnation of this kubelet already started: its container
/// statuses' `resources` (requests and limits).
fn adopt(pod: &Pod) -> Option<PodSpec> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") {
        return None;
    }
    let statuses = status.container_statuses.as_ref()?;
    let mut spec = pod.spec.clone()?;
    for c in spec.containers.iter_mut() {
        let cs = statuses.iter().find(|s| s.name == c.name)?;
        c.resources = cs.resources.clone();
    }
    Some(spec)
}
