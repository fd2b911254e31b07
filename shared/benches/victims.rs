//! Victim counts on generated node scenarios: resize-guard's plan (the kubelet's accounting: other
//! pods at their allocation, plus the pending growth that could take the room first —
//! `victims/race.rs`) against the same DefaultPreemption algorithm on the v1.37 alpha scheduler's
//! accounting (every pod at max(desired, allocated, actual)), which is how upstream's plugin sizes
//! the shortfall (KEP-5836, "Risk of Additional Preemption"). The upstream column is that model,
//! not the scheduler binary; `tests/e2e/upstream/alpha_preemption.rs` checks the model against the
//! real kube-scheduler on the KEP-5836 example (3 victims vs 1).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use k8s_openapi::api::core::v1::Pod;
use resize_guard_bench::{Lcg, Row, rows_json, write_summary};
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::fixture::{
    INSTALL_NAMESPACE, PodBuilder, container, node, scheduler_ledger,
};
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::policy::Policy;
use resize_guard_policy::victims::{Candidates, Preemptor, select_victims};

fn scenario(rng: &mut Lcg) -> (Vec<Pod>, usize) {
    // A 8-core node filled to ~90%: some small low-priority pods, a few mid-priority pods of
    // which some have Deferred resizes of their own, and one high-priority pod growing.
    let mut pods = Vec::new();
    let mut used = 0u64;
    let grow = 500 + rng.next(1500);
    let h_cpu = 500 + rng.next(1000);
    pods.push(
        PodBuilder::new("prod", "h")
            .node("n1")
            .priority(1_000_000)
            .container(container("c").guaranteed(&format!("{h_cpu}m"), "256Mi"))
            .running(0)
            .resize("c", "cpu", &format!("{}m", h_cpu + grow))
            .build(),
    );
    used += h_cpu;
    let mut i = 0;
    while used < 7200 {
        let cpu = 100 + rng.next(700);
        let mid = rng.next(4) == 0;
        let mut b = PodBuilder::new("batch", &format!("p{i}"))
            .owned_by("ReplicaSet")
            .node("n1")
            .priority(if mid { 10_000 } else { 100 })
            .never_preempt()
            .container(container("c").guaranteed(&format!("{cpu}m"), "128Mi"))
            .running(1 + i as i64);
        if mid && rng.next(2) == 0 {
            // Its own pending growth: counted by the scheduler, ignored by the kubelet.
            b = b
                .resize("c", "cpu", &format!("{}m", cpu + 200 + rng.next(600)))
                .resize_pending("Deferred", "Node didn't have enough resource: cpu");
        }
        pods.push(b.build());
        used += cpu;
        i += 1;
    }
    (pods, i)
}

fn victims(pods: &[Pod], scheduler_view: bool) -> Option<usize> {
    let n = node("n1", "8", "64Gi");
    let ledger = if scheduler_view {
        scheduler_ledger(&n, pods)
    } else {
        NodeLedger::new(&n, pods)
    };
    let h = &pods[0];
    let preemptor = Preemptor::new(h, h.spec.as_ref().unwrap(), h.status.as_ref());
    let mut policy = Policy::default();
    policy.preemption.max_victims_per_resize = 1000;
    select_victims(
        &preemptor,
        &ledger,
        &Budgets::default(),
        &policy,
        INSTALL_NAMESPACE,
        Candidates::All,
    )
    .ok()
    .map(|p| p.victims.len())
}

fn main() {
    let mut rng = Lcg(42);
    let (mut ours_total, mut theirs_total, mut fewer, mut same, mut more, mut deferred) =
        (0, 0, 0, 0, 0, 0);
    let runs = 1000;
    for _ in 0..runs {
        let (pods, _) = scenario(&mut rng);
        let (Some(ours), Some(theirs)) = (victims(&pods, false), victims(&pods, true)) else {
            continue;
        };
        if ours == 0 && theirs == 0 {
            continue;
        }
        deferred += 1;
        ours_total += ours;
        theirs_total += theirs;
        match ours.cmp(&theirs) {
            std::cmp::Ordering::Less => fewer += 1,
            std::cmp::Ordering::Equal => same += 1,
            std::cmp::Ordering::Greater => more += 1,
        }
    }
    println!(
        "\nvictims per Deferred resize, {deferred} generated 8-core nodes with a plan (of {runs})"
    );
    println!("{:<46} {:>10}", "", "victims");
    println!(
        "{:<46} {:>10}",
        "resize-guard (kubelet accounting, race-aware)", ours_total
    );
    println!(
        "{:<46} {:>10}",
        "upstream v1.37 alpha model (scheduler accounting)", theirs_total
    );
    println!(
        "resize-guard took fewer victims in {fewer}, as many in {same}, more in {more} scenarios"
    );
    println!(
        "mean victims: resize-guard {:.2}, upstream model {:.2}",
        ours_total as f64 / deferred.max(1) as f64,
        theirs_total as f64 / deferred.max(1) as f64
    );
    write_summary(
        "victims",
        &serde_json::json!({
            "scenarios": deferred,
            "resize_guard_victims": ours_total,
            "upstream_model_victims": theirs_total,
            "fewer": fewer, "same": same, "more": more,
            "rows": rows_json(&[Row::new(
                &format!("victims per Deferred resize, {deferred} generated 8-core nodes (first plan, in-process model)"),
                "`cargo bench -p resize-guard-policy --bench victims`",
            )
            .other(&format!(
                "resize-guard {ours_total} vs {theirs_total} for the same algorithm on the v1.37 alpha scheduler's accounting (fewer in {fewer} scenarios, equal in {same}, more in {more})"
            ))]),
        }),
    );
}
