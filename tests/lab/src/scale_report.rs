//! The report of `resize-guard-scale` (`src/bin/scale.rs`): what one step measured ([`Step`]),
//! the one-off set-up costs ([`Setup`]), the tables and growth lines printed, and the JSON summary
//! written to `target/bench/scale_apiserver.json`. Pure formatting: the measuring is the binary's
//! and [`crate::busy_node`]'s, [`crate::review_latency`]'s and [`crate::programs`]'s.

use std::time::Duration;

use crate::bare_list::BareList;
use serde_json::{Value, json};

use crate::busy_node::{Deferral, Scene};
use crate::growth::Growth;
use crate::programs::{Memory, Readiness, mib};
use crate::review_latency::Sample;
use crate::scale_pods::Created;
use resize_guard_bench::{self as bench, percentile};

/// The run's settings, as the tables and summary state them.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Node objects.
    pub nodes: usize,
    /// Namespaces.
    pub namespaces: usize,
    /// Concurrent requests while creating pods.
    pub concurrency: usize,
    /// Dry-run resizes timed per variant.
    pub reviews: usize,
    /// Seconds between the ready and settled memory readings.
    pub settle: u64,
}

/// What one step measured.
#[derive(Debug)]
pub struct Step {
    /// Pods in the cluster.
    pub pods: usize,
    /// The creation of this step's new pods.
    pub created: Created,
    /// From spawn to ready.
    pub ready: Readiness,
    /// (webhook, controller) once ready (and leading).
    pub at_ready: (Memory, Memory),
    /// (webhook, controller) `--settle` seconds later.
    pub settled: (Memory, Memory),
    /// (webhook, controller) at the end of the step (after reviews and the Deferred resize).
    pub at_end: (Memory, Memory),
    /// Dry-run resizes with no webhook configuration registered.
    pub without: Sample,
    /// The same resizes with `deploy/`'s configurations pointed at the webhook.
    pub with: Sample,
    /// Webhook reviews per timed call (one per matching webhook).
    pub reviews_per_call: f64,
    /// Webhooks registered.
    pub webhooks: usize,
    /// The busy node's Deferred resize, or why it could not be measured.
    pub deferral: Result<Deferral, String>,
    /// Resetting the busy node afterwards.
    pub reset: Duration,
    /// kube-apiserver's memory before the programs started.
    pub apiserver: Option<Memory>,
    /// etcd's memory before the programs started.
    pub etcd: Option<Memory>,
    /// etcd's data directory on disk before the programs started, bytes.
    pub etcd_disk: u64,
    /// WARN/ERROR lines in the (webhook, controller) logs and a few of them.
    pub log_warnings: (usize, usize, Vec<String>),
    /// A bare client's streaming list of every pod, (alone, two at once): the API server's part
    /// of the programs' start-up.
    pub bare: (BareList, BareList),
    /// A bare client's paged list of every pod, alone, by page size.
    pub bare_paged: Vec<(usize, BareList)>,
}

/// One-off set-up costs and facts.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Creating the namespaces and Node objects.
    pub nodes: Duration,
    /// Starting and filling the busy node.
    pub busy_node: Duration,
    /// A description of one stored generated pod.
    pub sample: String,
    /// The webhooks `deploy/` ships.
    pub webhooks: Vec<String>,
    /// The busy node's scene.
    pub scene: Scene,
}

/// p50 and p99 of a sample, milliseconds.
pub fn p50_p99(sample: &Sample) -> (f64, f64) {
    (
        bench::ms(percentile(&sample.sorted, 0.5)),
        bench::ms(percentile(&sample.sorted, 0.99)),
    )
}

/// Milliseconds of an optional duration, for tables.
fn opt_ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(bench::ms(d)))
}

/// The pod count memory is extrapolated to.
pub const EXTRAPOLATE_TO: usize = 150_000;

/// Whole milliseconds, or `-`.
fn fmt_ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_owned(), |d| format!("{:.0}", bench::ms(d)))
}

/// The step's start-up and latency row on stderr ([`TIMING_HEADER`]), as soon as it is measured.
pub fn print_step(s: &Step) {
    eprintln!(
        "scale: {} pods measured\n{TIMING_HEADER}\n{}",
        s.pods,
        timing_row(s)
    );
    if let Err(e) = &s.deferral {
        eprintln!("scale: the busy node's resize was not measured: {e}");
    }
}

/// The header of [`timing_row`], the first table: start-up and latency at each step.
const TIMING_HEADER: &str = "| pods | webhook ready s | controller ready s (leads) | bare streaming list s \
    (alone / two at once) | webhook VmRSS MiB ready→settled | webhook VmHWM MiB | controller VmRSS MiB \
    ready→settled | controller VmHWM MiB | review p50/p99 ms, no webhook | review p50/p99 ms, webhook | \
    PATCH→Deferred ms | Deferred→plan ms | Deferred→Preempted ms | Deferred→resized ms |\n\
    |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

/// Step `s`'s row of the first table ([`TIMING_HEADER`]).
fn timing_row(s: &Step) -> String {
    let (np50, np99) = p50_p99(&s.without);
    let (wp50, wp99) = p50_p99(&s.with);
    let d = s.deferral.as_ref().ok();
    format!(
        "| {} | {:.1} | {:.1} ({:.1}) | {:.1} / {:.1} | {:.1}→{:.1} | {:.1} | {:.1}→{:.1} | {:.1} | {np50:.1} / {np99:.1} | \
         {wp50:.1} / {wp99:.1} | {} | {} | {} | {} |",
        s.pods,
        s.ready.webhook.as_secs_f64(),
        s.ready.controller.as_secs_f64(),
        s.ready.leading.as_secs_f64(),
        s.bare.0.elapsed.as_secs_f64(),
        s.bare.1.elapsed.as_secs_f64(),
        mib(s.at_ready.0.vm_rss),
        mib(s.settled.0.vm_rss),
        mib(s.at_end.0.vm_hwm),
        mib(s.at_ready.1.vm_rss),
        mib(s.settled.1.vm_rss),
        mib(s.at_end.1.vm_hwm),
        fmt_ms(d.map(|d| d.to_deferred)),
        fmt_ms(d.and_then(Deferral::to_first_act)),
        fmt_ms(d.and_then(|d| d.to_preempted)),
        fmt_ms(d.and_then(|d| d.to_resized)),
    )
}

/// The goal at the largest step: each program ready within 10 s of its start.
pub fn goals(steps: &[Step]) -> Vec<bench::Goal> {
    let Some(s) = steps.iter().max_by_key(|s| s.pods) else {
        return vec![];
    };
    let initial = std::env::var("RESIZE_GUARD_INITIAL_LIST").unwrap_or_else(|_| "streaming".into());
    let detail = format!(
        "{} pods on kube-apiserver v1.37.2, --initial-list={initial}; a bare streaming list of every pod took {:.1} s alone, \
         {:.1} s two at once",
        s.pods,
        s.bare.0.elapsed.as_secs_f64(),
        s.bare.1.elapsed.as_secs_f64()
    );
    [
        ("webhook", s.ready.webhook),
        ("controller", s.ready.controller),
    ]
    .into_iter()
    .map(|(program, ready)| {
        bench::Goal::at_most(
            &format!("{program} ready after start"),
            ready.as_secs_f64(),
            10.0,
            "s",
        )
        .with_detail(&detail)
    })
    .collect()
}

/// The README's row: the largest step.
pub fn row(args: &Settings, setup: &Setup, steps: &[Step]) -> Option<bench::Row> {
    let s = steps.iter().max_by_key(|s| s.pods)?;
    let initial = std::env::var("RESIZE_GUARD_INITIAL_LIST").unwrap_or_else(|_| "streaming".into());
    let (np50, np99) = p50_p99(&s.without);
    let (wp50, wp99) = p50_p99(&s.with);
    let paged: Vec<String> = s
        .bare_paged
        .iter()
        .map(|(limit, l)| format!("{:.1} s at {limit} a page", l.elapsed.as_secs_f64()))
        .collect();
    Some(
        bench::Row::new(
            &format!(
                "**scale, real kube-apiserver**: {} Node objects, {} running pods ({}; bench-written status on kubelet-less nodes), a hollow node (real kubelet) for the Deferred resize; release binaries with `deploy/`'s environment, started together, `--initial-list={initial}`",
                args.nodes, s.pods, setup.sample
            ),
            &format!(
                "`{}make bench-scale STEPS={}` (`NODES`, `STEPS`)",
                if initial == "paged" { "RESIZE_GUARD_INITIAL_LIST=paged " } else { "" },
                s.pods
            ),
        )
        .percentiles(
            &format!("dry-run resize {np50:.1} ms without the webhook, {wp50:.1} ms with"),
            &format!("{np99:.1} / {wp99:.1} ms"),
        )
        .other(&format!(
            "**ready after start: webhook {:.1} s, controller {:.1} s** (the API server alone streams every pod to one bare client that decodes nothing in {:.1} s, to two at once in {:.1} s; a bare paged list takes {}, same run); **VmRSS settled: webhook {:.0} MiB, controller {:.0} MiB**; Deferred condition → the controller's first act {}",
            s.ready.webhook.as_secs_f64(),
            s.ready.controller.as_secs_f64(),
            s.bare.0.elapsed.as_secs_f64(),
            s.bare.1.elapsed.as_secs_f64(),
            paged.join(", "),
            mib(s.settled.0.vm_rss),
            mib(s.settled.1.vm_rss),
            s.deferral
                .as_ref()
                .map_or_else(|e| format!("not measured ({e})"), |d| format!("{} ms", fmt_ms(d.to_first_act()))),
        )),
    )
}

/// The tables, the refusals and warnings seen, the growth lines and the wall time, on stdout.
pub fn print(args: &Settings, steps: &[Step], setup: &Setup, wall: Duration, etcd_disk: u64) {
    println!(
        "\nresize-guard on kube-apiserver v1.37.2: {} nodes (with status), pods in {} namespaces \
         (Running status), webhooks {:?}; {} reviews per variant, settle {} s",
        args.nodes, args.namespaces, setup.webhooks, args.reviews, args.settle
    );
    println!("{}", setup.sample);
    println!();
    println!("{TIMING_HEADER}");
    for s in steps {
        println!("{}", timing_row(s));
    }
    println!();
    println!(
        "| pods | created (new) | pods/s | requests/s | kube-apiserver VmRSS MiB | etcd VmRSS MiB | etcd on disk MiB | \
         webhook reviews per call | refused (no webhook / webhook) | victims | busy-node reset s | WARN/ERROR lines (webhook, controller) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in steps {
        println!(
            "| {} | {} in {:.0} s | {:.0} | {:.0} | {} | {} | {:.0} | {:.2} of {} | {} / {} | {} | {:.1} | {}, {} |",
            s.pods,
            s.created.pods,
            s.created.elapsed.as_secs_f64(),
            s.created.pods_per_second(),
            s.created.requests_per_second(),
            s.apiserver
                .map_or("-".to_owned(), |m| format!("{:.0}", mib(m.vm_rss))),
            s.etcd
                .map_or("-".to_owned(), |m| format!("{:.0}", mib(m.vm_rss))),
            s.etcd_disk as f64 / 1048576.0,
            s.reviews_per_call,
            s.webhooks,
            s.without.refused.0,
            s.with.refused.0,
            s.deferral
                .as_ref()
                .map_or("-".to_owned(), |d| d.victims.to_string()),
            s.reset.as_secs_f64(),
            s.log_warnings.0,
            s.log_warnings.1,
        );
    }
    for s in steps {
        if let Some(why) = &s.with.refused.1 {
            println!("{} pods: first refusal with the webhook: {why}", s.pods);
        }
        if let Ok(d) = &s.deferral {
            println!("{} pods: Deferred: {}", s.pods, d.message);
        }
        for line in &s.log_warnings.2 {
            println!("{} pods: {line}", s.pods);
        }
    }
    println!();
    for (name, growth) in growths(steps) {
        if let Some(g) = growth {
            println!("growth, {name}: {}", g.describe(EXTRAPOLATE_TO));
        }
    }
    println!(
        "wall time {:.0} s (nodes {:.1} s, busy node {:.1} s); etcd data directory at the end {:.0} MiB",
        wall.as_secs_f64(),
        setup.nodes.as_secs_f64(),
        setup.busy_node.as_secs_f64(),
        etcd_disk as f64 / 1048576.0
    );
}

/// Settled VmRSS and end-of-step VmHWM growth per program.
fn growths(steps: &[Step]) -> Vec<(&'static str, Option<Growth>)> {
    let points = |f: &dyn Fn(&Step) -> u64| -> Vec<(usize, f64)> {
        steps.iter().map(|s| (s.pods, mib(f(s)))).collect()
    };
    vec![
        (
            "webhook VmRSS",
            Growth::fit(&points(&|s| s.settled.0.vm_rss)),
        ),
        (
            "webhook VmHWM",
            Growth::fit(&points(&|s| s.at_end.0.vm_hwm)),
        ),
        (
            "controller VmRSS",
            Growth::fit(&points(&|s| s.settled.1.vm_rss)),
        ),
        (
            "controller VmHWM",
            Growth::fit(&points(&|s| s.at_end.1.vm_hwm)),
        ),
    ]
}

/// The three figures in MiB.
fn memory_json(m: &Memory) -> Value {
    json!({"vm_rss_mib": mib(m.vm_rss), "vm_hwm_mib": mib(m.vm_hwm), "rss_anon_mib": mib(m.rss_anon)})
}

/// The JSON summary (`target/bench/scale_apiserver.json`).
pub fn summary(
    args: &Settings,
    steps: &[Step],
    setup: &Setup,
    wall: Duration,
    etcd_disk: u64,
) -> Value {
    let steps_json: Vec<Value> = steps
        .iter()
        .map(|s| {
            let (np50, np99) = p50_p99(&s.without);
            let (wp50, wp99) = p50_p99(&s.with);
            let deferral = match &s.deferral {
                Ok(d) => json!({
                    "patch_ms": bench::ms(d.patch),
                    "patch_to_deferred_ms": bench::ms(d.to_deferred),
                    "deferred_to_plan_ms": opt_ms(d.to_plan),
                    "deferred_to_preempted_event_ms": opt_ms(d.to_preempted),
                    "deferred_to_first_act_ms": opt_ms(d.to_first_act()),
                    "deferred_to_resized_ms": opt_ms(d.to_resized),
                    "victims": d.victims,
                    "message": d.message,
                }),
                Err(e) => json!({"error": e}),
            };
            json!({
                "pods": s.pods,
                "creation": {
                    "new_pods": s.created.pods, "seconds": s.created.elapsed.as_secs_f64(),
                    "pods_per_second": s.created.pods_per_second(),
                    "requests_per_second": s.created.requests_per_second(),
                },
                "bare_streaming_list": {
                    "bytes": s.bare.0.bytes,
                    "alone_seconds": s.bare.0.elapsed.as_secs_f64(),
                    "two_at_once_seconds": s.bare.1.elapsed.as_secs_f64(),
                },
                "bare_paged_list_seconds": s.bare_paged.iter().map(|(limit, l)| (limit.to_string(), json!(l.elapsed.as_secs_f64()))).collect::<serde_json::Map<_, _>>(),
                "ready_seconds": {
                    "webhook": s.ready.webhook.as_secs_f64(),
                    "controller": s.ready.controller.as_secs_f64(),
                    "controller_leading": s.ready.leading.as_secs_f64(),
                },
                "webhook": {"ready": memory_json(&s.at_ready.0), "settled": memory_json(&s.settled.0), "end": memory_json(&s.at_end.0)},
                "controller": {"ready": memory_json(&s.at_ready.1), "settled": memory_json(&s.settled.1), "end": memory_json(&s.at_end.1)},
                "review_ms": {
                    "calls": s.with.sorted.len(),
                    "without_webhook": {"p50": np50, "p99": np99, "refused": s.without.refused.0},
                    "with_webhook": {"p50": wp50, "p99": wp99, "refused": s.with.refused.0,
                                     "first_refusal": s.with.refused.1},
                    "webhook_reviews_per_call": s.reviews_per_call,
                    "webhooks_registered": s.webhooks,
                },
                "deferred_resize": deferral,
                "busy_node_reset_seconds": s.reset.as_secs_f64(),
                "kube_apiserver": s.apiserver.as_ref().map(memory_json),
                "etcd": s.etcd.as_ref().map(memory_json),
                "etcd_disk_bytes": s.etcd_disk,
                "log_warn_error_lines": {"webhook": s.log_warnings.0, "controller": s.log_warnings.1},
            })
        })
        .collect();
    let growth: serde_json::Map<String, Value> = growths(steps)
        .into_iter()
        .filter_map(|(name, g)| Some((name.replace(' ', "_"), g?.to_json(EXTRAPOLATE_TO))))
        .collect();
    json!({
        "benchmark": "resize-guard-scale",
        "kube_apiserver": "v1.37.2",
        "nodes": args.nodes,
        "namespaces": args.namespaces,
        "concurrency": args.concurrency,
        "reviews_per_variant": args.reviews,
        "settle_seconds": args.settle,
        "webhooks": setup.webhooks,
        "sample_pod": setup.sample,
        "busy_node_scene": format!("{:?}", setup.scene),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "steps": steps_json,
        "growth": growth,
        "wall_seconds": wall.as_secs_f64(),
        "setup_seconds": {"nodes": setup.nodes.as_secs_f64(), "busy_node": setup.busy_node.as_secs_f64()},
        "etcd_disk_bytes_final": etcd_disk,
    })
}
