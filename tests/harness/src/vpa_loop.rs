//! VPA's whole loop with nothing hand-written: a Deployment on a hollow node whose kubelet serves
//! its API, usage set on that node ([`HollowNode::set_usage`]), metrics-server scraping it, the
//! real recommender turning it into `status.recommendation`, the real updater resizing in place
//! (or falling back to eviction), and the kubelet applying (or refusing) the resize. Included in
//! [`crate::vpa`] as `vpa::usage_loop`; the caller starts the parts (control plane with scheduler,
//! [`crate::metrics_server::MetricsServer`], [`super::Vpa`], [`super::Recommender`]).
//!
//! Two scenarios, both timed from the moment usage is written:
//! - [`wall3`] (the field report's third wall, the loop's lag): baseline usage, a VPA, wait until
//!   the pods sit at the recommendation ([`Step`] "settle"); then a rise and, optionally, a drop,
//!   each recorded as usage → PodMetrics → recommendation target → resize PATCHed (spec) →
//!   applied by the kubelet (`status.containerStatuses[].resources`). On a timeout the step keeps
//!   the updater's last log line about the pods: where the loop stopped.
//! - [`memory_wall`]: `maxAllowed.memory` below the container's working set, so the recommender's
//!   capped target is a memory limit below usage; what the kubelet, resize-guard (if installed)
//!   and the updater then do, read from Events, the pod's conditions and the updater's log
//!   ([`MemoryWall`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::{Vpa, api as vpa_api, vpa_object};
use crate::env::Env;
use crate::hollow_node::{HollowNode, HollowNodeConfig, parse_milli};
use crate::metrics_server::{container_usage, pod_metrics};
use crate::objects::{POOL_LABEL, deployment, restart_count};

/// The container of every pod here ([`crate::objects::deployment`]).
pub const CONTAINER: &str = "app";
const MI: i128 = 1 << 20;
const POLL: Duration = Duration::from_millis(250);

/// A Deployment of Guaranteed pods alone on a 2-core, 4Gi hollow node that serves its kubelet
/// API, in a namespace of its own; the Deployment and its VPA share one name.
pub struct Workload {
    /// Namespace (also the node pool label).
    pub namespace: String,
    /// Deployment and VPA name.
    pub name: String,
    /// The node its pods run on.
    pub node: HollowNode,
    client: kube::Client,
}

impl Workload {
    /// Creates the namespace, the node and the Deployment, and waits until `replicas` run.
    pub async fn start(
        env: &Env,
        name: &str,
        replicas: i32,
        cpu: &str,
        memory: &str,
    ) -> anyhow::Result<Workload> {
        let namespace = env.namespace(name).await;
        let node = HollowNode::start(
            &env.cp,
            &HollowNodeConfig::new(&env.unique(name), 2, "4Gi")
                .kubelet_api()
                .label(POOL_LABEL, &namespace),
        )
        .await?;
        let client = env.client().await;
        Api::<Deployment>::namespaced(client.clone(), &namespace)
            .create(
                &PostParams::default(),
                &deployment(name, replicas, "high", cpu, memory, &namespace),
            )
            .await?;
        let w = Workload {
            namespace,
            name: name.to_owned(),
            node,
            client,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while w.live_pods().await?.len() != replicas as usize {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{replicas} replicas of {}/{name} not running after 120 s",
                w.namespace
            );
            tokio::time::sleep(POLL).await;
        }
        Ok(w)
    }

    /// The Deployment's Running pods that are not being deleted.
    pub async fn live_pods(&self) -> anyhow::Result<Vec<Pod>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let selector = ListParams::default().labels(&format!("app={}", self.name));
        Ok(pods
            .list(&selector)
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect())
    }

    /// Sets what container [`CONTAINER`] of each pod uses, on the node.
    pub fn set_usage(&self, pods: &[Pod], memory: &str, cpu: &str) -> anyhow::Result<()> {
        for p in pods {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            self.node
                .set_usage(&self.namespace, name, CONTAINER, memory, cpu)?;
        }
        Ok(())
    }

    /// True when metrics.k8s.io serves `memory` (bytes) for every pod.
    pub async fn metrics_show(&self, pods: &[Pod], memory: i128) -> anyhow::Result<bool> {
        for p in pods {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            let served = pod_metrics(&self.client, &self.namespace, name)
                .await?
                .and_then(|m| container_usage(&m, CONTAINER))
                .and_then(|(_, mem)| parse_milli(&mem).ok());
            if served != Some(memory * 1000) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Creates the VPA (`InPlaceOrRecreate`), with `maxAllowed.memory` when given.
    pub async fn create_vpa(&self, max_memory: Option<&str>) -> anyhow::Result<()> {
        let mut object = vpa_object(&self.name, &self.name, "InPlaceOrRecreate", None);
        if let Some(m) = max_memory {
            object["spec"]["resourcePolicy"]["containerPolicies"][0]["maxAllowed"] =
                json!({"memory": m});
        }
        super::create_vpa(&self.client, &self.namespace, &object).await?;
        Ok(())
    }

    /// The VPA's recommendation for [`CONTAINER`], as the recommender wrote it.
    pub async fn recommendation(&self) -> anyhow::Result<Option<Recommended>> {
        let vpa = vpa_api(&self.client, &self.namespace)
            .get(&self.name)
            .await?;
        let recs = &vpa.data["status"]["recommendation"]["containerRecommendations"];
        let Some(r) = recs
            .as_array()
            .and_then(|a| a.iter().find(|r| r["containerName"] == CONTAINER))
        else {
            return Ok(None);
        };
        let get = |field: &str, res: &str| r[field][res].as_str().unwrap_or_default().to_owned();
        let status_writers = vpa
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f.subresource.as_deref() == Some("status"))
            .filter_map(|f| f.manager)
            .collect();
        Ok(Some(Recommended {
            target: (get("target", "cpu"), get("target", "memory")),
            uncapped: (
                get("uncappedTarget", "cpu"),
                get("uncappedTarget", "memory"),
            ),
            lower_memory: get("lowerBound", "memory"),
            upper_memory: get("upperBound", "memory"),
            status_writers,
        }))
    }

    /// Events in the namespace as (reason, object, message), oldest first.
    pub async fn events(&self) -> anyhow::Result<Vec<(String, String, String)>> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut events = api.list(&ListParams::default()).await?.items;
        events.sort_by_key(|e| e.first_timestamp.as_ref().map(|t| t.0));
        Ok(events
            .into_iter()
            .map(|e| {
                (
                    e.reason.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect())
    }
}

/// A container's recommendation as the recommender wrote it; pairs are (cpu, memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recommended {
    /// `target` (capped by the VPA's policy).
    pub target: (String, String),
    /// `uncappedTarget`: the estimate before `maxAllowed`.
    pub uncapped: (String, String),
    /// `lowerBound.memory`.
    pub lower_memory: String,
    /// `upperBound.memory`.
    pub upper_memory: String,
    /// `managedFields[].manager` of the VPA's `status` subresource writers.
    pub status_writers: Vec<String>,
}

impl Recommended {
    /// The target's memory in bytes.
    pub fn target_memory(&self) -> Option<i128> {
        parse_milli(&self.target.1).ok().map(|m| m / 1000)
    }
}

/// A pod's memory request for [`CONTAINER`], in bytes: `applied` reads what the kubelet reports
/// (`status.containerStatuses[].resources`), otherwise the spec.
pub fn memory_request(p: &Pod, applied: bool) -> Option<i128> {
    let resources = if applied {
        crate::objects::container_status(p, CONTAINER)?
            .resources
            .clone()?
    } else {
        p.spec
            .as_ref()?
            .containers
            .iter()
            .find(|c| c.name == CONTAINER)?
            .resources
            .clone()?
    };
    let q = resources.requests?.get("memory")?.0.clone();
    parse_milli(&q).ok().map(|m| m / 1000)
}

/// A memory quantity in whole MiB, rounded up (`248153480` → `237Mi`), or as given if malformed.
pub fn mebibytes(q: &str) -> String {
    parse_milli(q).map_or(q.to_owned(), |m| format!("{}Mi", (m / 1000 + MI - 1) / MI))
}

/// One usage change and how far the loop carried it, each stage timed from the change.
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// What changed.
    pub label: String,
    /// metrics.k8s.io serves the new usage for every pod.
    pub metrics: Option<Duration>,
    /// The recommender's target reflects it.
    pub recommended: Option<Duration>,
    /// The updater's PATCH is in every pod's spec.
    pub patched: Option<Duration>,
    /// The kubelet reports it applied on every pod.
    pub applied: Option<Duration>,
    /// The last recommendation seen.
    pub recommendation: Option<Recommended>,
    /// On a timeout: the updater's last log line about the pods.
    pub stopped_at: Option<String>,
}

impl Step {
    /// One table row: label and each stage in seconds (`-` where not reached).
    pub fn row(&self) -> String {
        let s =
            |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.1}", d.as_secs_f64()));
        format!(
            "| {} | {} | {} | {} | {} |",
            self.label,
            s(self.metrics),
            s(self.recommended),
            s(self.patched),
            s(self.applied)
        )
    }
}

/// What [`wall3`] measured.
#[derive(Debug, Clone)]
pub struct LoopOutcome {
    /// The namespace it ran in.
    pub namespace: String,
    /// Baseline, rise and (if asked) drop.
    pub steps: Vec<Step>,
    /// Every pod kept its UID from start to end.
    pub same_pods: bool,
    /// Container restarts summed over the pods at the end.
    pub restarts: i32,
    /// The namespace's Events at the end, (reason, object, message).
    pub events: Vec<(String, String, String)>,
}

/// What each usage step waits for: the target (memory bytes) and the pods' memory request
/// (bytes; spec for "patched", status for "applied") given the target.
struct Want<'a> {
    memory: &'a str,
    cpu: &'a str,
    target: &'a dyn Fn(i128) -> bool,
    request: &'a dyn Fn(i128, i128) -> bool,
}

async fn step(
    w: &Workload,
    vpa: &Vpa,
    label: &str,
    want: Want<'_>,
    timeout: Duration,
) -> anyhow::Result<Step> {
    let pods = w.live_pods().await?;
    let bytes = parse_milli(want.memory)? / 1000;
    w.set_usage(&pods, want.memory, want.cpu)?;
    let start = Instant::now();
    let mut s = Step {
        label: label.to_owned(),
        ..Step::default()
    };
    while s.applied.is_none() && start.elapsed() < timeout {
        if s.metrics.is_none() && w.metrics_show(&pods, bytes).await? {
            s.metrics = Some(start.elapsed());
        }
        s.recommendation = w.recommendation().await?;
        let target = s
            .recommendation
            .as_ref()
            .and_then(Recommended::target_memory);
        if let Some(t) = target.filter(|t| (want.target)(*t)) {
            s.recommended.get_or_insert(start.elapsed());
            let now = w.live_pods().await?;
            let all = |applied: bool| {
                now.len() == pods.len()
                    && now
                        .iter()
                        .all(|p| memory_request(p, applied).is_some_and(|r| (want.request)(r, t)))
            };
            if all(false) {
                s.patched.get_or_insert(start.elapsed());
            }
            if all(true) {
                s.applied = Some(start.elapsed());
            }
        }
        tokio::time::sleep(POLL).await;
    }
    if s.applied.is_none() {
        let tags: Vec<String> = pods
            .iter()
            .map(|p| {
                format!(
                    "pod=\"{}/{}\"",
                    w.namespace,
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        s.stopped_at = vpa
            .updater_log()
            .lines()
            .rfind(|l| tags.iter().any(|t| l.contains(t.as_str())))
            .map(str::to_owned);
    }
    Ok(s)
}

/// Wall 3 on a Deployment of `replicas` pods at 100m / 128Mi: baseline usage 100Mi / 80m served by
/// metrics.k8s.io, then the VPA, until its target is at least 100Mi and the pods run at it, then
/// usage 300Mi / 400m until the pods run at a request of at least 300Mi, then (if `drop`) back to
/// 100Mi / 80m until their request falls below the risen one. Each step gives up after `timeout`
/// and the rest are skipped.
pub async fn wall3(
    env: &Env,
    vpa: &Vpa,
    replicas: i32,
    drop: bool,
    timeout: Duration,
) -> anyhow::Result<LoopOutcome> {
    let w = Workload::start(env, "vpa-loop", replicas, "100m", "128Mi").await?;
    let first = w.live_pods().await?;
    let uids: BTreeSet<String> = first
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    // The baseline is served before the VPA exists, so the first recommendation is made from it
    // (a new pod's first samples are the node's default usage).
    w.set_usage(&first, "100Mi", "80m")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !w.metrics_show(&first, 100 * MI).await? {
        anyhow::ensure!(Instant::now() < deadline, "no PodMetrics at 100Mi");
        tokio::time::sleep(POLL).await;
    }
    w.create_vpa(None).await?;
    let mut steps = Vec::new();
    let settle = Want {
        memory: "100Mi",
        cpu: "80m",
        target: &|t| t >= 100 * MI,
        // Exactly at the target: any other request might be resized while the next step runs,
        // and a shrink that lands after usage rose is the memory wall, not the loop's lag.
        request: &|r, t| r == t,
    };
    steps.push(step(&w, vpa, "settle at 100Mi (VPA created)", settle, timeout).await?);
    if steps[0].applied.is_some() {
        let rise = Want {
            memory: "300Mi",
            cpu: "400m",
            target: &|t| t >= 300 * MI,
            request: &|r, _| r >= 300 * MI,
        };
        steps.push(step(&w, vpa, "rise 100Mi → 300Mi", rise, timeout).await?);
    }
    if drop && steps.len() == 2 && steps[1].applied.is_some() {
        let risen = w
            .live_pods()
            .await?
            .iter()
            .filter_map(|p| memory_request(p, true))
            .min()
            .unwrap_or(300 * MI);
        let fall = Want {
            memory: "100Mi",
            cpu: "80m",
            target: &|t| t * 10 < risen * 9,
            request: &|r, _| r < risen,
        };
        steps.push(step(&w, vpa, "drop 300Mi → 100Mi", fall, timeout).await?);
    }
    let end = w.live_pods().await?;
    Ok(LoopOutcome {
        namespace: w.namespace.clone(),
        steps,
        same_pods: end.len() == uids.len()
            && end
                .iter()
                .all(|p| p.metadata.uid.as_ref().is_some_and(|u| uids.contains(u))),
        restarts: end.iter().map(restart_count).sum(),
        events: w.events().await?,
    })
}

/// What VPA did with a memory target capped below usage ([`memory_wall`]).
#[derive(Debug, Clone, Default)]
pub struct MemoryWall {
    /// Which run ("without resize-guard", …).
    pub run: String,
    /// The namespace it ran in.
    pub namespace: String,
    /// The pod the updater tried to shrink.
    pub pod: String,
    /// The recommender's recommendation (capped target, uncapped estimate).
    pub recommendation: Option<Recommended>,
    /// `PodResizeInProgress` as seen on the pod, each distinct (reason, message) in order.
    pub in_progress: Vec<(String, String)>,
    /// The pod's Events, (reason, message), oldest first.
    pub events: Vec<(String, String)>,
    /// The updater's fall-back lines about the pod (first of each message).
    pub fallbacks: Vec<String>,
    /// The replacement pod's name and memory request (spec), once Running.
    pub replacement: Option<(String, String)>,
    /// From the VPA's creation: target written, pod evicted (`EvictedByVPA`).
    pub recommended_after: Option<Duration>,
    /// See `recommended_after`.
    pub evicted_after: Option<Duration>,
}

impl MemoryWall {
    /// The first Event message with `reason`.
    pub fn event(&self, reason: &str) -> Option<&str> {
        self.events
            .iter()
            .find(|(r, _)| r == reason)
            .map(|(_, m)| m.as_str())
    }

    /// One table row: run, what refused the shrink, what VPA did, the replacement.
    pub fn row(&self) -> String {
        let refused = match (self.event("ResizeRejected"), self.in_progress.last()) {
            (Some(_), _) => "resize-guard at admission (ResizeRejected)".to_owned(),
            (None, Some((reason, _))) => format!("kubelet: PodResizeInProgress {reason}"),
            (None, None) => "nothing".to_owned(),
        };
        let s =
            |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()));
        format!(
            "| {} | {} | {} | evicted after {} | replacement {} |",
            self.run,
            self.recommendation
                .as_ref()
                .map_or("-".to_owned(), |r| format!(
                    "{} (uncapped {})",
                    r.target.1,
                    mebibytes(&r.uncapped.1)
                )),
            refused,
            s(self.evicted_after),
            self.replacement
                .as_ref()
                .map_or("-".to_owned(), |(n, m)| format!("{n} at {m}")),
        )
    }
}

/// A Deployment of one pod at 100m / 256Mi using 200Mi, under a VPA whose `maxAllowed.memory` is
/// 128Mi: the recommender caps the target at 128Mi, the updater sends it in place. Waits (up to
/// `timeout` from the VPA's creation) until VPA has evicted the pod and a replacement runs.
pub async fn memory_wall(
    env: &Env,
    vpa: &Vpa,
    run: &str,
    timeout: Duration,
) -> anyhow::Result<MemoryWall> {
    let w = Workload::start(env, "vpa-memwall", 1, "100m", "256Mi").await?;
    let pods = w.live_pods().await?;
    let original = pods
        .first()
        .ok_or_else(|| anyhow::anyhow!("no pod"))?
        .clone();
    let name = original.metadata.name.clone().unwrap_or_default();
    let uid = original.metadata.uid.clone();
    w.set_usage(&pods, "200Mi", "100m")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !w.metrics_show(&pods, 200 * MI).await? {
        anyhow::ensure!(
            Instant::now() < deadline,
            "no PodMetrics at 200Mi for {name}"
        );
        tokio::time::sleep(POLL).await;
    }
    w.create_vpa(Some("128Mi")).await?;
    let start = Instant::now();
    let pod_api: Api<Pod> = Api::namespaced(w.client.clone(), &w.namespace);
    let mut out = MemoryWall {
        run: run.to_owned(),
        namespace: w.namespace.clone(),
        pod: name.clone(),
        ..MemoryWall::default()
    };
    while out.replacement.is_none() && start.elapsed() < timeout {
        if out.recommendation.is_none() {
            out.recommendation = w.recommendation().await?;
            if out.recommendation.is_some() {
                out.recommended_after = Some(start.elapsed());
            }
        }
        if let Some(p) = pod_api.get_opt(&name).await? {
            let cond = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "PodResizeInProgress"));
            if let Some(c) = cond {
                let seen = (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                );
                if out.in_progress.last() != Some(&seen) {
                    out.in_progress.push(seen);
                }
            }
        }
        out.events = w
            .events()
            .await?
            .into_iter()
            .filter(|(_, object, _)| *object == name)
            .map(|(reason, _, message)| (reason, message))
            .collect();
        if out.event("EvictedByVPA").is_some() {
            out.evicted_after.get_or_insert(start.elapsed());
            out.replacement = w
                .live_pods()
                .await?
                .iter()
                .find(|p| p.metadata.uid != uid)
                .map(|p| {
                    let memory = memory_request(p, false)
                        .map_or("-".to_owned(), |b| format!("{}Mi", b / MI));
                    (p.metadata.name.clone().unwrap_or_default(), memory)
                });
        }
        tokio::time::sleep(POLL).await;
    }
    let tag = format!("pod=\"{}/{name}\"", w.namespace);
    let mut seen = BTreeSet::new();
    for line in vpa.updater_log().lines().filter(|l| l.contains(&tag)) {
        let Some((_, message)) = line.split_once("] ") else {
            continue;
        };
        if message.contains("falling back to eviction") && seen.insert(message.to_owned()) {
            out.fallbacks.push(message.to_owned());
        }
    }
    Ok(out)
}
