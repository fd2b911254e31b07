//! One role's measurement, run in a child process of its own so that each role's memory is
//! its own: start the real `ClusterView` on the fake API server, time it to ready, read
//! `VmRSS`/`VmHWM` at ready and after a settle, then time what the role does on the hot path.
//!
//! - `webhook`: `keep_pods = false` (the webhook's configuration); ledger builds on nodes never
//!   asked before and their cached second call; `review()` (mutating and validating) on
//!   `pods/resize` bodies that fit or are Deferred on a busy node.
//! - `controller`: `keep_pods = true` and `keep_pod_if = concerns_controller` with a
//!   `pod_events()` receiver draining from the start (the controller's configuration in
//!   `controller/src/run.rs`); the reconciler's decision on Deferred pods of busy nodes:
//!   `view.policy()`, `view.budgets()`, `view.ledger()` and `assess`, as `reconcile.rs` does
//!   (and the same without PodDisruptionBudgets, to show their share).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use resize_guard_bench::{Lcg, percentile, us};
use resize_guard_cluster::view::InitialList;
use resize_guard_cluster::{Cluster, ClusterView, ViewConfig};
use resize_guard_policy::pod::node_name;
use resize_guard_policy::{Context, assess};
use resize_guard_runtime::Events;
use resize_guard_webhook::incoming::Incoming;
use resize_guard_webhook::review::{Stage, decode, review};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::apiserver::{self, FakeApi, ListMode, Stats};
use super::objects::resize_review;
use super::world::{PENDING_GROWTH_MILLI, World};

/// resize-guard's namespace and policy ConfigMap in the fake cluster.
const NAMESPACE: &str = "resize-guard";
const CONFIGMAP: &str = "resize-guard";
/// How long to wait after ready before reading memory again.
const SETTLE: Duration = Duration::from_secs(3);
/// Longest wait for the view to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(900);

/// Which program's configuration of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `keep_pods = false`.
    Webhook,
    /// `keep_pods = true`, pod events drained.
    Controller,
}

impl Role {
    /// The role's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Webhook => "webhook",
            Role::Controller => "controller",
        }
    }

    /// The role named `s`.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "webhook" => Some(Role::Webhook),
            "controller" => Some(Role::Controller),
            _ => None,
        }
    }
}

/// `VmRSS`, `VmHWM` and `RssAnon` of this process, KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mem {
    /// Resident now.
    pub rss: u64,
    /// Resident at most so far.
    pub hwm: u64,
    /// Anonymous resident memory (the heap, mostly).
    pub anon: u64,
}

impl Mem {
    /// Reads `/proc/self/status`.
    pub fn now() -> Mem {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |field: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        Mem {
            rss: kib("VmRSS"),
            hwm: kib("VmHWM"),
            anon: kib("RssAnon"),
        }
    }

    fn json(self) -> Value {
        json!({"rss_kib": self.rss, "hwm_kib": self.hwm, "anon_kib": self.anon})
    }
}

/// Runs `role` on a world of `nodes` nodes and `pods` pods; the result as JSON.
pub fn run(role: Role, nodes: usize, pods: usize, mode: ListMode) -> Value {
    // The programs' runtime: `resize_guard_runtime::process::block_on` builds the default
    // multi-threaded one.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(measure(role, nodes, pods, mode));
    runtime.shutdown_background();
    result
}

async fn measure(role: Role, nodes: usize, pods: usize, mode: ListMode) -> Value {
    let world = Arc::new(World::new(nodes, pods));
    let stats = Arc::new(Stats::default());
    let client = apiserver::client(Arc::new(FakeApi {
        world: world.clone(),
        stats: stats.clone(),
        namespace: NAMESPACE.into(),
        configmap: CONFIGMAP.into(),
        mode,
    }));
    let events = Events::start(
        client.clone(),
        Reporter {
            controller: "resize-guard-scale".into(),
            instance: None,
        },
    );
    let watch_errors = Arc::new(AtomicU64::new(0));
    let mut config = ViewConfig::new(NAMESPACE, CONFIGMAP, events);
    if role == Role::Controller {
        // As `controller/src/run.rs` configures its view.
        config.keep_pods = true;
        config.keep_pod_if = resize_guard_controller::preemption::reconcile::concerns_controller;
    }
    config.initial_list = initial_list();
    config.on_watch_error = {
        let errors = watch_errors.clone();
        Arc::new(move |w| {
            errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("scale: watch error on {}", w.as_str());
        })
    };

    let baseline = Mem::now();
    let cpu_before = cpu_time();
    let started = Instant::now();
    let view = ClusterView::start(client, config);
    let received = Arc::new(AtomicU64::new(0));
    let lagged = Arc::new(AtomicU64::new(0));
    if role == Role::Controller {
        let mut rx = view.pod_events();
        let (received, lagged) = (received.clone(), lagged.clone());
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(_) => received.fetch_add(1, Ordering::Relaxed),
                    Err(RecvError::Lagged(n)) => lagged.fetch_add(n, Ordering::Relaxed),
                    Err(RecvError::Closed) => break,
                };
            }
        });
    }
    while !view.is_ready() {
        assert!(
            started.elapsed() < READY_TIMEOUT,
            "not ready after {READY_TIMEOUT:?}: {:?}",
            view.readiness()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ready_at = Instant::now();
    let cpu_to_ready = cpu_time().saturating_sub(cpu_before);
    let ready = Mem::now();
    let last_page = stats.last_pod_page.lock().ok().and_then(|l| *l);
    tokio::time::sleep(SETTLE).await;
    let settled = Mem::now();

    let work = match role {
        Role::Webhook => webhook_work(&world, &view),
        Role::Controller => controller_work(&world, &view),
    };
    let per_pod = (settled.rss.saturating_sub(baseline.rss) * 1024) / pods.max(1) as u64;
    json!({
        "role": role.as_str(),
        "nodes": world.nodes,
        "pods": world.pods,
        "pdbs": world.pdb_replica_sets().len(),
        "busy_nodes": world.busy_nodes,
        "pending_pods": world.pending_pods().count(),
        "list_mode": format!("{mode:?}"),
        "initial_list": format!("{:?}", initial_list()),
        "ready_s": secs(ready_at - started),
        "cpu_to_ready_s": secs(cpu_to_ready),
        "ready_after_last_pod_page_s": last_page.map(|t| secs(ready_at.saturating_duration_since(t))),
        "mem_baseline": baseline.json(),
        "mem_ready": ready.json(),
        "mem_settled": settled.json(),
        "bytes_per_pod": per_pod,
        "server": {
            "render_s": stats.render_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            "bytes": stats.bytes.load(Ordering::Relaxed),
            "lists": stats.lists.load(Ordering::Relaxed),
            "watches": stats.watches.load(Ordering::Relaxed),
            "unknown": stats.unknown.load(Ordering::Relaxed),
            "first_pod_list": stats.first_pod_list.lock().ok().and_then(|q| q.clone()),
        },
        "watch_errors": watch_errors.load(Ordering::Relaxed),
        "pod_events": {"received": received.load(Ordering::Relaxed), "lagged": lagged.load(Ordering::Relaxed)},
        "work": work,
    })
}

/// How the pod and node watches list: `RESIZE_GUARD_SCALE_INITIAL=paged` or `streaming` (the
/// programs' default).
pub fn initial_list() -> InitialList {
    match std::env::var("RESIZE_GUARD_SCALE_INITIAL").as_deref() {
        Ok("paged") => InitialList::Paged,
        Ok("streaming") | Err(_) => InitialList::Streaming,
        Ok(other) => panic!("RESIZE_GUARD_SCALE_INITIAL={other:?}: streaming or paged"),
    }
}

/// CPU time (user + system) this process has used, from `/proc/self/stat` (100 Hz ticks).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e3).round() / 1e3
}

fn stats(mut samples: Vec<Duration>) -> Value {
    samples.sort();
    json!({
        "p50_us": us(percentile(&samples, 0.5)),
        "p99_us": us(percentile(&samples, 0.99)),
        "n": samples.len(),
    })
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let out = std::hint::black_box(f());
    (out, t.elapsed())
}

/// Ledger builds, budgets and reviews, as the webhook serves them.
fn webhook_work(world: &World, view: &ClusterView) -> Value {
    // Every busy node and enough others for 1,000 in all, in an order that mixes them.
    let others = world.nodes - world.busy_nodes;
    let want_others = 1_000usize.saturating_sub(world.busy_nodes).min(others);
    let mut nodes: Vec<usize> = (0..world.busy_nodes)
        .chain((0..want_others).map(|k| world.busy_nodes + k * others / want_others.max(1)))
        .collect();
    let mut rng = Lcg(7);
    for i in (1..nodes.len()).rev() {
        nodes.swap(i, rng.next(i as u64 + 1) as usize);
    }
    let (mut build, mut build_busy, mut cached) = (vec![], vec![], vec![]);
    let mut entries = 0;
    for &n in &nodes {
        let name = world.node_name(n);
        let (ledger, t) = timed(|| view.ledger(&name));
        let ledger = ledger.expect("every node is in the view");
        entries += ledger.pods.len();
        build.push(t);
        if world.is_busy(n) {
            build_busy.push(t);
        }
        cached.push(timed(|| view.ledger(&name)).1);
    }
    let budgets: Vec<Duration> = (0..200).map(|_| timed(|| view.budgets()).1).collect();

    // Reviews: half fit on an ordinary node (+100m), half grow by 600m on a busy node, where
    // only preemption (if any victim is of lower priority) makes room.
    let mut picks = vec![];
    let mut rng = Lcg(11);
    while picks.len() < 2_050 {
        let p = world.place(rng.next(world.pods as u64) as usize);
        let want_busy = picks.len() % 2 == 1;
        if p.busy == want_busy && !p.pending {
            picks.push((p, if p.busy { 600 } else { 100 }));
        }
    }
    let (mut mutate, mut validate) = (vec![], vec![]);
    let (mut decode_lean, mut decode_whole) = (vec![], vec![]);
    let mut decisions: BTreeMap<String, u64> = BTreeMap::new();
    let mut examples: BTreeMap<String, Value> = BTreeMap::new();
    let mut body_bytes = 0;
    for (k, (place, grow)) in picks.into_iter().enumerate() {
        let body = resize_review(world, place, grow, k);
        let (m, tm) = timed(|| review(Stage::Mutate, &body, view));
        let (v, tv) = timed(|| review(Stage::Validate, &body, view));
        // What decoding the body alone costs: lean, as `review` decodes it, and whole (both
        // k8s-openapi pods, as it decoded them before `resize_guard_cluster::lean`).
        let (_, td) = timed(|| decode(Stage::Mutate, &body).is_ok());
        let (_, tw) = timed(|| {
            serde_json::from_slice::<Incoming<k8s_openapi::api::core::v1::Pod>>(&body)
                .map(|r| r.request.is_some())
        });
        let (m, v) = (m.expect("mutate review"), v.expect("validate review"));
        // The first 50 warm up (allocator, lazily built statics).
        if k >= 50 {
            mutate.push(tm);
            validate.push(tv);
            decode_lean.push(td);
            decode_whole.push(tw);
            body_bytes += body.len();
            *decisions
                .entry(format!("{}/{}", m.decision, v.decision))
                .or_default() += 1;
        }
        examples.entry(v.decision.clone()).or_insert_with(|| {
            let resp = v.review.response.as_ref();
            json!({"message": resp.map(|r| r.result.message.clone()), "warnings": resp.map(|r| r.warnings.clone())})
        });
    }
    let n = mutate.len().max(1);
    json!({
        "ledger_build": stats(build),
        "ledger_build_busy": stats(build_busy),
        "ledger_cached": stats(cached),
        "ledger_entries": entries,
        "budgets": stats(budgets),
        "review_mutate": stats(mutate),
        "review_validate": stats(validate),
        "review_decode_lean_mb_s": mb_per_s(body_bytes, &decode_lean),
        "review_decode_whole_mb_s": mb_per_s(body_bytes, &decode_whole),
        "review_decode_lean": stats(decode_lean),
        "review_decode_whole": stats(decode_whole),
        "review_body_bytes_avg": body_bytes / n,
        "list_decode": list_decode(world),
        "review_decisions_mutate_validate": decisions,
        "review_examples": examples,
        "budgets_len": view.budgets().len(),
    })
}

/// Decoding throughput (MB of JSON per second of decoding) of `bytes` decoded in `times`.
fn mb_per_s(bytes: usize, times: &[Duration]) -> f64 {
    let total: f64 = times.iter().map(Duration::as_secs_f64).sum();
    (bytes as f64 / 1e6 / total.max(1e-9) * 10.0).round() / 10.0
}

/// How fast a page of the world's pods decodes, lean (what the view's pod watch does) and whole
/// then trimmed (what it did before `resize_guard_cluster::lean`): the list's share of start-up.
fn list_decode(world: &World) -> Value {
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::ObjectList;
    use resize_guard_cluster::lean::LeanPod;

    let count = world.pods.min(2_000);
    let mut body =
        br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#
            .to_vec();
    let mut r = super::objects::Renderer::default();
    for i in 0..count {
        if i > 0 {
            body.push(b',');
        }
        r.render(world, super::objects::Kind::Pods, i, &mut body, false);
    }
    body.extend_from_slice(b"]}");
    let (mut lean, mut whole) = (vec![], vec![]);
    for _ in 0..5 {
        lean.push(
            timed(|| serde_json::from_slice::<ObjectList<LeanPod>>(&body).map(|l| l.items.len())).1,
        );
        whole.push(
            timed(|| {
                serde_json::from_slice::<ObjectList<Pod>>(&body).map(|l| {
                    let mut items = l.items;
                    items
                        .iter_mut()
                        .for_each(resize_guard_cluster::trim::trim_pod);
                    items.len()
                })
            })
            .1,
        );
    }
    let best = |t: &[Duration]| t.iter().min().copied().unwrap_or_default();
    json!({
        "pods": count,
        "bytes": body.len(),
        "lean_mb_s": mb_per_s(body.len(), &[best(&lean)]),
        "whole_then_trimmed_mb_s": mb_per_s(body.len(), &[best(&whole)]),
    })
}

/// The reconciler's decision on the Deferred pods of busy nodes.
fn controller_work(world: &World, view: &ClusterView) -> Value {
    let store = view.pod_store().expect("keep_pods gives a pod store");
    let stored = store.state().len();
    let pending: Vec<_> = world
        .pending_pods()
        .filter_map(|p| {
            let rs = world.replica_set(p.rs);
            let name = world.pod_name(rs, p.index);
            store.get(&ObjectRef::new(&name).within(&rs.namespace))
        })
        .collect();
    assert!(!pending.is_empty(), "no pending pod in the store");
    let mut samples = vec![];
    let mut verdicts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut examples: BTreeMap<&'static str, String> = BTreeMap::new();
    let rounds = 2_000usize.div_ceil(pending.len()).max(2);
    for round in 0..rounds {
        for pod in &pending {
            let (verdict, t) = timed(|| {
                let policy = view
                    .policy()
                    .expect("the bench's policy ConfigMap is in force");
                let budgets = view.budgets();
                let ledger = node_name(pod).and_then(|n| view.ledger(n));
                assess(
                    pod,
                    &Context {
                        ledger: ledger.as_deref(),
                        budgets: &budgets,
                        policy: &policy,
                        install_namespace: view.install_namespace(),
                        minor: None,
                    },
                )
            });
            // The first round builds each busy node's ledger once (the view caches it).
            if round > 0 {
                samples.push(t);
                *verdicts.entry(verdict.label()).or_default() += 1;
            }
            examples
                .entry(verdict.label())
                .or_insert_with(|| verdict.message());
        }
    }
    // The same decisions with no PodDisruptionBudget at all: the share of checking budgets.
    let no_budgets = resize_guard_policy::budget::Budgets::default();
    let mut without_pdbs = vec![];
    for pod in pending.iter().cycle().take(samples.len()) {
        without_pdbs.push(
            timed(|| {
                let policy = view
                    .policy()
                    .expect("the bench's policy ConfigMap is in force");
                let ledger = node_name(pod).and_then(|n| view.ledger(n));
                assess(
                    pod,
                    &Context {
                        ledger: ledger.as_deref(),
                        budgets: &no_budgets,
                        policy: &policy,
                        install_namespace: view.install_namespace(),
                        minor: None,
                    },
                )
            })
            .1,
        );
    }
    let budgets: Vec<Duration> = (0..200).map(|_| timed(|| view.budgets()).1).collect();
    json!({
        "stored_pods": stored,
        "pending_in_store": pending.len(),
        "growth_milli": PENDING_GROWTH_MILLI,
        "decision": stats(samples),
        "decision_without_pdbs": stats(without_pdbs),
        "budgets": stats(budgets),
        "verdicts": verdicts,
        "examples": examples,
        "budgets_len": view.budgets().len(),
    })
}
