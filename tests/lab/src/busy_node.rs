//! The busy node of the scale benchmark: one hollow node (upstream kubelet, fake runtime, see
//! [`resize_guard_harness::hollow_node`]) full of low-priority pods plus one high-priority pod,
//! whose resize beyond the free CPU the real kubelet marks `PodResizePending`/`Deferred` — the
//! situation resize-guard's controller exists for.
//!
//! [`BusyNode::measure`] watches the namespace's pods and Events (`events.k8s.io/v1`) from a listed
//! resourceVersion, sends the resize PATCH, and times what the watches observe: the kubelet's
//! Deferred condition (its `lastTransitionTime` has whole seconds, so the watch's clock is used),
//! then the controller's plan annotation (`resize-guard.io/preemption`,
//! `controller/src/preemption/seal.rs`) and first `Preempted` Event on a victim
//! (`controller/src/preemption/actuator.rs`), then the kubelet applying the resize once the victims
//! are gone. [`BusyNode::reset`] deletes the resized pod and recreates it and the victims, so every
//! measurement starts from the same node. Timing is wall-clock on a shared machine; the API server,
//! etcd, kubelet and both programs share its cores.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::WatchParams;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent};
use serde_json::json;

use resize_guard_harness::control_plane::ControlPlane;
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
use resize_guard_harness::objects::{
    allocated_cpu, cpu_resize, guaranteed_pod, owned, resize_pending, wait_gone,
};

/// The namespace of the busy node's pods.
pub const NAMESPACE: &str = "busy";
/// The busy node's name.
pub const NODE: &str = "busy-node";
/// PriorityClass of the filler pods.
pub const LOW_CLASS: &str = "scale-low";
/// PriorityClass of the pod that is resized.
pub const HIGH_CLASS: &str = "scale-high";
/// The pod that is resized (container `app`).
pub const PREEMPTOR: &str = "app";
/// The controller's plan annotation (`controller/src/preemption/seal.rs`, `PLAN_ANNOTATION`).
pub const PLAN_ANNOTATION: &str = "resize-guard.io/preemption";
/// The reason of the controller's Event on each victim (`controller/src/preemption/actuator.rs`).
pub const PREEMPTED_REASON: &str = "Preempted";

/// The node and its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scene {
    /// Machine cores (all allocatable).
    pub cores: u32,
    /// Low-priority Guaranteed filler pods.
    pub low_pods: usize,
    /// Each filler's cpu, millicores.
    pub low_milli: u32,
    /// The high-priority pod's cpu before the resize, millicores.
    pub high_milli: u32,
    /// The high-priority pod's cpu after the resize, millicores.
    pub resize_milli: u32,
}

impl Default for Scene {
    /// 8 cores; 100 × 70m fillers and a 500m high-priority pod leave 500m free; a resize to
    /// 1200m needs 200m more, i.e. three victims (within the shipped `maxVictimsPerResize: 5`).
    fn default() -> Scene {
        Scene {
            cores: 8,
            low_pods: 100,
            low_milli: 70,
            high_milli: 500,
            resize_milli: 1200,
        }
    }
}

impl Scene {
    /// Free cpu before the resize, millicores.
    pub fn free_milli(&self) -> i64 {
        i64::from(self.cores) * 1000
            - self.low_pods as i64 * i64::from(self.low_milli)
            - i64::from(self.high_milli)
    }

    /// Fillers that must go for the resize to fit.
    pub fn victims_needed(&self) -> i64 {
        let short = i64::from(self.resize_milli) - i64::from(self.high_milli) - self.free_milli();
        (short + i64::from(self.low_milli) - 1) / i64::from(self.low_milli)
    }

    /// Checks the scene is a Deferred (not Infeasible) resize on a node that holds its pods.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.free_milli() >= 0, "the pods do not fit on the node");
        anyhow::ensure!(
            self.victims_needed() > 0,
            "the resize fits without preemption"
        );
        anyhow::ensure!(
            i64::from(self.resize_milli) <= i64::from(self.cores) * 1000,
            "the resize exceeds the node (Infeasible, not Deferred)"
        );
        anyhow::ensure!(self.low_pods < 110, "more pods than the node's 110");
        Ok(())
    }

    fn low_name(i: usize) -> String {
        format!("low-{i:03}")
    }
}

/// What one [`BusyNode::measure`] observed.
#[derive(Debug, Clone)]
pub struct Deferral {
    /// The resize PATCH's round trip (it passes the admission webhooks registered).
    pub patch: Duration,
    /// From sending the PATCH to the watch seeing the kubelet's Deferred condition.
    pub to_deferred: Duration,
    /// From Deferred seen to the plan annotation seen.
    pub to_plan: Option<Duration>,
    /// From Deferred seen to the first `Preempted` Event seen.
    pub to_preempted: Option<Duration>,
    /// From Deferred seen to the kubelet reporting the new cpu allocated.
    pub to_resized: Option<Duration>,
    /// Filler pods deleted while watching.
    pub victims: usize,
    /// The Deferred condition's message.
    pub message: String,
}

impl Deferral {
    /// From Deferred seen to the controller's first visible act (plan or Event).
    pub fn to_first_act(&self) -> Option<Duration> {
        match (self.to_plan, self.to_preempted) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The running busy node.
#[derive(Debug)]
pub struct BusyNode {
    node: HollowNode,
    scene: Scene,
}

impl BusyNode {
    /// Creates the PriorityClasses and namespace, starts the hollow node and fills it (every pod
    /// Running).
    pub async fn start(cp: &ControlPlane, scene: Scene) -> anyhow::Result<BusyNode> {
        scene.validate()?;
        let client = cp.client().await?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE},
        }))?;
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("namespace"),
        }
        resize_guard_harness::objects::priority_class(&client, LOW_CLASS, 1000, false).await?;
        resize_guard_harness::objects::priority_class(&client, HIGH_CLASS, 100_000, false).await?;
        let config = HollowNodeConfig::new(NODE, scene.cores, "32Gi").pods(110);
        let node = HollowNode::start(cp, &config).await?;
        let busy = BusyNode { node, scene };
        busy.fill(&client).await?;
        Ok(busy)
    }

    /// The scene.
    pub fn scene(&self) -> Scene {
        self.scene
    }

    /// The hollow node (its log, process).
    pub fn node(&self) -> &HollowNode {
        &self.node
    }

    /// Creates whichever of the pods is missing, fillers first, once no pod is terminating, and
    /// waits until the kubelet runs them all.
    pub async fn fill(&self, client: &kube::Client) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let timeout = Duration::from_secs(180);
        wait_pods(&pods, timeout, "no pod terminating", |list| {
            list.iter().all(|p| p.metadata.deletion_timestamp.is_none())
        })
        .await?;
        let existing: BTreeSet<String> = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let low_cpu = format!("{}m", self.scene.low_milli);
        for i in 0..self.scene.low_pods {
            let name = Scene::low_name(i);
            if !existing.contains(&name) {
                let pod = owned(
                    &pods,
                    &guaranteed_pod(&name, NODE, LOW_CLASS, &low_cpu, "64Mi"),
                )
                .await?;
                pods.create(&PostParams::default(), &pod)
                    .await
                    .with_context(|| format!("pod {name}"))?;
            }
        }
        let lows = self.scene.low_pods;
        wait_pods(&pods, timeout, "every filler Running", |list| {
            running(list, |n| n.starts_with("low-")) == lows
        })
        .await?;
        if !existing.contains(PREEMPTOR) {
            let cpu = format!("{}m", self.scene.high_milli);
            let pod = guaranteed_pod(PREEMPTOR, NODE, HIGH_CLASS, &cpu, "256Mi");
            pods.create(&PostParams::default(), &pod)
                .await
                .with_context(|| format!("pod {PREEMPTOR}"))?;
        }
        wait_pods(&pods, timeout, "the high-priority pod Running", |list| {
            running(list, |n| n == PREEMPTOR) == 1
        })
        .await?;
        Ok(started.elapsed())
    }

    /// Deletes the (resized) high-priority pod, then [`BusyNode::fill`]s the node again.
    pub async fn reset(&self, client: &kube::Client) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        match pods.delete(PREEMPTOR, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e).context("deleting the high-priority pod"),
        }
        wait_gone(&pods, PREEMPTOR, Duration::from_secs(90)).await?;
        self.fill(client).await?;
        Ok(started.elapsed())
    }

    /// Resizes the high-priority pod beyond the free cpu and times what follows (see the module
    /// documentation); waits at most `timeout` for all of it.
    pub async fn measure(
        &self,
        client: &kube::Client,
        timeout: Duration,
    ) -> anyhow::Result<Deferral> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
        let watch = WatchParams::default().timeout(290);
        let pod_rv = list_version(&pods).await?;
        let event_rv = list_version(&events).await?;
        let mut pod_stream = pods.watch(&watch, &pod_rv).await?.boxed();
        let mut event_stream = events.watch(&watch, &event_rv).await?.boxed();

        let target = format!("{}m", self.scene.resize_milli);
        let patch: serde_json::Value = serde_json::from_str(&cpu_resize(&target))?;
        let sent = Instant::now();
        pods.patch_subresource(
            "resize",
            PREEMPTOR,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .context("resizing the high-priority pod")?;
        let patch_took = sent.elapsed();

        let deadline = tokio::time::Instant::now() + timeout;
        let (mut deferred, mut plan, mut preempted, mut resized) = (None, None, None, None);
        let mut message = String::new();
        let mut victims = 0;
        loop {
            let settled = resized.is_some_and(|r: Instant| r.elapsed() > Duration::from_secs(2));
            if settled && (plan.is_some() || preempted.is_some()) {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                event = pod_stream.next() => match event.context("the pod watch ended")?? {
                    WatchEvent::Added(p) | WatchEvent::Modified(p) if p.metadata.name.as_deref() == Some(PREEMPTOR) => {
                        let now = Instant::now();
                        if deferred.is_none()
                            && let Some((reason, why)) = resize_pending(&p)
                        {
                            anyhow::ensure!(reason == "Deferred", "the kubelet marked the resize {reason}: {why}");
                            deferred = Some(now);
                            message = why;
                        }
                        if plan.is_none()
                            && p.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(PLAN_ANNOTATION))
                        {
                            plan = Some(now);
                        }
                        if resized.is_none() && allocated_cpu(&p).as_deref() == Some(target.as_str()) {
                            resized = Some(now);
                        }
                    }
                    WatchEvent::Deleted(p) if p.metadata.name.as_deref().is_some_and(|n| n.starts_with("low-")) => {
                        victims += 1;
                    }
                    WatchEvent::Error(e) => anyhow::bail!("pod watch: {}", e.message),
                    _ => {}
                },
                event = event_stream.next() => match event.context("the Event watch ended")?? {
                    WatchEvent::Added(e) | WatchEvent::Modified(e) if e.reason.as_deref() == Some(PREEMPTED_REASON) => {
                        preempted.get_or_insert_with(Instant::now);
                    }
                    WatchEvent::Error(e) => anyhow::bail!("Event watch: {}", e.message),
                    _ => {}
                },
            }
        }
        let deferred = deferred.with_context(|| {
            format!(
                "the kubelet did not mark the resize Deferred within {timeout:?}; hollow node log:\n{}",
                self.node.log_tail(3000)
            )
        })?;
        let since = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(deferred));
        Ok(Deferral {
            patch: patch_took,
            to_deferred: deferred - sent,
            to_plan: since(plan),
            to_preempted: since(preempted),
            to_resized: since(resized),
            victims,
            message,
        })
    }
}

/// Pods whose name `matches`, Running and not terminating.
fn running(list: &[Pod], matches: impl Fn(&str) -> bool) -> usize {
    list.iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(&matches))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count()
}

/// Lists the namespace's pods every 200 ms until `done` holds.
async fn wait_pods(
    pods: &Api<Pod>,
    timeout: Duration,
    what: &str,
    done: impl Fn(&[Pod]) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let list = pods.list(&ListParams::default()).await?.items;
        if done(&list) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let phases: Vec<String> = list
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running"))
                .take(5)
                .map(|p| {
                    format!(
                        "{} {:?}",
                        p.metadata.name.as_deref().unwrap_or_default(),
                        p.status.as_ref().and_then(|s| s.phase.clone())
                    )
                })
                .collect();
            anyhow::bail!("busy node: not {what} after {timeout:?}; not running: {phases:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The resourceVersion of a list of `api`: where a watch that misses nothing starts.
async fn list_version<K>(api: &Api<K>) -> anyhow::Result<String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_scene_defers_and_needs_three_victims() {
        let scene = Scene::default();
        scene.validate().unwrap();
        assert_eq!(scene.free_milli(), 500);
        assert_eq!(scene.victims_needed(), 3);
        let fits = Scene {
            resize_milli: 900,
            ..Scene::default()
        };
        assert!(fits.validate().is_err());
    }
}
