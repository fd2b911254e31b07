//! `make vpa-lag`: wall 3, the Vertical Pod Autoscaler's lag from a usage change to the resize
//! applied in place, measured with VPA v1.6.0's recommender, updater and admission controller
//! and metrics-server v0.8.0 (10 s resolution) against a real control plane with a hollow node
//! (`resize_guard_harness::vpa::usage_loop::wall3`). `--preset defaults` runs VPA with its own
//! defaults (a step may take many minutes, or never come: each gives up after `--timeout`);
//! `--preset shortest` with the shortest intervals VPA supports (`make test` runs that one in
//! `tests/e2e/vpa/usage_loop.rs`). Prints one row per step, seconds from the usage change.

use std::time::Duration;

use clap::{Parser, ValueEnum};
use resize_guard_harness::env::{EnvOptions, shared_with_workloads};
use resize_guard_harness::metrics_server::MetricsServer;
use resize_guard_harness::vpa::usage_loop::wall3;
use resize_guard_harness::vpa::{Recommender, Vpa, VpaIntervals, VpaOptions};

/// Which VPA settings.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Preset {
    /// VPA's own defaults.
    Defaults,
    /// The shortest intervals VPA supports.
    Shortest,
}

/// Measure VPA's loop: usage change → PodMetrics → recommendation → in-place resize.
#[derive(Debug, Parser)]
struct Args {
    /// VPA's settings.
    #[arg(long, value_enum, default_value = "defaults")]
    preset: Preset,
    /// Replicas of the Deployment (VPA's default `--min-replicas` is 2: one replica is never
    /// updated with the defaults).
    #[arg(long, default_value_t = 2)]
    replicas: i32,
    /// Also measure a drop back after the rise.
    #[arg(long)]
    drop: bool,
    /// Give up on a step after this many seconds.
    #[arg(long, default_value_t = 720)]
    timeout: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let intervals = match args.preset {
        Preset::Defaults => VpaIntervals::Defaults,
        Preset::Shortest => VpaIntervals::Shortest,
    };
    eprintln!(
        "vpa-lag: starting the control plane, metrics-server and VPA ({:?}) …",
        args.preset
    );
    let (env, rt) = shared_with_workloads(EnvOptions::default())?;
    rt.block_on(async {
        let _metrics = MetricsServer::start(&env.cp).await?;
        let vpa = Vpa::start(&env.cp, VpaOptions::with_intervals(intervals)).await?;
        let _recommender = Recommender::start(&env.cp, intervals, &[]).await?;
        let timeout = Duration::from_secs(args.timeout);
        let outcome = wall3(env, &vpa, args.replicas, args.drop, timeout).await?;
        println!(
            "\nwall 3, VPA {:?}, {} replica(s), seconds from the usage change:\n\
             | step | PodMetrics | recommendation | PATCHed | applied by kubelet |\n|---|---|---|---|---|",
            args.preset, args.replicas
        );
        for s in &outcome.steps {
            println!("{}", s.row());
        }
        for s in &outcome.steps {
            if s.applied.is_none() {
                println!("  {} stopped at: {:?}", s.label, s.stopped_at);
            }
        }
        println!(
            "in place: {} (restarts {})",
            outcome.same_pods, outcome.restarts
        );
        anyhow::Ok(())
    })
}
