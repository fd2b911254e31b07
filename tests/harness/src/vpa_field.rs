//! The field report's walls as the Vertical Pod Autoscaler meets them: a Deployment under a VPA
//! in `InPlaceOrRecreate` mode, a recommendation written in the recommender's place, and the
//! real VPA v1.6.0 updater and admission-controller ([`crate::vpa`]) deciding what to do — resize
//! in place, or evict so that the Deployment's replacement pods start at the new size.
//!
//! One [`Scenario`] per wall ([`Scenario::all`]); [`run`] plays one on fresh hollow nodes and a
//! fresh namespace and reports what VPA and the pods did ([`Outcome`]: VPA's
//! `InPlaceResizedByVPA` / `EvictedByVPA` events, pod UIDs kept or replaced, restarts, final
//! resources and QoS class, the in-place rate, and the time from the recommendation being written
//! to every replica running at it). The e2e suite (`tests/e2e/vpa/updater.rs`) and `make
//! demo-vpa` play them with and without resize-guard installed.
//!
//! VPA v1.6.0 behaviour the scenarios depend on (`k8s.io/autoscaler/vertical-pod-autoscaler`):
//! - An update is attempted at once only when the current request is outside the recommendation's
//!   `[lowerBound, upperBound]` (`pkg/updater/priority/update_priority_calculator.go`, `AddPod`);
//!   otherwise only pods older than 12 h are updated.
//! - `controlledValues: RequestsOnly` caps the recommendation at the container's limit
//!   (`pkg/utils/vpa/capping.go`, `capRecommendationToContainerLimit`): on a Guaranteed pod only a
//!   *decrease* is ever sent, and it is a QoS change (requests below limits).
//! - A resize the API server refuses falls back to eviction in the same loop
//!   (`pkg/updater/logic/updater.go`, "In-place resize failed, falling back to eviction"); a
//!   `PodResizePending` Infeasible pod is evicted at once, a Deferred one after 5 minutes, an
//!   InProgress one after an hour (`pkg/updater/restriction/pods_inplace_restriction.go`,
//!   `CanEvictInPlacingPod`, `DeferredResizeUpdateTimeout`, `InProgressResizeUpdateTimeout`),
//!   timed from the first loop that saw the pod resizing.
//! - At most `int(replicas × 0.5)` pods of a Deployment are disrupted (evicted or resized) per
//!   loop (`pkg/updater/restriction/pods_restriction_factory.go`, `isPodDisruptable`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, PostParams};

use crate::env::Env;
use crate::hollow_node::{HollowNodeConfig, parse_milli};
use crate::objects::{
    POOL_LABEL, allocated_cpu, create_running, deployment, guaranteed_pod, qos_class,
    restart_count, spec_cpu,
};
use crate::vpa::{Recommendation, Vpa, vpa_object, write_recommendation};

/// Which wall a scenario plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wall {
    /// A Guaranteed Deployment under `RequestsOnly` gets a lower recommendation: the resize
    /// would make it Burstable.
    QosChange,
    /// The node is full of lower-priority pods: the resize is Deferred.
    Deferred,
    /// The recommendation is larger than the node.
    Infeasible,
    /// Twenty replicas over four nodes, two of them full of lower-priority pods.
    Many,
}

/// A hollow node of a scenario's pool.
#[derive(Debug, Clone, Copy)]
pub struct PoolNode {
    /// Allocatable cpu.
    pub cpu: &'static str,
    /// Fill what the Deployment leaves free with `low` priority pods.
    pub fill: bool,
}

/// One wall, as data.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Which wall.
    pub wall: Wall,
    /// Short name (namespace prefix, Deployment and VPA name).
    pub name: &'static str,
    /// Deployment replicas.
    pub replicas: i32,
    /// Each replica's cpu (requests = limits: Guaranteed).
    pub cpu: &'static str,
    /// Each replica's memory.
    pub memory: &'static str,
    /// The VPA's `controlledValues: RequestsOnly` (else VPA's default, RequestsAndLimits).
    pub requests_only: bool,
    /// The recommendation's cpu target, lower and upper bound.
    pub target: (&'static str, &'static str, &'static str),
    /// The scenario's nodes (labelled for the Deployment's nodeSelector).
    pub nodes: Vec<PoolNode>,
    /// How long to wait for the outcome.
    pub timeout: Duration,
}

impl Scenario {
    /// The QoS wall: 2 Guaranteed replicas at 500m, `RequestsOnly`, recommendation 250m.
    pub fn qos() -> Scenario {
        Scenario {
            wall: Wall::QosChange,
            name: "qos",
            replicas: 2,
            cpu: "500m",
            memory: "256Mi",
            requests_only: true,
            target: ("250m", "200m", "300m"),
            nodes: vec![PoolNode {
                cpu: "2",
                fill: false,
            }],
            timeout: Duration::from_secs(180),
        }
    }

    /// The Deferred wall: 2 replicas at 300m grow to 500m on a node the rest of which two `low`
    /// pods hold.
    pub fn deferred() -> Scenario {
        Scenario {
            wall: Wall::Deferred,
            name: "deferred",
            replicas: 2,
            cpu: "300m",
            memory: "256Mi",
            requests_only: false,
            target: ("500m", "450m", "550m"),
            nodes: vec![PoolNode {
                cpu: "2",
                fill: true,
            }],
            timeout: Duration::from_secs(540),
        }
    }

    /// The Infeasible wall: 2 replicas at 300m on a 1-cpu node, recommendation 1500m.
    pub fn infeasible() -> Scenario {
        Scenario {
            wall: Wall::Infeasible,
            name: "infeasible",
            replicas: 2,
            cpu: "300m",
            memory: "256Mi",
            requests_only: false,
            target: ("1500m", "1400m", "1600m"),
            nodes: vec![PoolNode {
                cpu: "1",
                fill: false,
            }],
            timeout: Duration::from_secs(180),
        }
    }

    /// Many pods: 20 replicas at 100m grow to 150m over four 2-cpu nodes, two of them filled
    /// with `low` pods once the Deployment runs.
    pub fn many() -> Scenario {
        let roomy = PoolNode {
            cpu: "2",
            fill: false,
        };
        let full = PoolNode {
            cpu: "2",
            fill: true,
        };
        Scenario {
            wall: Wall::Many,
            name: "many",
            replicas: 20,
            cpu: "100m",
            memory: "64Mi",
            requests_only: false,
            target: ("150m", "140m", "160m"),
            nodes: vec![roomy, roomy, full, full],
            timeout: Duration::from_secs(600),
        }
    }

    /// Every wall, in the order the report lists them.
    pub fn all() -> Vec<Scenario> {
        vec![
            Scenario::qos(),
            Scenario::deferred(),
            Scenario::infeasible(),
            Scenario::many(),
        ]
    }

    fn target_milli(&self) -> i128 {
        parse_milli(self.target.0).unwrap_or(0)
    }
}

/// One pod of the Deployment at the end.
#[derive(Debug, Clone)]
pub struct PodRow {
    /// Name.
    pub name: String,
    /// One of the pods that ran before the recommendation (same UID).
    pub original: bool,
    /// `status.phase`.
    pub phase: String,
    /// cpu request and limit in the spec.
    pub cpu: (Option<String>, Option<String>),
    /// The kubelet's allocated cpu.
    pub allocated: Option<String>,
    /// QoS class.
    pub qos: String,
    /// Restarts of container `app`.
    pub restarts: i32,
    /// The scheduler's reason when it cannot place the pod.
    pub unschedulable: Option<String>,
}

/// An Event recorded in the scenario's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Reason.
    pub reason: String,
    /// The object's name.
    pub object: String,
    /// Message.
    pub message: String,
}

/// What VPA and the pods did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario's name.
    pub scenario: &'static str,
    /// The namespace.
    pub namespace: String,
    /// The run's label ("without resize-guard", …).
    pub run: String,
    /// The outcome the scenario waits for was reached before its timeout.
    pub settled: bool,
    /// Pods VPA acted on: resized in place (`InPlaceResizedByVPA`), refused by the API server (its
    /// log's "In-place resize failed") or evicted (`EvictedByVPA`).
    pub attempted: usize,
    /// Original pods running at the target, never restarted.
    pub in_place: usize,
    /// Pods VPA evicted.
    pub evicted: usize,
    /// Pods preempted (`Preempted` events: by kube-scheduler for a replacement, or by
    /// resize-guard for a resize).
    pub victims: usize,
    /// From the recommendation written to every replica running at the target.
    pub applied_after: Option<Duration>,
    /// From the recommendation written to the first eviction seen.
    pub first_eviction_after: Option<Duration>,
    /// The Deployment's live pods at the end.
    pub pods: Vec<PodRow>,
    /// Events of interest (VPA's, resize-guard's, the scheduler's preemptions).
    pub events: Vec<EventRow>,
    /// The updater's log messages about the original pods when it fell back to eviction.
    pub fallbacks: Vec<String>,
}

impl Outcome {
    /// In-place resizes per pod VPA acted on.
    pub fn in_place_rate(&self) -> f64 {
        if self.attempted == 0 {
            0.0
        } else {
            self.in_place as f64 / self.attempted as f64
        }
    }

    /// Events with `reason`.
    pub fn events_with(&self, reason: &str) -> Vec<&EventRow> {
        self.events.iter().filter(|e| e.reason == reason).collect()
    }

    /// Reads the namespace's Events again until `objects` objects have one with `reason`, for
    /// 30 s at most, and keeps the last reading: an Event trails what it reports (the programs
    /// post theirs off the request path), so a count read the moment the pods settled can miss
    /// the last one. The caller asserts the count on what this leaves.
    pub async fn await_events(
        &mut self,
        env: &Env,
        reason: &str,
        objects: usize,
    ) -> anyhow::Result<()> {
        let enough = |events: &[EventRow]| acted_on(events, &[reason]).len() >= objects;
        if !enough(&self.events) {
            let api: Api<Event> = Api::namespaced(env.client().await, &self.namespace);
            let events = std::mem::take(&mut self.events);
            self.events = reread_events(&api, events, |_, now| enough(now)).await?;
        }
        Ok(())
    }

    /// One table row: scenario, run, in place/attempted, evicted, victims, time to applied.
    pub fn row(&self) -> String {
        let applied = self.applied_after.map_or_else(
            || "never".to_owned(),
            |d| format!("{:.0} s", d.as_secs_f64()),
        );
        format!(
            "{:<11} {:<26} {:>3}/{:<3} ({:>3.0}%) {:>8} {:>8} {:>10}",
            self.scenario,
            self.run,
            self.in_place,
            self.attempted,
            100.0 * self.in_place_rate(),
            self.evicted,
            self.victims,
            applied
        )
    }

    /// The header of [`Outcome::row`].
    pub fn header() -> String {
        format!(
            "{:<11} {:<26} {:>16} {:>8} {:>8} {:>10}",
            "scenario", "run", "in place/VPA", "evicted", "victims", "applied"
        )
    }
}

/// Events whose reasons say what VPA, resize-guard and the scheduler did.
const REASONS: [&str; 10] = [
    "InPlaceResizedByVPA",
    "EvictedByVPA",
    "ResizeRejected",
    "ResizeRepaired",
    "PreemptingForResize",
    "ResizePreemptionFailed",
    "NoVictims",
    "NeverFits",
    "Preempted",
    "FailedScheduling",
];

/// Plays `scenario` on fresh nodes in a fresh namespace; `run` labels the outcome.
pub async fn run(env: &Env, vpa: &Vpa, scenario: &Scenario, run: &str) -> anyhow::Result<Outcome> {
    let ns = env.namespace(&format!("vpa-{}", scenario.name)).await;
    let client = env.client().await;
    let nodes = add_pool(env, scenario, &ns).await?;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments
        .create(
            &PostParams::default(),
            &deployment(
                scenario.name,
                scenario.replicas,
                "high",
                scenario.cpu,
                scenario.memory,
                &ns,
            ),
        )
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = ListParams::default().labels(&format!("app={}", scenario.name));
    let started = wait_replicas_running(&pods, &selector, scenario.replicas).await?;
    let original: BTreeSet<String> = started
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    for node in nodes.iter().filter(|(_, fill)| *fill).map(|(n, _)| n) {
        fill(env, &pods, node).await?;
    }

    let vpas = crate::vpa::api(&client, &ns);
    let object = vpa_object(
        scenario.name,
        scenario.name,
        "InPlaceOrRecreate",
        scenario.requests_only.then_some("RequestsOnly"),
    );
    vpas.create(&PostParams::default(), &serde_json::from_value(object)?)
        .await?;
    let (target, lower, upper) = scenario.target;
    write_recommendation(
        &client,
        &ns,
        scenario.name,
        &[Recommendation {
            container: "app".into(),
            target: (target.into(), scenario.memory.into()),
            lower_bound: (lower.into(), scenario.memory.into()),
            upper_bound: (upper.into(), scenario.memory.into()),
        }],
    )
    .await?;
    let written = Instant::now();

    let events_api: Api<Event> = Api::namespaced(client.clone(), &ns);
    let deadline = written + scenario.timeout;
    let mut applied_after = None;
    let mut first_eviction_after = None;
    let (mut live, mut events) = (Vec::new(), Vec::new());
    let mut settled = false;
    while Instant::now() < deadline {
        live = pods
            .list(&selector)
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect::<Vec<_>>();
        events = interesting_events(&events_api).await?;
        let evicted = acted_on(&events, &["EvictedByVPA"]).len();
        if evicted > 0 && first_eviction_after.is_none() {
            first_eviction_after = Some(written.elapsed());
        }
        let at_target = live
            .iter()
            .filter(|p| at_target(p, scenario.target_milli()))
            .count();
        if applied_after.is_none() && at_target == scenario.replicas as usize {
            applied_after = Some(written.elapsed());
        }
        settled = match scenario.wall {
            Wall::Infeasible => evicted > 0 && live.iter().any(|p| unschedulable(p).is_some()),
            _ => applied_after.is_some(),
        };
        if settled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if settled {
        events = trailing_events(&events_api, events, &live, &original, scenario).await?;
    }

    let rows: Vec<PodRow> = live
        .iter()
        .map(|p| PodRow {
            name: p.metadata.name.clone().unwrap_or_default(),
            original: p
                .metadata
                .uid
                .as_ref()
                .is_some_and(|u| original.contains(u)),
            phase: p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
            cpu: spec_cpu(p),
            allocated: allocated_cpu(p),
            qos: qos_class(p),
            restarts: restart_count(p),
            unschedulable: unschedulable(p),
        })
        .collect();
    let in_place = live
        .iter()
        .filter(|p| resized_original(p, &original, scenario) && restart_count(p) == 0)
        .count();
    // The updater's own account of each original pod: its refused in-place resizes and its
    // fall-backs to eviction (first line per pod and message; it logs some several times a loop).
    let log = vpa.updater_log();
    let mut fallbacks: Vec<String> = Vec::new();
    let mut refused = BTreeSet::new();
    for p in &started {
        let name = p.metadata.name.clone().unwrap_or_default();
        let tag = format!("pod=\"{ns}/{name}\"");
        let mut seen = BTreeSet::new();
        for line in log.lines().filter(|l| l.contains(&tag)) {
            let Some(message) = line.split_once("] ").map(|(_, m)| m) else {
                continue;
            };
            if !message.contains("falling back to eviction") || message.contains("not falling back")
            {
                continue;
            }
            if message.starts_with("\"In-place resize failed") {
                refused.insert(name.clone());
            }
            if seen.insert(message.to_owned()) {
                fallbacks.push(message.to_owned());
            }
        }
    }
    let mut attempted: BTreeSet<String> =
        acted_on(&events, &["InPlaceResizedByVPA", "EvictedByVPA"])
            .into_keys()
            .map(str::to_owned)
            .collect();
    attempted.extend(refused);
    Ok(Outcome {
        scenario: scenario.name,
        namespace: ns,
        run: run.to_owned(),
        settled,
        attempted: attempted.len(),
        in_place,
        evicted: acted_on(&events, &["EvictedByVPA"]).len(),
        victims: acted_on(&events, &["Preempted"]).len(),
        applied_after,
        first_eviction_after,
        pods: rows,
        events,
        fallbacks,
    })
}

/// Starts the scenario's hollow nodes (concurrently) labelled for the namespace's pool.
async fn add_pool(env: &Env, scenario: &Scenario, ns: &str) -> anyhow::Result<Vec<(String, bool)>> {
    let mut configs = Vec::new();
    for node in &scenario.nodes {
        let cfg = HollowNodeConfig::with_allocatable(&env.unique(scenario.name), node.cpu, "8Gi")?
            .label(POOL_LABEL, ns);
        configs.push((cfg, node.fill));
    }
    let names = configs
        .iter()
        .map(|(c, fill)| (c.name.clone(), *fill))
        .collect();
    futures::future::join_all(configs.into_iter().map(|(c, _)| env.add_node(c))).await;
    Ok(names)
}

/// Waits until `replicas` pods of the Deployment run (the scheduler placed them, their kubelets
/// started them).
async fn wait_replicas_running(
    pods: &Api<Pod>,
    selector: &ListParams,
    replicas: i32,
) -> anyhow::Result<Vec<Pod>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut running = Vec::new();
    while Instant::now() < deadline {
        running = pods
            .list(selector)
            .await?
            .items
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        if running.len() == replicas as usize {
            return Ok(running);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    anyhow::bail!(
        "{} of {replicas} replicas running after 120 s",
        running.len()
    )
}

/// Fills what is left of `node`'s allocatable cpu with two `low` Guaranteed pods.
async fn fill(env: &Env, pods: &Api<Pod>, node: &str) -> anyhow::Result<()> {
    let client = env.client().await;
    let n = Api::<Node>::all(client.clone()).get(node).await?;
    let allocatable = n
        .status
        .and_then(|s| s.allocatable)
        .and_then(|a| a.get("cpu").map(|q| q.0.clone()))
        .unwrap_or_default();
    let mut free = parse_milli(&allocatable)?;
    let on_node = Api::<Pod>::all(client)
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    for p in on_node.items {
        let phase = p.status.as_ref().and_then(|s| s.phase.clone());
        if matches!(phase.as_deref(), Some("Succeeded" | "Failed")) {
            continue;
        }
        if let Some(cpu) = spec_cpu(&p).0 {
            free -= parse_milli(&cpu)?;
        }
    }
    let half = free / 2;
    for (i, cpu) in [half, free - half].into_iter().enumerate() {
        if cpu > 0 {
            let name = format!("filler-{node}-{i}");
            create_running(
                pods,
                &guaranteed_pod(&name, node, "low", &format!("{cpu}m"), "64Mi"),
            )
            .await?;
        }
    }
    Ok(())
}

fn at_target(p: &Pod, target_milli: i128) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && allocated_cpu(p)
            .and_then(|c| parse_milli(&c).ok())
            .is_some_and(|c| c == target_milli)
}

/// The scheduler's message when it reports the pod unschedulable.
fn unschedulable(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| c.message.clone().unwrap_or_default())
}

/// Whether `pod` is one of the scenario's original pods (its UID in `original`) at the target.
fn resized_original(pod: &Pod, original: &BTreeSet<String>, scenario: &Scenario) -> bool {
    pod.metadata
        .uid
        .as_ref()
        .is_some_and(|u| original.contains(u))
        && at_target(pod, scenario.target_milli())
}

/// The namespace's Events once they account for what `live` shows. An Event trails what it
/// reports (each recorder writes its own, some after the change they name), so the pods can
/// settle before the Events do: read them again until every original pod resized in place has
/// VPA's `InPlaceResizedByVPA` and two readings a second apart agree (30 s at most).
async fn trailing_events(
    api: &Api<Event>,
    events: Vec<EventRow>,
    live: &[Pod],
    original: &BTreeSet<String>,
    scenario: &Scenario,
) -> anyhow::Result<Vec<EventRow>> {
    let resized: Vec<&str> = live
        .iter()
        .filter(|p| resized_original(p, original, scenario))
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    reread_events(api, events, |before, now| {
        let told = acted_on(now, &["InPlaceResizedByVPA"]);
        resized.iter().all(|name| told.contains_key(name)) && before == now
    })
    .await
}

/// Reads the namespace's Events again each second until `done(previous reading, this one)` holds,
/// for 30 s at most; the last reading either way.
async fn reread_events(
    api: &Api<Event>,
    mut events: Vec<EventRow>,
    done: impl Fn(&[EventRow], &[EventRow]) -> bool,
) -> anyhow::Result<Vec<EventRow>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let again = interesting_events(api).await?;
        let stop = done(&events, &again) || Instant::now() >= deadline;
        events = again;
        if stop {
            return Ok(events);
        }
    }
}

async fn interesting_events(api: &Api<Event>) -> anyhow::Result<Vec<EventRow>> {
    let mut out: Vec<EventRow> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| REASONS.contains(&e.reason.as_deref().unwrap_or_default()))
        .map(|e| EventRow {
            reason: e.reason.unwrap_or_default(),
            object: e.involved_object.name.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
        })
        .collect();
    out.sort_by(|a, b| (&a.reason, &a.object).cmp(&(&b.reason, &b.object)));
    Ok(out)
}

/// Distinct objects with an event of one of `reasons`.
fn acted_on<'a>(events: &'a [EventRow], reasons: &[&str]) -> BTreeMap<&'a str, usize> {
    let mut out = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| reasons.contains(&e.reason.as_str()))
    {
        *out.entry(e.object.as_str()).or_insert(0) += 1;
    }
    out
}
