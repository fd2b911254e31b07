//! `resize-guard-scale --webhook PATH --controller PATH [--nodes 1000] [--steps 3000,10000,30000]`:
//! the webhook and controller release binaries on a real kube-apiserver holding a growing cluster.
//!
//! Starts a real control plane (etcd + kube-apiserver; no scheduler — every pod carries
//! `spec.nodeName`), installs `deploy/` (namespace, RBAC, policy; the webhook configurations
//! only while reviews are timed), creates `--nodes` Node objects *with* their status (a kubelet
//! registers its node that way: capacity, allocatable, conditions, addresses, nodeInfo), and then
//! pods in steps up to each `--steps` total, `--concurrency` requests in flight. Each pod is
//! `resize_guard_lab::scale_pods`'s Deployment pod (~20 kB as stored) and gets a `Running`
//! status through the `status` subresource right after it is created (phase, conditions, IPs,
//! `qosClass`, container statuses with `allocatedResources`/`resources`). **That status is bench
//! data on Node objects no kubelet runs behind**: our tests never write kubelet-owned status, but
//! the question here is resize-guard on tens of thousands of *running* pods, and no kubelet can
//! run a thousand nodes on this machine. The one place a real kubelet matters — a Deferred resize
//! — runs on a hollow node (upstream kubelet, fake runtime; `resize_guard_lab::busy_node`).
//!
//! At each step both programs are started fresh as their ServiceAccounts (as `resize-guard-rss`
//! does) and measured: time from spawn to `/readyz` 200, `VmRSS`/`VmHWM`/`RssAnon` once ready
//! (and the controller leads) and after `--settle` seconds; then `--reviews` dry-run
//! `PATCH pods/<name>/resize` calls raising a cpu request, one at a time, on pods drawn over the
//! whole set — first with no webhook configuration registered, then with `deploy/`'s
//! configurations pointed at the local webhook — for p50/p99 through the API server; then the
//! busy node's high-priority pod is resized beyond its free cpu and the tool times the kubelet's
//! Deferred condition and the controller's plan and first `Preempted` Event
//! (`resize_guard_lab::busy_node`). Afterwards the configurations are removed, both programs
//! stopped and the busy node reset, so every step measures the same situation.
//!
//! Prints one table per concern, a growth line per program (MiB per 1,000 pods between steps, a
//! least-squares fit, an extrapolation to 150,000 pods), and writes
//! `target/bench/scale_apiserver.json`. Timings are wall-clock on a shared machine: etcd,
//! kube-apiserver, the hollow kubelet, both programs and this tool share its cores.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use resize_guard_bench::{self as bench, Lcg};
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_lab::busy_node::{BusyNode, Scene};
use resize_guard_lab::programs::{
    Memory, ProgramBinaries, ProgramPaths, Programs, copy_logs, install_deploy,
};
use resize_guard_lab::review_latency::{self, Registration, cpu_request_patch, reviews_answered};
use resize_guard_lab::scale_pods::{self, Created, Layout};
use resize_guard_lab::scale_report::{self, Settings, Setup, Step};

/// The webhook and controller on a real API server holding a growing cluster.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    programs: ProgramPaths,
    /// Node objects to create (with status; no kubelet behind them).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Namespaces the pods are spread over.
    #[arg(long, default_value_t = 50)]
    namespaces: usize,
    /// Total pods at each step, increasing.
    #[arg(long, value_delimiter = ',', default_value = "3000,10000,30000")]
    steps: Vec<usize>,
    /// Seconds to wait once both programs are ready before reading their memory again.
    #[arg(long, default_value_t = 10)]
    settle: u64,
    /// Concurrent API requests while creating pods.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Dry-run resizes timed per step, with and without the webhook each.
    #[arg(long, default_value_t = 200)]
    reviews: usize,
    /// Seconds each program may take to become ready.
    #[arg(long, default_value_t = 600)]
    ready_timeout: u64,
    /// Seconds to wait for the Deferred resize to be planned and applied.
    #[arg(long, default_value_t = 120)]
    deferred_timeout: u64,
    /// Copy the control plane's logs (API server, audit, programs, hollow node) here.
    #[arg(long)]
    logs: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    resize_guard_lab::programs::init_tool();
    let args = Args::parse();
    let layout = Layout {
        namespaces: args.namespaces,
        nodes: args.nodes,
        running: true,
    };
    layout.validate()?;
    anyhow::ensure!(
        !args.steps.is_empty() && args.steps.windows(2).all(|w| w[0] < w[1]),
        "--steps must be increasing pod totals"
    );
    anyhow::ensure!(
        args.concurrency > 0 && args.reviews > 0,
        "--concurrency and --reviews must be positive"
    );
    if args.nodes < 1000 {
        eprintln!(
            "scale: note: {} nodes (the benchmark is meant for ≥ 1,000)",
            args.nodes
        );
    }
    let bins = ProgramBinaries::new(&args.programs.webhook, &args.programs.controller)?;
    let wall = Instant::now();
    eprintln!("scale: starting etcd and kube-apiserver …");
    let cp = ControlPlane::start(&Options::default())?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(run(&cp, &args, &layout, &bins));
    if let Some(dir) = &args.logs {
        copy_logs(cp.dir(), dir)?;
        eprintln!("scale: logs copied to {}", dir.display());
    }
    let (steps, setup) = result?;
    let etcd_disk = disk_usage(&cp.dir().join("etcd"));
    drop(rt);
    drop(cp);
    let wall = wall.elapsed();
    let settings = Settings {
        nodes: args.nodes,
        namespaces: args.namespaces,
        concurrency: args.concurrency,
        reviews: args.reviews,
        settle: args.settle,
    };
    scale_report::print(&settings, &steps, &setup, wall, etcd_disk);
    let mut summary = scale_report::summary(&settings, &steps, &setup, wall, etcd_disk);
    summary["goals"] = bench::report_goals(&scale_report::goals(&steps));
    summary["rows"] = bench::rows_json(
        &scale_report::row(&settings, &setup, &steps)
            .into_iter()
            .collect::<Vec<_>>(),
    );
    // The programs inherit `RESIZE_GUARD_INITIAL_LIST`: a paged run keeps its own summary.
    let paged = std::env::var("RESIZE_GUARD_INITIAL_LIST").is_ok_and(|v| v == "paged");
    summary["initial_list"] = serde_json::json!(if paged { "paged" } else { "streaming" });
    let name = if paged {
        "scale_apiserver_paged"
    } else {
        "scale_apiserver"
    };
    bench::write_summary(name, &summary);
    Ok(())
}

async fn run(
    cp: &ControlPlane,
    args: &Args,
    layout: &Layout,
    bins: &ProgramBinaries,
) -> anyhow::Result<(Vec<Step>, Setup)> {
    let client = cp.client().await?;
    let kubectl = Kubectl::admin(cp);
    install_deploy(&kubectl).await?;
    let started = Instant::now();
    scale_pods::create_namespaces(&client, layout).await?;
    scale_pods::create_nodes(&client, layout, args.concurrency).await?;
    let nodes = started.elapsed();
    eprintln!("scale: {} nodes created in {nodes:.1?}", args.nodes);
    let started = Instant::now();
    let scene = Scene::default();
    let busy = BusyNode::start(cp, scene).await?;
    let busy_node = started.elapsed();
    eprintln!(
        "scale: busy node up with {} pods running in {busy_node:.1?}",
        busy.scene().low_pods + 1
    );
    let configs = review_latency::shipped_configurations(&kubectl).await?;
    let mut setup = Setup {
        nodes,
        busy_node,
        sample: String::new(),
        webhooks: configs
            .iter()
            .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
            .filter_map(|w| w["name"].as_str().map(str::to_owned))
            .collect(),
        scene,
    };

    let mut steps = Vec::new();
    let mut have = 0;
    for &pods in &args.steps {
        let created =
            scale_pods::create_pods(&client, layout, have..pods, args.concurrency, "scale").await?;
        have = pods;
        eprintln!(
            "scale: {pods} pods ({} new in {:.1?}: {:.0} pods/s, {:.0} requests/s)",
            created.pods,
            created.elapsed,
            created.pods_per_second(),
            created.requests_per_second()
        );
        if setup.sample.is_empty() {
            setup.sample = scale_pods::describe_sample(&client).await?;
            eprintln!("scale: {}", setup.sample);
        }
        let step = measure(
            cp, &client, &kubectl, args, layout, bins, &busy, pods, created,
        )
        .await?;
        scale_report::print_step(&step);
        steps.push(step);
    }
    drop(busy);
    Ok((steps, setup))
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    cp: &ControlPlane,
    client: &kube::Client,
    kubectl: &Kubectl,
    args: &Args,
    layout: &Layout,
    bins: &ProgramBinaries,
    busy: &BusyNode,
    pods: usize,
    created: Created,
) -> anyhow::Result<Step> {
    let etcd_disk = disk_usage(&cp.dir().join("etcd"));
    let apiserver = apiserver_pid(cp).and_then(|pid| Memory::of_pid(pid).ok());
    let etcd = Memory::of_pid(cp.etcd_pid()).ok();

    // The API server's own time to stream every pod, before the programs ask for the same.
    let bare = resize_guard_lab::bare_list::alone_and_paired(client).await?;
    eprintln!(
        "scale: {pods} pods: a bare streaming list of every pod ({} MB) takes {:.1?} alone, {:.1?} \
         when two clients list at once",
        bare.0.bytes / 1_000_000,
        bare.0.elapsed,
        bare.1.elapsed
    );
    let mut bare_paged = vec![];
    for limit in [100, 500] {
        let paged = resize_guard_lab::bare_list::paged_list(client, limit).await?;
        eprintln!(
            "scale: {pods} pods: a bare paged list of every pod, {limit} a page ({} MB), takes {:.1?}",
            paged.bytes / 1_000_000,
            paged.elapsed
        );
        bare_paged.push((limit, paged));
    }
    let programs = Programs::start(cp, bins, &format!("scale-{pods}"), &format!("-{pods}"))?;
    let ready = programs
        .wait_ready(Duration::from_secs(args.ready_timeout))
        .await?;
    let at_ready = programs.memory()?;
    eprintln!(
        "scale: {pods} pods: webhook ready after {:.1?}, controller after {:.1?} (leading after \
         {:.1?}); settling {} s",
        ready.webhook, ready.controller, ready.leading, args.settle
    );
    programs.settle("scale", args.settle).await?;
    let settled = programs.memory()?;

    // Reviews: the same calls without and with the webhook configurations.
    let targets = review_targets(layout, pods, args.reviews);
    let patch = cpu_request_patch("app", "300m");
    let probe = (targets[0].0.as_str(), targets[0].1.as_str());
    let without = review_latency::time_resizes(client, &targets, &patch, 5).await?;
    let configs = review_latency::shipped_configurations(kubectl).await?;
    let registration = Registration::apply(
        client,
        &configs,
        &programs.webhook_url(),
        programs.ca_bundle_base64(),
    )
    .await?;
    review_latency::wait_called(
        client,
        &programs,
        probe,
        &patch,
        true,
        Duration::from_secs(60),
    )
    .await?;
    let before = reviews_answered(&programs.webhook_metrics().await?);
    let with = review_latency::time_resizes(client, &targets, &patch, 5).await?;
    let after = reviews_answered(&programs.webhook_metrics().await?);
    let reviews_per_call = after.saturating_sub(before) as f64 / (targets.len() + 5) as f64;

    // The Deferred resize on the busy node, with the webhook registered as in a cluster.
    let deferral = busy
        .measure(client, Duration::from_secs(args.deferred_timeout))
        .await
        .map_err(|e| format!("{e:#}"));
    if let Err(e) = &deferral {
        eprintln!("scale: {pods} pods: the Deferred resize measurement failed: {e}");
    }
    registration.remove(client).await?;
    review_latency::wait_called(
        client,
        &programs,
        probe,
        &patch,
        false,
        Duration::from_secs(60),
    )
    .await?;
    let at_end = programs.memory()?;
    let log_warnings = warnings(&programs);
    drop(programs);
    let reset = busy.reset(client).await?;
    Ok(Step {
        pods,
        created,
        ready,
        at_ready,
        settled,
        at_end,
        without,
        with,
        reviews_per_call,
        webhooks: registration.webhooks,
        deferral,
        reset,
        apiserver,
        etcd,
        etcd_disk,
        log_warnings,
        bare,
        bare_paged,
    })
}

/// `n` distinct pods drawn (seeded) from the first `pods`, so the calls land on many nodes and
/// namespaces.
fn review_targets(layout: &Layout, pods: usize, n: usize) -> Vec<(String, String)> {
    let n = n.min(pods);
    let mut rng = Lcg(0x5ca1e);
    let mut picked = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let i = rng.next(pods as u64) as usize;
        if picked.insert(i) {
            out.push(scale_pods::pod_key(layout, i));
        }
    }
    out
}

/// Lines with `WARN` or `ERROR` in both programs' logs (without colour codes), and up to five of
/// them. kube-client's "Server cert bypassed" is left out: the harness kubeconfigs skip TLS
/// verification on purpose.
fn warnings(programs: &Programs) -> (usize, usize, Vec<String>) {
    let scan = |p: &resize_guard_harness::process::Process| {
        std::fs::read_to_string(p.log_path())
            .unwrap_or_default()
            .lines()
            .map(strip_ansi)
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .filter(|l| !l.contains("Server cert bypassed"))
            .collect::<Vec<_>>()
    };
    let (w, c) = (scan(&programs.webhook), scan(&programs.controller));
    let some = w
        .iter()
        .map(|l| format!("webhook: {l}"))
        .chain(c.iter().map(|l| format!("controller: {l}")))
        .take(5)
        .collect();
    (w.len(), c.len(), some)
}

/// `line` without ANSI colour sequences (`ESC [ … m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Bytes on disk (allocated blocks) under `dir`.
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// kube-apiserver's pid: the process whose command line names this control plane's cert dir.
fn apiserver_pid(cp: &ControlPlane) -> Option<u32> {
    let marker = format!("--cert-dir={}", cp.dir().join("certs").display());
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        (cmdline.contains("kube-apiserver") && cmdline.split('\0').any(|a| a == marker))
            .then_some(pid)
    })
}
