//! Policy decision time on a full node: `classify` (QoS, feasibility, shortfall and victim
//! selection) for a Deferred resize on a node with 110 pods, plus building that node's ledger.
//!
//! Criterion measures the mean/median; a second pass times 20,000 single decisions to report
//! p50/p99, printed as a table and written to `target/bench/policy.json`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use k8s_openapi::api::core::v1::{Node, Pod};
use resize_guard_policy::admission::{Stage, admit};
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::fixture::{context, packed_node};
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::policy::{BelowUsage, Policy};
use resize_guard_policy::{Context, Verdict, classify};

use resize_guard_bench::{Row, percentile, rows_json, us, write_summary};

const PODS_PER_NODE: usize = 110;

fn full_node() -> (Node, Vec<Pod>, Pod, Pod) {
    packed_node(PODS_PER_NODE)
}

fn main() {
    let (n, pods, old, new) = full_node();
    let policy = Policy::default();
    let budgets = Budgets::default();
    let ledger = NodeLedger::new(&n, &pods);
    let ctx = context(Some(&ledger), &budgets, &policy);
    let verdict = classify(&old, &new, &ctx);
    let victims = match &verdict {
        Verdict::Deferred(d) => d
            .plan
            .as_ref()
            .expect("scenario must have a plan")
            .victims
            .len(),
        other => panic!("benchmark scenario must be Deferred, got {other:?}"),
    };

    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    c.bench_function("classify_deferred_110_pods", |b| {
        b.iter(|| classify(black_box(&old), black_box(&new), black_box(&ctx)))
    });
    c.bench_function("ledger_build_110_pods", |b| {
        b.iter(|| NodeLedger::new(black_box(&n), black_box(&pods)))
    });

    // The memory rule's cost on a resize that lowers no memory limit: the same admission with
    // the rule on (the default) and off (`belowUsage: allow`, which skips it), interleaved.
    let rule_off = Policy {
        memory: resize_guard_policy::policy::MemoryPolicy {
            decrease: resize_guard_policy::policy::MemoryDecrease {
                below_usage: BelowUsage::Allow,
                ..Default::default()
            },
        },
        ..Policy::default()
    };
    let ctx_off = Context {
        policy: &rule_off,
        ..ctx
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for round in 0..20 {
        for (samples, ctx) in [(&mut on, &ctx), (&mut off, &ctx_off)] {
            for i in 0..1_000 {
                let t = Instant::now();
                black_box(admit(Stage::Mutate, &old, &new, ctx));
                if round > 0 || i >= 200 {
                    samples.push(t.elapsed());
                }
            }
        }
    }
    on.sort();
    off.sort();
    let (on_p50, off_p50) = (percentile(&on, 0.5), percentile(&off, 0.5));
    let memory_rule_ratio = on_p50.as_secs_f64() / off_p50.as_secs_f64();

    let mut rows = Vec::new();
    for (name, f) in [
        (
            "classify (deferred, victim selection)",
            Box::new(|| {
                black_box(classify(&old, &new, &ctx));
            }) as Box<dyn Fn()>,
        ),
        (
            "ledger build",
            Box::new(|| {
                black_box(NodeLedger::new(&n, &pods));
            }),
        ),
        (
            "ledger build + classify",
            Box::new(|| {
                let l = NodeLedger::new(&n, &pods);
                let ctx = Context {
                    ledger: Some(&l),
                    ..ctx
                };
                black_box(classify(&old, &new, &ctx));
            }),
        ),
    ] {
        for _ in 0..1_000 {
            f();
        }
        let mut samples: Vec<Duration> = (0..20_000)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect();
        samples.sort();
        rows.push((name, percentile(&samples, 0.5), percentile(&samples, 0.99)));
    }

    println!(
        "\npolicy decision, node with {PODS_PER_NODE} pods ({victims} victims chosen), 20000 samples"
    );
    println!("{:<40} {:>10} {:>10}", "operation", "p50 µs", "p99 µs");
    let mut results = Vec::new();
    for (name, p50, p99) in &rows {
        let (a, b) = (us(*p50), us(*p99));
        println!("{name:<40} {a:>10.2} {b:>10.2}");
        results.push(serde_json::json!({"operation": name, "p50_us": a, "p99_us": b}));
    }
    println!(
        "{:<40} {:>10.2} (memory rule on) vs {:.2} (off): ratio {memory_rule_ratio:.3}, goal ≤ 1.05",
        "admit, cpu resize (no memory lowered)",
        us(on_p50),
        us(off_p50)
    );
    let at = |i: usize| (us(rows[i].1), us(rows[i].2));
    let (classify_p50, classify_p99) = at(0);
    let (ledger_p50, ledger_p99) = at(1);
    let row = Row::new(
        &format!("`classify` (resize strategy, built-in validation, QoS, node features, feasibility, shortfall, {victims} victims chosen), {PODS_PER_NODE}-pod node"),
        "`cargo bench -p resize-guard-policy --bench decision`",
    )
    .percentiles(&format!("{classify_p50:.1} µs"), &format!("{classify_p99:.1} µs"))
    .other(&format!(
        "ledger build from {PODS_PER_NODE} pods {ledger_p50:.1} / {ledger_p99:.1} µs; a CPU resize admitted with the memory-lowering rule on {:.1} µs vs off {:.1} µs at p50 ({memory_rule_ratio:.2}×)",
        us(on_p50),
        us(off_p50)
    ));
    write_summary(
        "policy",
        &serde_json::json!({"pods_per_node": PODS_PER_NODE, "victims": victims, "results": results,
            "admit_cpu_resize_p50_us": {"memory_rule_on": us(on_p50), "memory_rule_off": us(off_p50),
                "ratio": memory_rule_ratio},
            "rows": rows_json(&[row])}),
    );
}
