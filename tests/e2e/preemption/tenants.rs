//! The brakes per tenant and across leaders, read back from kube-apiserver's audit log, on
//! hollow nodes (upstream's v1.37.2 kubelet):
//! - a leader killed in the middle of a flood of Deferred resizes: the replica that takes over
//!   starts from the counts the dead one persisted (ConfigMap `resize-guard-brakes`), its
//!   reserve charged, instead of with a full bucket;
//! - one namespace spending its eviction budget (`maxEvictionsPerNamespacePerMinute`) leaves
//!   the cluster's rate to the others: another namespace's plan acts while the first one's
//!   plans are held (`held_namespace_rate`, `PreemptionHeld` Events naming the budget);
//! - with a third namespace in `namespaces.exclude`, neither tenant's plans touch it, nor
//!   kube-system, nor the install namespace, and every held or refused plan says which rule.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;
use crate::scenario::run_guaranteed;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use resize_guard_harness::audit::Eviction;
use resize_guard_harness::env::{Env, alone};
use resize_guard_harness::objects::*;

/// One test at a time: they share the Lease and the policy.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every eviction kube-apiserver granted in `namespaces`, in order.
pub(super) fn evictions(env: &Env, namespaces: &[&str]) -> Vec<Eviction> {
    resize_guard_harness::audit::evictions(&env.cp, namespaces, 201)
}

/// Polls the audit log until `n` evictions in `namespaces` were granted.
pub(super) async fn wait_evictions(
    env: &Env,
    namespaces: &[&str],
    n: usize,
    timeout: Duration,
) -> Vec<Eviction> {
    let deadline = Instant::now() + timeout;
    loop {
        let got = evictions(env, namespaces);
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} evictions after {timeout:?}: {got:?}",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node of exactly `apps` high-priority 100m pods and `victims` low-priority 300m pods (owned,
/// so they may be victims), with no room to spare.
pub(super) async fn full_node(
    env: &Env,
    pods: &Api<Pod>,
    prefix: &str,
    apps: u32,
    victims: u32,
) -> String {
    let cpu = format!("{}m", apps * 100 + victims * 300);
    let node = env.node(prefix, &cpu, "8Gi").await;
    for v in 0..victims {
        let p = guaranteed_pod(&format!("{prefix}-v{v}"), &node, "low", "300m", "64Mi");
        create_running(pods, &p).await.unwrap();
    }
    for a in 0..apps {
        let p = guaranteed_pod(&format!("{prefix}-app{a}"), &node, "high", "100m", "64Mi");
        create_running(pods, &p).await.unwrap();
    }
    node
}

/// Waits until `name` has `cpu` allocated and nothing pending.
pub(super) async fn wait_resized(pods: &Api<Pod>, name: &str, cpu: &str, timeout: Duration) {
    wait_pod(pods, name, timeout, |p| {
        allocated_cpu(p).as_deref() == Some(cpu) && resize_pending(p).is_none()
    })
    .await
    .unwrap();
}

/// A line of a replica's `/metrics`.
pub(super) async fn metrics(c: &support::Controller) -> String {
    resize_guard_harness::install::http_get(c.health_port, "/metrics")
        .await
        .unwrap()
}

/// Waits (60 s) until an Event `reason` in `ns` passes `says` (object, message, reporter) and
/// returns its message; panics with the Events, the evictions in `ns`, and replica `c`'s metrics
/// and log.
pub(super) async fn wait_event_saying(
    env: &Env,
    c: &support::Controller,
    ns: &str,
    reason: &str,
    says: impl Fn(&(String, String, String)) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = support::events(env, ns, reason).await;
        if let Some(e) = seen.iter().find(|e| says(e)) {
            return e.1.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no such {reason} Event in {ns}: {seen:?}\n{:#?}\n{}\n{}",
            evictions(env, &[ns]),
            metrics(c).await,
            c.process.log_tail(20_000)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the brakes' persisted counts (ConfigMap `resize-guard-brakes`) before a test starts
/// its replicas, so they begin as on a fresh install whatever ran before: an earlier test's
/// leader leaves a document declaring a reserve, which starts every bucket empty
/// (`controller/src/preemption/brakes/persisted.rs`), and how long that takes to refill would
/// then depend on which test ran first and on its policy.
pub(super) async fn fresh_brakes(env: &Env) {
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "resize-guard");
    match cms.delete("resize-guard-brakes", &Default::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("deleting ConfigMap resize-guard-brakes: {e}"),
    }
}

/// Back to the shipped policy (and its RBAC) for the next test.
pub(super) async fn reset_policy(env: &Env) {
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "resize-guard");
    cms.delete("resize-guard", &Default::default())
        .await
        .unwrap();
    resize_guard_harness::install::apply_rbac(env).await;
}

/// Three nodes, each with one Deferred resize needing one victim, and a bucket of one token
/// refilling every 20 s (`maxEvictionsPerMinute: 3`, `maxVictimsPerResize: 1`). The leader is
/// killed (SIGKILL: no goodbye, no Lease release) right after its first eviction; the follower
/// takes the Lease within about 6 s. Read from the audit log, every eviction — whichever replica
/// sent it — keeps to the one bucket: the follower's first eviction comes a refill after the dead
/// leader's, not at once as a full bucket would let it.
#[tokio::test]
async fn a_leader_killed_mid_flood_leaves_its_eviction_bucket_to_the_next() {
    let (env, _alone) = alone(&SERIAL).await;
    fresh_brakes(env).await;
    let a = support::start(env, "brakes-a").await;
    let b = support::start(env, "brakes-b").await;
    // (Set after the start: installing resets the policy.)
    resize_guard_harness::install::set_policy(
        env,
        "mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: 1\n  maxEvictionsPerMinute: 3\n  maxEvictionsPerNamespacePerMinute: 60\n",
    )
    .await;
    for c in [&a, &b] {
        c.wait_policy(|p| p.contains("maxEvictionsPerMinute: 3"))
            .await;
    }
    let (leader, follower) = loop {
        match (a.is_leader().await, b.is_leader().await) {
            (true, false) => break (&a, &b),
            (false, true) => break (&b, &a),
            (true, true) => panic!("two leaders"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };

    let ns = env.namespace("failover-flood").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let mut apps = Vec::new();
    for n in 0..3 {
        full_node(env, &pods, &format!("ff{n}"), 1, 1).await;
        apps.push(format!("ff{n}-app0"));
    }
    support::resize_all(&pods, &apps, "200m").await;
    let first = wait_evictions(env, &[&ns], 1, Duration::from_secs(30)).await;
    std::process::Command::new("kill")
        .args(["-KILL", &leader.process.pid().to_string()])
        .status()
        .unwrap();
    assert!(
        follower.leads_within(400).await,
        "the follower never took over"
    );
    for app in &apps {
        wait_resized(&pods, app, "200m", Duration::from_secs(150)).await;
    }

    let all = evictions(env, &[&ns]);
    eprintln!("evictions across the failover: {all:#?}");
    let by = |c: &support::Controller| {
        let agent = format!("({})", c.identity);
        all.iter().filter(|e| e.agent.contains(&agent)).count()
    };
    assert!(
        by(leader) >= 1 && by(follower) >= 1 && all.len() == 3,
        "both leaders evicted: {all:?}"
    );
    assert!(first[0].agent.contains(&format!("({})", leader.identity)));
    // One bucket of 1 refilling 3 a minute: in any stretch of w seconds at most 1 + 3·(w+1)/60
    // (1 s for the moment between a plan's admission and its request).
    for i in 0..all.len() {
        for j in i + 1..all.len() {
            let w = all[j].at - all[i].at;
            let count = (j - i + 1) as f64;
            assert!(
                count <= 1.0 + 3.0 * (w + 1.0) / 60.0,
                "{count} evictions within {w:.1}s: {all:?}"
            );
        }
    }
    let m = metrics(follower).await;
    assert!(
        m.contains("resize_guard_brakes_state_loads_total{result=\"restored\"} 1"),
        "the follower read the dead leader's counts: {m}"
    );
    drop(a);
    drop(b);
    reset_policy(env).await;
}

/// Tenant A: four nodes with a Deferred resize each, each needing one victim; tenant B: one node
/// whose resize needs three victims at once. Plans of up to 3, the cluster's rate 30 a minute (a
/// token every 2 s), a namespace's 3 (a token every 20 s). A spends its budget on its first three
/// victims; B's resize, made then, needs the cluster's whole bucket (3), which refills in 6 s.
/// Before, A's fourth plan took the cluster's first token back and B's plan waited behind it;
/// now A's fourth plan is held by A's own budget and B's three victims go before it.
#[tokio::test]
async fn one_namespace_spending_its_budget_leaves_the_cluster_rate_to_the_others() {
    let (env, _alone) = alone(&SERIAL).await;
    fresh_brakes(env).await;
    let c = support::start(env, "tenants").await;
    resize_guard_harness::install::set_policy(
        env,
        "mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: 3\n  maxEvictionsPerMinute: 30\n  maxEvictionsPerNamespacePerMinute: 3\n",
    )
    .await;
    c.wait_policy(|p| p.contains("maxEvictionsPerNamespacePerMinute: 3"))
        .await;
    c.wait_leading().await;

    let (ns_a, ns_b) = (
        env.namespace("tenant-a").await,
        env.namespace("tenant-b").await,
    );
    let (pods_a, pods_b): (Api<Pod>, Api<Pod>) = (
        Api::namespaced(env.client().await, &ns_a),
        Api::namespaced(env.client().await, &ns_b),
    );
    let mut apps_a = Vec::new();
    for n in 0..4 {
        full_node(env, &pods_a, &format!("ta{n}"), 1, 1).await;
        apps_a.push(format!("ta{n}-app0"));
    }
    full_node(env, &pods_b, "tb", 1, 3).await;

    // A's stream: each resize grows by 300m, a victim's worth.
    support::resize_all(&pods_a, &apps_a, "400m").await;
    let spent = wait_evictions(env, &[&ns_a], 3, Duration::from_secs(60)).await;
    // Which brake holds A's further plans, in an Event (others may name the node's plan).
    let budget = format!("namespace {ns_a}'s eviction budget");
    wait_event_saying(env, &c, &ns_a, "PreemptionHeld", |e| e.1.contains(&budget)).await;
    // B's resize grows by 900m (to 1 CPU): three victims in one plan.
    let asked = Instant::now();
    support::resize_all(&pods_b, &["tb-app0".to_owned()], "1").await;
    wait_resized(&pods_b, "tb-app0", "1", Duration::from_secs(90)).await;
    eprintln!(
        "tenant B's resize done {:?} after it was asked",
        asked.elapsed()
    );

    let all = evictions(env, &[&ns_a, &ns_b]);
    eprintln!("evictions of both tenants: {all:#?}");
    let b_last = all
        .iter()
        .filter(|e| e.namespace == ns_b)
        .map(|e| e.at)
        .fold(f64::MIN, f64::max);
    assert_eq!(
        all.iter().filter(|e| e.namespace == ns_b).count(),
        3,
        "{all:?}"
    );
    // A's evictions up to B's last: its first three only (its budget then held the rest).
    let a_before_b: Vec<_> = all
        .iter()
        .filter(|e| e.namespace == ns_a && e.at <= b_last)
        .collect();
    assert_eq!(
        a_before_b.len(),
        3,
        "A's plans kept to A's budget while B's went: {all:?}"
    );
    assert!(spent.len() >= 3);
    let m = metrics(&c).await;
    assert!(
        m.contains("outcome=\"held_namespace_rate\""),
        "A's plans were held by A's budget: {m}"
    );
    assert!(
        all.iter().all(|e| e.victim.contains("-v")),
        "only victims: {all:?}"
    );
    drop(c);
    reset_policy(env).await;
}

/// Pod writes (create, update, patch, delete; any subresource: eviction, status, resize) the
/// controller's ServiceAccount sent in `namespaces`, from the audit log, as (verb, namespace,
/// name, subresource).
pub(super) fn controller_pod_writes(
    env: &Env,
    namespaces: &[&str],
) -> Vec<(String, String, String, String)> {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    env.cp
        .audit_events()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["user"]["username"] == resize_guard_harness::control_plane::CONTROLLER_USER
                && ["create", "update", "patch", "delete", "deletecollection"]
                    .contains(&e["verb"].as_str().unwrap_or_default())
                && e["objectRef"]["resource"] == "pods"
                && namespaces.contains(&e["objectRef"]["namespace"].as_str().unwrap_or_default())
        })
        .map(|e| {
            (
                s(&e["verb"]),
                s(&e["objectRef"]["namespace"]),
                s(&e["objectRef"]["name"]),
                s(&e["objectRef"]["subresource"]),
            )
        })
        .collect()
}

/// Two tenant namespaces and a third, X, in `namespaces.exclude`, named from `prefix`, with their
/// pod APIs; a controller started as `identity` under `preemption` (the policy's `preemption:`
/// block, indented, after `mode: enforce`), loaded and leading.
pub(super) struct Tenants {
    pub c: support::Controller,
    pub ns: [String; 3],
    pub pods: [Api<Pod>; 3],
}

pub(super) async fn three_tenants(
    env: &'static Env,
    prefix: &str,
    identity: &str,
    preemption: &str,
) -> Tenants {
    env.priority_class("lowest", 10, false).await;
    let ns = [
        env.namespace(&format!("{prefix}-a")).await,
        env.namespace(&format!("{prefix}-b")).await,
        env.namespace(&format!("{prefix}-x")).await,
    ];
    fresh_brakes(env).await;
    let c = support::start(env, identity).await;
    let excluded = ns[2].clone();
    resize_guard_harness::install::set_policy(
        env,
        &format!(
            "mode: enforce\npreemption:\n  enabled: true\n{preemption}namespaces:\n  exclude: [kube-system, {excluded}]\n"
        ),
    )
    .await;
    c.wait_policy(|p| p.contains(&excluded)).await;
    c.wait_leading().await;
    let client = env.client().await;
    let pods = ns.clone().map(|n| Api::namespaced(client.clone(), &n));
    Tenants { c, ns, pods }
}

/// Tenant A streams Deferred resizes on three nodes (one victim each) past its budget
/// (`maxEvictionsPerNamespacePerMinute: 2`); tenant B's Deferred resize, made then, still acts
/// within B's own budget. A third namespace X is in `namespaces.exclude` and holds, on B's node,
/// the cheapest victim there is (the lowest priority, the youngest, just big enough), and on
/// another node the only pod B's second resize could take. Read from the audit log over the
/// whole run: the controller wrote no pod (eviction, delete, status, resize) in X, kube-system
/// or the install namespace; B's plan took B's own victim; A's held plan has a `PreemptionHeld`
/// Event naming A's budget and B's refused plan a `ResizePreemptionFailed` naming
/// `namespaces.exclude`.
#[tokio::test]
async fn tenants_under_their_budgets_never_touch_an_excluded_namespace() {
    let (env, _alone) = alone(&SERIAL).await;
    let Tenants {
        c,
        ns: [ns_a, ns_b, ns_x],
        pods: [pods_a, pods_b, pods_x],
    } = three_tenants(
        env,
        "xt",
        "excluded",
        "  maxVictimsPerResize: 1\n  maxEvictionsPerMinute: 30\n  maxEvictionsPerNamespacePerMinute: 2\n",
    )
    .await;
    let mut apps_a = Vec::new();
    for n in 0..3 {
        full_node(env, &pods_a, &format!("xa{n}"), 1, 1).await;
        apps_a.push(format!("xa{n}-app0"));
    }
    // B's node: B's own victim, then X's pod — younger, of the lowest priority: the planner's
    // first choice were X not excluded.
    let node_b = env.node("xb", "700m", "8Gi").await;
    for p in [
        guaranteed_pod("xb-v0", &node_b, "low", "300m", "64Mi"),
        guaranteed_pod("xb-app0", &node_b, "high", "100m", "64Mi"),
    ] {
        create_running(&pods_b, &p).await.unwrap();
    }
    let cheapest = guaranteed_pod("xb-x", &node_b, "lowest", "300m", "64Mi");
    create_running(&pods_x, &cheapest).await.unwrap();
    // A node where only X's pod could make room for B's second resize.
    let node_r = env.node("xr", "400m", "8Gi").await;
    run_guaranteed(&pods_x, "xr-x", &node_r, "lowest", "300m", "64Mi").await;
    run_guaranteed(&pods_b, "xr-app", &node_r, "high", "100m", "64Mi").await;

    // A's stream: each resize grows by 300m, a victim's worth; A's budget is 2.
    support::resize_all(&pods_a, &apps_a, "400m").await;
    wait_evictions(env, &[&ns_a], 2, Duration::from_secs(60)).await;
    let budget = format!("namespace {ns_a}'s eviction budget");
    wait_event_saying(env, &c, &ns_a, "PreemptionHeld", |e| e.1.contains(&budget)).await;
    // B acts within its own budget: its resize is seen through with B's own victim.
    support::resize_all(&pods_b, &["xb-app0".to_owned()], "400m").await;
    wait_resized(&pods_b, "xb-app0", "400m", Duration::from_secs(60)).await;
    // B's second resize could only be made room for by X's pod: refused, saying why.
    support::resize_all(&pods_b, &["xr-app".to_owned()], "400m").await;
    wait_event_saying(env, &c, &ns_b, "ResizePreemptionFailed", |e| {
        e.0 == "xr-app" && e.1.contains("namespaces.exclude")
    })
    .await;

    let all = evictions(env, &[&ns_a, &ns_b, &ns_x]);
    eprintln!("evictions of the run: {all:#?}");
    let of_b: Vec<_> = all.iter().filter(|e| e.namespace == ns_b).collect();
    assert!(
        of_b.len() == 1 && of_b[0].victim == "xb-v0",
        "B took its own victim: {all:?}"
    );
    let writes = controller_pod_writes(env, &[&ns_x, "kube-system", "resize-guard"]);
    assert!(writes.is_empty(), "{writes:?}");
    assert!(
        support::preempted(&pods_x, &["xb-x", "xr-x"])
            .await
            .is_empty(),
        "X's pods stay"
    );
    let m = metrics(&c).await;
    assert!(m.contains("outcome=\"held_namespace_rate\""), "{m}");
    drop(c);
    reset_policy(env).await;
}
