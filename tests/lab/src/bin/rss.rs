//! `rss --webhook PATH --controller PATH [--pods N]`: resident memory of the webhook and the
//! controller binaries given on a realistic pod set.
//!
//! Starts a real control plane, installs `deploy/` (RBAC, policy; no webhook configurations),
//! creates `--nodes` Node objects (no kubelet behind them) and `--pods` pods spread over
//! `--namespaces` namespaces, each shaped like a Deployment's pod as a real cluster stores it
//! (`resize_guard_lab::scale_pods`: two containers with ten env vars, probes, ports and
//! security contexts, three volumes and their mounts, owner reference, labels, a ~3.5 KB
//! last-applied annotation, `spec.nodeName` and managedFields from two server-side-apply
//! managers). By default no status is written beyond what kube-apiserver sets: only a kubelet
//! writes a pod's or node's status, and none runs here (the pods stay Pending). `--running` adds
//! the status a kubelet would write — Nodes created with theirs, each pod's `Running` status
//! written through the `status` subresource (~2 kB more per pod) — as bench data on Node objects
//! without kubelets, the way `resize-guard-scale` holds its pods.
//! Then it starts both binaries as their ServiceAccounts, waits until both answer `/readyz` and
//! the controller leads (the controller of some versions caches pods only while leading), waits
//! `--settle` more (printing `VmRSS` every second to stderr), reads `VmRSS`, `VmHWM` and
//! `RssAnon` from `/proc/<pid>/status`, prints one table line per program and stops everything.
//!
//! By default the pods exist before the programs start (a restart or rollout into a running
//! cluster: the pods come in the initial list); `--programs-first` creates them after both are
//! ready (they come one by one through the watch).
//!
//! Only flags every version accepts are passed; `--certificates=external` (the controller
//! leaves certificates alone) only when the controller's `--help` lists it. The programs inherit
//! this process's environment (e.g. `MALLOC_ARENA_MAX`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_lab::programs::{
    Memory, ProgramBinaries, ProgramPaths, Programs, copy_logs, install_deploy, mib,
};
use resize_guard_lab::scale_pods::{self, Layout};

/// Resident memory of resize-guard's webhook and controller on a realistic pod set.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    programs: ProgramPaths,
    /// Pods to create.
    #[arg(long, default_value_t = 3000)]
    pods: usize,
    /// Namespaces the pods are spread over.
    #[arg(long, default_value_t = 50)]
    namespaces: usize,
    /// Nodes the pods are spread over.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Create the Nodes with their status and give every pod a `Running` status (bench data: no
    /// kubelet runs behind these nodes).
    #[arg(long)]
    running: bool,
    /// Seconds to wait after both programs are ready (and the controller leads) before reading
    /// their memory.
    #[arg(long, default_value_t = 5)]
    settle: u64,
    /// Concurrent API requests while creating the pods.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// A label for the table lines (e.g. `before`, `after`).
    #[arg(long, default_value = "-")]
    label: String,
    /// Seconds each program may take to become ready.
    #[arg(long, default_value_t = 300)]
    ready_timeout: u64,
    /// Start the programs on the empty cluster and create the pods after they are ready (the
    /// pods then arrive through their watches one by one instead of in the initial list).
    #[arg(long)]
    programs_first: bool,
    /// Copy the control plane's logs (API server, audit, both programs) into this directory.
    #[arg(long)]
    logs: Option<PathBuf>,
}

impl Args {
    fn layout(&self) -> Layout {
        Layout {
            namespaces: self.namespaces,
            nodes: self.nodes,
            running: self.running,
        }
    }
}

fn main() -> anyhow::Result<()> {
    resize_guard_lab::programs::init_tool();
    let args = Args::parse();
    args.layout().validate()?;
    anyhow::ensure!(args.concurrency > 0, "--concurrency must be positive");
    let bins = ProgramBinaries::new(&args.programs.webhook, &args.programs.controller)?;

    eprintln!("rss: starting etcd and kube-apiserver …");
    let cp = ControlPlane::start(&Options::default())?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(measure(&cp, &args, &bins));
    if let Some(dir) = &args.logs {
        copy_logs(cp.dir(), dir)?;
        eprintln!("rss: logs copied to {}", dir.display());
    }
    let lines = result?;
    println!("| label | program | pods | VmRSS MiB | VmHWM MiB | RssAnon MiB | ready after s |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for line in lines {
        println!("{line}");
    }
    drop(rt);
    drop(cp);
    Ok(())
}

async fn measure(
    cp: &ControlPlane,
    args: &Args,
    bins: &ProgramBinaries,
) -> anyhow::Result<Vec<String>> {
    let client = cp.client().await?;
    let kubectl = Kubectl::admin(cp);
    install_deploy(&kubectl).await?;
    if !args.programs_first {
        create_all(&client, args).await?;
    }

    let programs = Programs::start(cp, bins, "rss", "")?;
    let ready = programs
        .wait_ready(Duration::from_secs(args.ready_timeout))
        .await?;
    eprintln!(
        "rss: webhook ready after {:.1?}, controller ready after {:.1?} and leading",
        ready.webhook, ready.controller
    );
    if args.programs_first {
        create_all(&client, args).await?;
    }
    eprintln!("rss: settling {} s", args.settle);
    // The trajectory goes to stderr: a value still moving at the end means --settle is short.
    programs.settle("rss", args.settle).await?;

    let (webhook, controller) = programs.memory()?;
    let line = |name: &str, m: Memory, ready: Duration| {
        format!(
            "| {} | {name} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            args.label,
            args.pods,
            mib(m.vm_rss),
            mib(m.vm_hwm),
            mib(m.rss_anon),
            ready.as_secs_f64()
        )
    };
    let lines = vec![
        line("webhook", webhook, ready.webhook),
        line("controller", controller, ready.controller),
    ];
    drop(programs);
    Ok(lines)
}

/// Namespaces, nodes and pods, timed, and a description of one stored pod.
async fn create_all(client: &kube::Client, args: &Args) -> anyhow::Result<()> {
    let layout = args.layout();
    scale_pods::create_namespaces(client, &layout).await?;
    scale_pods::create_nodes(client, &layout, args.concurrency).await?;
    let created =
        scale_pods::create_pods(client, &layout, 0..args.pods, args.concurrency, "rss").await?;
    eprintln!(
        "rss: {} pods on {} nodes in {} namespaces created in {:.0?}",
        args.pods, args.nodes, args.namespaces, created.elapsed
    );
    eprintln!("rss: {}", scale_pods::describe_sample(client).await?);
    Ok(())
}
