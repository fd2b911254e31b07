//! `make upstream-e2e`: Kubernetes' own in-place resize e2e specs (test/e2e/common/node/pod_resize.go
//! and test/e2e/node/pod_resize.go of k8s.io/kubernetes v1.37.2, unmodified, compiled by
//! `scripts/build-upstream-e2e.sh`) on the real node (`tests/node/`): upstream's kubelet with
//! containerd and runc, kube-scheduler and kube-controller-manager, BusyBox imported into the
//! node's containerd under upstream's name. Once without resize-guard, once with it installed
//! exactly as `tests/e2e/real_node/mod.rs` installs it (`make push`, `kubectl apply -k deploy/`)
//! and metrics-server beside it. Specs that need a clean node (`[Serial]`) run after the others,
//! one at a time (the whole run is serial). Each mode's JUnit report is compared spec by spec with
//! `tests/upstream-e2e/expected.tsv` (`resize_guard_lab::upstream_specs`); any difference fails
//! the run and is printed. Reports and logs go under `target/upstream-e2e/`; `--reports-only` judges
//! the last run's reports again (after editing the table).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::install::repo_root;
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::metrics_server::MetricsServer;
use resize_guard_harness::objects::wait_object;
use resize_guard_harness::real_node::{self, RealNode};
use resize_guard_lab::upstream_specs::{
    Expectations, Mode, Outcome, Verdict, between_modes, compare, merge, parse_junit,
};

/// What every spec's name contains (pod_resize.go's `SIGDescribe`s; not the pod-level "PLR Pod
/// InPlace Resize" specs of pod_level_resources_resize.go).
const FOCUS: &str = "[sig-node] Pod InPlace Resize";
/// [`FOCUS`] as ginkgo's `--ginkgo.focus` regular expression.
const FOCUS_REGEX: &str = r"\[sig-node\] Pod InPlace Resize";
/// The specs' test binary, `resize-e2e.test` in the directory `scripts/build-upstream-e2e.sh`
/// prints, beside `busybox.oci.tar` and `busybox.ref` (the Makefile sets it).
const BIN_ENV: &str = "RESIZE_GUARD_UPSTREAM_E2E_BIN";

#[derive(Debug, Parser)]
#[command(
    about = "Kubernetes' in-place resize e2e specs on the real node, without and with resize-guard"
)]
struct Args {
    /// Which modes: without, with, or both.
    #[arg(long, default_value = "both", value_parser = ["without", "with", "both"])]
    mode: String,
    /// Only specs whose name matches this regular expression (ginkgo's --focus, instead of the
    /// resize specs' prefix); the table is then checked only for the specs that ran.
    #[arg(long)]
    focus: Option<String>,
    /// The expectations table.
    #[arg(long, default_value = "tests/upstream-e2e/expected.tsv")]
    expected: PathBuf,
    /// Where reports and logs go.
    #[arg(long, default_value = "target/upstream-e2e")]
    out: PathBuf,
    /// Processes for the specs that share the node (`ginkgo -p --procs`); 1 runs them one at a
    /// time. `[Serial]` specs always run alone, afterwards.
    #[arg(long, default_value_t = 3)]
    procs: u32,
    /// Run nothing: judge the reports a previous run left in --out against the table again
    /// (after editing the table).
    #[arg(long)]
    reports_only: bool,
}

/// The specs the runner leaves out (a ginkgo label filter): those whose feature gate is off by
/// default in v1.37.2 (`Feature:OffByDefault`: alpha, or beta off by default), since the control
/// plane and the node run with default gates.
const LABEL_FILTER: &str = "!Feature:OffByDefault";

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = repo_root().canonicalize()?;
    let bin = std::env::var_os(BIN_ENV)
        .map(PathBuf::from)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "set {BIN_ENV} to \"$(scripts/build-upstream-e2e.sh | tail -n 1)/resize-e2e.test\""
            )
        })?;
    let dir = bin
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{BIN_ENV}={}: no directory", bin.display()))?
        .to_owned();
    let table_path = root.join(&args.expected);
    let table = Expectations::parse(&std::fs::read_to_string(&table_path)?)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", table_path.display()))?;
    let out = root.join(&args.out);
    std::fs::create_dir_all(&out)?;
    let modes = match args.mode.as_str() {
        "without" => vec![Mode::Without],
        "with" => vec![Mode::With],
        _ => vec![Mode::Without, Mode::With],
    };
    let mut failed = false;
    let mut results = Vec::new();
    for mode in modes {
        let started = Instant::now();
        println!("upstream-e2e: {} …", mode.name());
        let observed = if args.reports_only {
            read_reports(mode, &out)?
        } else {
            run_mode(mode, &dir, &out, args.focus.as_deref(), args.procs)?
        };
        let mut verdict = compare(&observed, &table, mode);
        if args.focus.is_some() {
            // A focused run judges only what ran.
            verdict
                .differences
                .retain(|d| matches!(d.observed, Some(Outcome::Passed | Outcome::Failed(_))));
        }
        report(mode, &verdict, started.elapsed());
        failed |= !verdict.differences.is_empty();
        results.push((mode, observed));
    }
    if let [(_, without), (_, with)] = &results[..] {
        let differ = between_modes(without, with);
        println!(
            "upstream-e2e: {} specs differ between the modes{}",
            differ.len(),
            if differ.is_empty() { "" } else { ":" }
        );
        for d in differ {
            println!("  {d}");
        }
    }
    if failed {
        println!(
            "upstream-e2e: FAILED: outcomes differ from {}",
            table_path.display()
        );
        std::process::exit(1);
    }
    println!(
        "upstream-e2e: every outcome is as {} says",
        table_path.display()
    );
    Ok(())
}

fn report(mode: Mode, v: &Verdict, took: Duration) {
    println!(
        "upstream-e2e: {}: {} passed, {} known deviations, {} skipped as listed, {} differ from the table ({} s)",
        mode.name(),
        v.passed,
        v.deviations,
        v.skipped,
        v.differences.len(),
        took.as_secs()
    );
    for d in &v.differences {
        println!("  DIFFERS: {d}");
    }
}

/// The phases a mode runs, in order, with the ginkgo label filter that picks each one's specs.
const PHASES: [(&str, &str); 2] = [("parallel", "!Serial"), ("serial", "Serial")];

fn report_path(out: &Path, mode: Mode, phase: &str) -> PathBuf {
    out.join(format!("{}-{phase}.xml", mode.name()))
}

/// The outcomes in the reports an earlier run of `mode` wrote under `out`.
fn read_reports(
    mode: Mode,
    out: &Path,
) -> anyhow::Result<std::collections::BTreeMap<String, Outcome>> {
    let mut runs = Vec::new();
    for (phase, _) in PHASES {
        let path = report_path(out, mode, phase);
        let xml = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        runs.push(parse_junit(&xml, FOCUS)?);
    }
    Ok(merge(runs))
}

/// One mode: a fresh control plane and real node, then the specs.
fn run_mode(
    mode: Mode,
    dir: &Path,
    out: &Path,
    focus: Option<&str>,
    procs: u32,
) -> anyhow::Result<std::collections::BTreeMap<String, Outcome>> {
    let mut node = RealNode::prepare()?;
    let cp = ControlPlane::start(&Options {
        real_node_host: Some(real_node::HOST.to_owned()),
        ..Options::default()
    })?;
    cp.start_scheduler(&[])?;
    // The ResourceQuota specs need the quota's status.used, which its controller computes.
    cp.start_controller_manager_with(&["resourcequota-controller"])?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(Box::pin(specs(
        mode, &cp, &mut node, dir, out, focus, procs,
    )));
    if let Err(e) = &result {
        eprintln!(
            "upstream-e2e: {}: {e:#}\n{}\n--- kubelet ---\n{}",
            mode.name(),
            cp.dump_logs(),
            node.log_tail("kubelet", 6000)
        );
    }
    drop(rt);
    drop(cp);
    let stopped = node.stop();
    let observed = result?;
    stopped.map_err(|e| anyhow::anyhow!("the real node left something behind: {e:#}"))?;
    Ok(observed)
}

async fn specs(
    mode: Mode,
    cp: &ControlPlane,
    node: &mut RealNode,
    dir: &Path,
    out: &Path,
    focus: Option<&str>,
    procs: u32,
) -> anyhow::Result<std::collections::BTreeMap<String, Outcome>> {
    let ready = node.start(cp).await?;
    println!("upstream-e2e: node Ready in {} ms", ready.as_millis());
    let busybox = dir.join("busybox.oci.tar");
    node.import_images(std::slice::from_ref(&busybox))?;
    println!(
        "upstream-e2e: {} imported into the node",
        std::fs::read_to_string(dir.join("busybox.ref"))?.trim()
    );
    let mut metrics = None;
    if mode == Mode::With {
        install(cp).await?;
        metrics = Some(MetricsServer::start(cp).await?);
        println!("upstream-e2e: resize-guard installed from deploy/, metrics-server Available");
    }
    let kubeconfig = cp.kubeconfig_path();
    let mut runs = Vec::new();
    // The specs that share the node first, then the [Serial] ones.
    for (phase, serial) in PHASES {
        let report = report_path(out, mode, phase);
        let log = out.join(format!("{}-{phase}.log", mode.name()));
        let _ = std::fs::remove_file(&report);
        // ginkgo's own flags, for its CLI (parallel processes) or the test binary itself.
        let ginkgo = [
            format!("focus={}", focus.unwrap_or(FOCUS_REGEX)),
            format!("label-filter={LABEL_FILTER} && {serial}"),
            format!("junit-report={}", report.display()),
            "timeout=4h".to_owned(),
            "no-color".to_owned(),
            "v".to_owned(),
        ];
        let kubeconfig = format!("--kubeconfig={}", kubeconfig.display());
        let mut cmd = if serial == "!Serial" && procs > 1 {
            let mut c = tokio::process::Command::new(dir.join("ginkgo"));
            c.arg("run")
                .arg("-p")
                .arg(format!("--procs={procs}"))
                .args(ginkgo.iter().map(|f| format!("--{f}")))
                .arg(dir.join("resize-e2e.test"))
                .arg("--")
                .arg(&kubeconfig);
            c
        } else {
            let mut c = tokio::process::Command::new(dir.join("resize-e2e.test"));
            c.arg(&kubeconfig)
                .args(ginkgo.iter().map(|f| format!("--ginkgo.{f}")));
            c
        };
        let file = std::fs::File::create(&log)?;
        cmd.stdout(Stdio::from(file.try_clone()?))
            .stderr(Stdio::from(file))
            .kill_on_drop(true);
        let started = Instant::now();
        let status = cmd.status().await?;
        let xml = std::fs::read_to_string(&report).map_err(|e| {
            anyhow::anyhow!(
                "{} wrote no report ({status}; log {}): {e}",
                dir.join("resize-e2e.test").display(),
                log.display()
            )
        })?;
        let specs = parse_junit(&xml, FOCUS)?;
        let ran = specs
            .values()
            .filter(|o| !matches!(o, Outcome::Skipped(_)))
            .count();
        println!(
            "upstream-e2e: {} {phase}: {ran} specs ran in {} s ({status}; {})",
            mode.name(),
            started.elapsed().as_secs(),
            log.display()
        );
        runs.push(specs);
    }
    if let Some(mut m) = metrics {
        m.stop();
    }
    Ok(merge(runs))
}

/// resize-guard as `tests/e2e/real_node/mod.rs` installs it: the images `make image` wrote,
/// pushed with `make push` to the registry the node pulls from, and `kubectl apply -k deploy/`.
async fn install(cp: &ControlPlane) -> anyhow::Result<()> {
    real_node::push_images()?;
    let kubectl = Kubectl::admin(cp);
    let deploy = repo_root().join("deploy");
    let out = kubectl
        .run(["apply", "-k", &deploy.display().to_string()])
        .await?;
    anyhow::ensure!(out.success, "kubectl apply -k deploy/: {}", out.stderr);
    let deployments: Api<Deployment> = Api::namespaced(cp.client().await?, "resize-guard");
    for name in ["resize-guard-webhook", "resize-guard-controller"] {
        wait_object(&deployments, name, Duration::from_secs(180), |d| {
            d.status
                .as_ref()
                .is_some_and(|s| s.available_replicas == Some(2) && s.updated_replicas == Some(2))
        })
        .await?;
    }
    let bundle = kubectl.ca_bundle().await?;
    anyhow::ensure!(!bundle.stdout.trim().is_empty(), "no caBundle injected");
    Ok(())
}
