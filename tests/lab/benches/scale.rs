//! Scale benchmark of the live cluster view, in-process: how long the webhook and the
//! controller take to become ready on a large cluster, how much memory they hold then, and how
//! fast their hot paths are on it.
//!
//! The real `resize_guard_cluster::ClusterView` is fed through the production code path — a real
//! `kube::Client` whose transport is an in-process fake kube-apiserver (`scale/apiserver.rs`)
//! answering the watchers' paged LISTs and WATCHes with objects shaped as v1.37 serves them
//! (`scale/pod.rs`, `scale/node.rs`, rendered by `scale/objects.rs`): by default 5,000 cloud nodes
//! and 150,000 Running Deployment pods (managedFields, last-applied copies, kubelet status), ~1,000
//! PodDisruptionBudgets, 1 node in 50 packed with 110 pods and a few hundred Deferred resizes on
//! those (`scale/world.rs`). Pages are rendered on demand from a seed, so the benchmark itself
//! holds no pod JSON.
//!
//! Each role runs in a child process of its own (`scale/roles.rs`): `webhook` (the view without
//! a pod store) and `controller` (with the pod store and a pod-event receiver draining). Each
//! reports the time from `ClusterView::start` to ready and from the last pod page served to
//! ready, `VmRSS`/`VmHWM` at ready and after a 3 s settle, and then the webhook's ledger
//! builds (first and cached) and `review()` latencies, or the controller's decision latency
//! (`assess` with `view.ledger()`/`view.budgets()`, as `reconcile.rs`) on Deferred pods of a
//! busy node. The allocator is the programs' own: `resize-guard-runtime` sets the global
//! allocator of everything that links it (both binaries and this benchmark); the benchmark adds
//! none, and each child gets the environment `deploy/` gives its program (the allocator's
//! options).
//!
//! ```text
//! cargo bench -p resize-guard-lab --bench scale
//! RESIZE_GUARD_SCALE_NODES=500 RESIZE_GUARD_SCALE_PODS=15000 \
//!   cargo bench -p resize-guard-lab --bench scale
//! RESIZE_GUARD_SCALE_STEPS=500x15000,2000x60000,5000x150000 \
//!   cargo bench -p resize-guard-lab --bench scale
//! # answer resourceVersion=0 lists whole, as the watch cache does:
//! RESIZE_GUARD_SCALE_LIST=unpaged cargo bench …
//! RESIZE_GUARD_SCALE_INITIAL=paged cargo bench …  # paged lists instead of streaming ones
//! RESIZE_GUARD_SCALE_ROLES=webhook cargo bench …    # one role only
//! ```
//!
//! The children inherit the environment, so glibc's `MALLOC_ARENA_MAX` / `GLIBC_TUNABLES` can be
//! tried the same way.
//!
//! By default the run measures a small step (500 nodes, 15,000 pods) and the full size
//! (`RESIZE_GUARD_SCALE_NODES` × `RESIZE_GUARD_SCALE_PODS`, default 5,000 × 150,000), so growth
//! per pod is visible; `RESIZE_GUARD_SCALE_STEPS` (`NODESxPODS,…`) replaces both. Prints a table
//! and writes `target/bench/scale.json`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "scale/apiserver.rs"]
mod apiserver;
#[path = "scale/node.rs"]
mod node;
#[path = "scale/objects.rs"]
mod objects;
#[path = "scale/pod.rs"]
mod pod;
#[path = "scale/roles.rs"]
mod roles;
#[path = "scale/world.rs"]
mod world;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use resize_guard_bench::{Goal, Row, report_goals, rows_json, write_summary};
use serde_json::{Value, json};

use apiserver::ListMode;
use roles::Role;

/// Set in a child: the role it measures (and `…_CHILD_NODES`, `…_CHILD_PODS`).
const CHILD_ROLE: &str = "RESIZE_GUARD_SCALE_CHILD_ROLE";
const CHILD_NODES: &str = "RESIZE_GUARD_SCALE_CHILD_NODES";
const CHILD_PODS: &str = "RESIZE_GUARD_SCALE_CHILD_PODS";
/// The line a child prints its result on.
const RESULT: &str = "scale-result ";

fn env_usize(name: &str) -> Option<usize> {
    let v = std::env::var(name).ok()?;
    Some(
        v.replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

fn list_mode() -> ListMode {
    match std::env::var("RESIZE_GUARD_SCALE_LIST").as_deref() {
        Ok("unpaged") => ListMode::Unpaged,
        Ok("paged") | Err(_) => ListMode::Paged,
        Ok(other) => panic!("RESIZE_GUARD_SCALE_LIST={other:?}: paged or unpaged"),
    }
}

/// `(nodes, pods)` of each step, smallest first.
fn steps() -> Vec<(usize, usize)> {
    if let Ok(s) = std::env::var("RESIZE_GUARD_SCALE_STEPS") {
        return s
            .split(',')
            .map(|step| {
                let (n, p) = step
                    .trim()
                    .split_once('x')
                    .unwrap_or_else(|| panic!("step {step:?} is not NODESxPODS"));
                (
                    n.replace('_', "").parse().expect("nodes"),
                    p.replace('_', "").parse().expect("pods"),
                )
            })
            .collect();
    }
    let full = (
        env_usize("RESIZE_GUARD_SCALE_NODES").unwrap_or(5_000),
        env_usize("RESIZE_GUARD_SCALE_PODS").unwrap_or(150_000),
    );
    let small = (500, 15_000);
    if full.1 > small.1 {
        vec![small, full]
    } else {
        vec![full]
    }
}

fn main() {
    if let Ok(role) = std::env::var(CHILD_ROLE) {
        let role = Role::parse(&role).expect("a role");
        let nodes = env_usize(CHILD_NODES).expect("nodes");
        let pods = env_usize(CHILD_PODS).expect("pods");
        let result = roles::run(role, nodes, pods, list_mode());
        println!("{RESULT}{result}");
        return;
    }
    let started = Instant::now();
    let mut results = vec![];
    let roles: Vec<Role> = match std::env::var("RESIZE_GUARD_SCALE_ROLES") {
        Ok(r) => r
            .split(',')
            .map(|r| Role::parse(r.trim()).unwrap_or_else(|| panic!("unknown role {r:?}")))
            .collect(),
        Err(_) => vec![Role::Webhook, Role::Controller],
    };
    for (nodes, pods) in steps() {
        for &role in &roles {
            eprintln!("scale: {} on {nodes} nodes / {pods} pods …", role.as_str());
            results.push(child(role, nodes, pods));
        }
    }
    let wall = started.elapsed();
    print_table(&results);
    println!("wall time {:.1} s", wall.as_secs_f64());
    let goals = report_goals(&goals(&results));
    write_summary(
        "scale",
        &json!({"wall_s": wall.as_secs_f64(), "list_mode": format!("{:?}", list_mode()), "runs": results, "goals": goals,
            "rows": rows_json(&row(&results).into_iter().collect::<Vec<_>>())}),
    );
}

/// The README's row: the largest step, both programs (none when the webhook did not run).
fn row(results: &[Value]) -> Option<Row> {
    let largest = results.iter().filter_map(|r| r["pods"].as_u64()).max()?;
    let at = |role: &str| {
        results
            .iter()
            .find(|r| r["role"] == role && r["pods"].as_u64() == Some(largest))
    };
    let (w, c) = (at("webhook")?, at("controller"));
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let work = &w["work"];
    let rss = |r: Option<&Value>| r.map_or("–".into(), |r| mib(&r["mem_settled"]["rss_kib"]));
    Some(
        Row::new(
            &format!(
                "**scale, in process**: the real `ClusterView` fed through kube's watcher by an in-process API server, {} nodes / {} running pods (~{:.0} kB of JSON each: managedFields, last-applied, sidecars, Running status), {} PDBs, each program in its own process with `deploy/`'s environment; reviews of {:.0} kB (two such pods)",
                w["nodes"], largest, f(&work["list_decode"]["bytes"]) / f(&work["list_decode"]["pods"]) / 1e3,
                w["pdbs"], f(&work["review_body_bytes_avg"]) / 1e3,
            ),
            "`cargo bench -p resize-guard-lab --bench scale` (`RESIZE_GUARD_SCALE_NODES`, `_PODS`, `_STEPS`; `RESIZE_GUARD_SCALE_INITIAL=paged`)",
        )
        .percentiles(
            &format!("review {:.0} µs; decode alone {:.0} µs lean vs {:.0} µs whole", f(&work["review_mutate"]["p50_us"]), f(&work["review_decode_lean"]["p50_us"]), f(&work["review_decode_whole"]["p50_us"])),
            &format!("review {:.0} µs; decode alone {:.0} µs lean vs {:.0} µs whole", f(&work["review_mutate"]["p99_us"]), f(&work["review_decode_lean"]["p99_us"]), f(&work["review_decode_whole"]["p99_us"])),
        )
        .other(&format!(
            "{} lists; **ready {:.1} s** after start (controller {}); **VmRSS webhook {} MiB, controller {} MiB**, settled; decoding {:.0} MB/s lean vs {:.0} MB/s whole (reviews) and {:.0} vs {:.0} MB/s (pod lists, whole then trimmed), same run; ledger build {:.0} / {:.0} µs, cached {:.1} µs; controller decision on a busy node {}",
            w["initial_list"].as_str().unwrap_or("?").to_lowercase(),
            f(&w["ready_s"]),
            c.map_or("–".into(), |c| format!("{:.1} s", f(&c["ready_s"]))),
            rss(Some(w)),
            rss(c),
            f(&work["review_decode_lean_mb_s"]),
            f(&work["review_decode_whole_mb_s"]),
            f(&work["list_decode"]["lean_mb_s"]),
            f(&work["list_decode"]["whole_then_trimmed_mb_s"]),
            f(&work["ledger_build"]["p50_us"]),
            f(&work["ledger_build"]["p99_us"]),
            f(&work["ledger_cached"]["p50_us"]),
            c.map_or("–".into(), |c| format!("{:.0} / {:.0} µs", f(&c["work"]["decision"]["p50_us"]), f(&c["work"]["decision"]["p99_us"]))),
        )),
    )
}

/// The issue's goals at the largest step measured: review p99 ≤ 1 ms, each program ≤ 128 MiB
/// resident once ready and settled.
fn goals(results: &[Value]) -> Vec<Goal> {
    let largest = results
        .iter()
        .filter_map(|r| r["pods"].as_u64())
        .max()
        .unwrap_or(0);
    let at = |role: &str| {
        results
            .iter()
            .find(|r| r["role"] == role && r["pods"].as_u64() == Some(largest))
    };
    let size = |r: &Value| format!("{} pods, {} nodes, in process", r["pods"], r["nodes"]);
    let mut goals = vec![];
    if let Some(w) = at("webhook") {
        goals.push(
            Goal::at_most(
                "review p99 (mutate)",
                w["work"]["review_mutate"]["p99_us"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                1000.0,
                "µs",
            )
            .with_detail(&size(w)),
        );
    }
    for role in ["webhook", "controller"] {
        if let Some(r) = at(role) {
            goals.push(
                Goal::at_most(
                    &format!("{role} VmRSS, settled after ready"),
                    r["mem_settled"]["rss_kib"].as_f64().unwrap_or(f64::NAN) / 1024.0,
                    128.0,
                    "MiB",
                )
                .with_detail(&size(r)),
            );
        }
    }
    goals
}

/// Runs one role in a child process and returns its result line.
fn child(role: Role, nodes: usize, pods: usize) -> Value {
    let exe = std::env::current_exe().expect("current exe");
    let t = Instant::now();
    // Each role runs with the environment deploy/ gives its program (the allocator's options).
    let shipped = resize_guard_lab::programs::shipped_env(role.as_str()).expect("deploy/'s env");
    let mut proc = Command::new(exe)
        .envs(shipped)
        .env(CHILD_ROLE, role.as_str())
        .env(CHILD_NODES, nodes.to_string())
        .env(CHILD_PODS, pods.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = proc.stdout.take().expect("child stdout");
    let mut result = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("child output");
        match line.strip_prefix(RESULT) {
            Some(json) => result = Some(serde_json::from_str(json).expect("child result")),
            None => eprintln!("scale[{}]: {line}", role.as_str()),
        }
    }
    let status = proc.wait().expect("child exit");
    let mut result: Value = match result {
        Some(r) if status.success() => r,
        _ => panic!("{} child failed ({status}) without a result", role.as_str()),
    };
    result["child_wall_s"] = json!(t.elapsed().as_secs_f64());
    result
}

fn mib(kib: &Value) -> String {
    format!("{:.1}", kib.as_f64().unwrap_or(0.0) / 1024.0)
}

fn pq(v: &Value) -> String {
    if v.is_null() {
        return "–".into();
    }
    format!(
        "{:.1} / {:.1}",
        v["p50_us"].as_f64().unwrap_or(0.0),
        v["p99_us"].as_f64().unwrap_or(0.0)
    )
}

fn print_table(results: &[Value]) {
    println!();
    println!(
        "| role | pods | nodes | ready s (CPU s) | ready after last list s | VmRSS MiB ready / settled | \
         VmHWM MiB ready / settled | bytes/pod | ledger build p50/p99 µs | ledger cached p50/p99 µs \
         | review mutate p50/p99 µs | review validate p50/p99 µs | decision p50/p99 µs |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let w = &r["work"];
        println!(
            "| {} | {} | {} | {:.2} ({:.2}) | {} | {} / {} | {} / {} | {} | {} | {} | {} | {} | {} |",
            r["role"].as_str().unwrap_or_default(),
            r["pods"],
            r["nodes"],
            r["ready_s"].as_f64().unwrap_or(0.0),
            r["cpu_to_ready_s"].as_f64().unwrap_or(0.0),
            r["ready_after_last_pod_page_s"]
                .as_f64()
                .map_or("–".into(), |s| format!("{s:.3}")),
            mib(&r["mem_ready"]["rss_kib"]),
            mib(&r["mem_settled"]["rss_kib"]),
            mib(&r["mem_ready"]["hwm_kib"]),
            mib(&r["mem_settled"]["hwm_kib"]),
            r["bytes_per_pod"],
            pq(&w["ledger_build"]),
            pq(&w["ledger_cached"]),
            pq(&w["review_mutate"]),
            pq(&w["review_validate"]),
            pq(&w["decision"]),
        );
    }
    // Growth per pod between the steps, per role: what each further pod costs.
    for role in ["webhook", "controller"] {
        let runs: Vec<&Value> = results.iter().filter(|r| r["role"] == role).collect();
        for pair in runs.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let dp = b["pods"].as_f64().unwrap_or(0.0) - a["pods"].as_f64().unwrap_or(0.0);
            if dp <= 0.0 {
                continue;
            }
            let d = |field: &str| {
                (b["mem_settled"][field].as_f64().unwrap_or(0.0)
                    - a["mem_settled"][field].as_f64().unwrap_or(0.0))
                    * 1024.0
                    / dp
            };
            println!(
                "{role}: {} → {} pods: +{:.0} B VmRSS, +{:.0} B VmHWM per added pod (settled)",
                a["pods"],
                b["pods"],
                d("rss_kib"),
                d("hwm_kib")
            );
        }
    }
    for r in results.iter().filter(|r| r["role"] == "webhook") {
        let w = &r["work"];
        println!(
            "webhook {}: review decode p50/p99 µs lean {} vs whole {} ({} vs {} MB/s of {} B reviews); \
             pod list decode lean {} vs whole-then-trimmed {} MB/s",
            r["pods"],
            pq(&w["review_decode_lean"]),
            pq(&w["review_decode_whole"]),
            w["review_decode_lean_mb_s"],
            w["review_decode_whole_mb_s"],
            w["review_body_bytes_avg"],
            w["list_decode"]["lean_mb_s"],
            w["list_decode"]["whole_then_trimmed_mb_s"],
        );
    }
    for r in results {
        let s = &r["server"];
        println!(
            "{} {}: fake API server rendered {:.0} MiB in {:.2} s ({} lists, {} watches, {} unknown); \
             watch errors {}; decisions {}",
            r["role"].as_str().unwrap_or_default(),
            r["pods"],
            s["bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
            s["render_s"].as_f64().unwrap_or(0.0),
            s["lists"],
            s["watches"],
            s["unknown"],
            r["watch_errors"],
            if r["role"] == "webhook" {
                r["work"]["review_decisions_mutate_validate"].to_string()
            } else {
                r["work"]["verdicts"].to_string()
            },
        );
    }
}
