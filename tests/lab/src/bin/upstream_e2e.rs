//! `make upstream-e2e`: Kubernetes' own in-place resize e2e specs
//! (test/e2e/common/node/pod_resize.go and test/e2e/node/pod_resize.go of k8s.io/kubernetes
//! v1.37.2, unmodified, compiled by `third_party/upstream-e2e/build.sh`) on the real node
//! (`tests/node/`): upstream's kubelet with containerd and runc, kube-scheduler and
//! kube-controller-manager, BusyBox imported into the node's containerd under upstream's name. Once
//! without resize-guard, once with it installed exactly as `tests/e2e/real_node/mod.rs` installs it
//! (`make push`, `kubectl apply -k deploy/`) and metrics-server beside it. Specs that need a clean
//! node (`[Serial]`) run after the others, one at a time (the whole run is serial). Each mode's
//! JUnit report is compared spec by spec with `third_party/upstream-e2e/expected.tsv`
//! (`resize_guard_lab::upstream_specs`); a difference fails the run and is printed. Reports and
//! logs go under `target/upstream-e2e/`; `--reports-only` judges the last run's reports again
//! (after editing the table).
//!
//! **Upstream's own resize preemption spec** (`deferred-resize-preemption`, alpha gate
//! `InPlacePodVerticalScalingSchedulerPreemption`) runs twice: with resize-guard and the gate
//! off (a last phase of the `with` mode, under [`PREEMPTION_POLICY`]'s two changes), and in a
//! third mode, `gate`, with the gate on in kube-apiserver, kube-scheduler and the kubelet and no
//! resize-guard. Each run's wait of the spec's preemptor is printed and written to
//! `preemption-<mode>.json` ([`PreemptionTimes`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use resize_guard_bench::{Row, rows_json, write_summary};
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::install::repo_root;
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::metrics_server::MetricsServer;
use resize_guard_harness::objects::wait_object;
use resize_guard_harness::real_node::{self, RealNode};
use resize_guard_lab::upstream_specs::{
    Expectations, Mode, Outcome, PreemptionTimes, STEP_TIME_FORMAT, Verdict, between_modes,
    compare, merge, parse_junit,
};

/// What every spec's name contains (pod_resize.go's `SIGDescribe`s; not the pod-level "PLR Pod
/// InPlace Resize" specs of pod_level_resources_resize.go).
const FOCUS: &str = "[sig-node] Pod InPlace Resize";
/// [`FOCUS`] as ginkgo's `--ginkgo.focus` regular expression.
const FOCUS_REGEX: &str = r"\[sig-node\] Pod InPlace Resize";
/// The specs' test binary, `resize-e2e.test` in the directory `third_party/upstream-e2e/build.sh`
/// prints, beside `busybox.oci.tar` and `busybox.ref` (the Makefile sets it).
const BIN_ENV: &str = "RESIZE_GUARD_UPSTREAM_E2E_BIN";

#[derive(Debug, Parser)]
#[command(
    about = "Kubernetes' in-place resize e2e specs on the real node, without and with resize-guard"
)]
struct Args {
    /// Which modes: without, with, gate (the alpha preemption gate on, no resize-guard), or all.
    #[arg(long, default_value = "all", value_parser = ["without", "with", "gate", "all"])]
    mode: String,
    /// Only specs whose name matches this regular expression (ginkgo's --focus, instead of the
    /// resize specs' prefix); the table is then checked only for the specs that ran.
    #[arg(long)]
    focus: Option<String>,
    /// The expectations table.
    #[arg(long, default_value = "third_party/upstream-e2e/expected.tsv")]
    expected: PathBuf,
    /// Where reports and logs go.
    #[arg(long, default_value = "target/upstream-e2e")]
    out: PathBuf,
    /// Processes for the specs that share the node (`ginkgo -p --procs`); 1 runs them one at a
    /// time. `[Serial]` specs always run alone, afterwards.
    #[arg(long, default_value_t = 3)]
    procs: u32,
    /// Only the short subset ([`SHORT`], one or two specs of every group), as `make test` runs it.
    #[arg(long, conflicts_with = "focus")]
    short: bool,
    /// Run nothing: judge the reports a previous run left in --out against the table again
    /// (after editing the table).
    #[arg(long)]
    reports_only: bool,
}

/// The short subset (`--short`, `make upstream-e2e-short`, part of `make test`): a spec or two of
/// every group, each a fragment of its name. Every fragment must match a spec that ran.
const SHORT: [&str; 11] = [
    // The conformance specs.
    "burstable pods - extended resize with equivalents",
    "resize pod via the replace endpoint",
    // Invalid patches: a QoS change (refused by resize-guard in Kubernetes' shape), and one that
    // only upstream refuses.
    "Burstable pod - set requests == limits",
    "Guaranteed pod - rename containers",
    // The scheduler-focused spec (a resize beyond allocatable: `NodeCapacity`).
    "pod-resize-scheduler-tests",
    // Deferred retries.
    "pod-resize-retry-deferred-test-1",
    // ResourceQuota and LimitRanger.
    "pod-resize-resource-quota-test exceed maximum CPU and Memory",
    "pod-resize-limit-ranger-test exceed maximum Memory and CPU",
    // Memory below usage (resize-guard's memory rule, a named deviation).
    "decrease memory limit below usage",
    // A resize with no restart, in place.
    "guaranteed qos - 1 container with resize policy [Feature:InPlacePodVerticalScaling] no restart resizing cpu & mem in opposite directions",
    // Upstream's resize preemption, its gate off.
    "(deferred-resize-preemption)",
];

/// [`SHORT`] as one `--ginkgo.focus` regular expression.
fn short_focus() -> String {
    let escape = |s: &str| {
        s.chars().fold(String::new(), |mut out, c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
            out
        })
    };
    SHORT
        .iter()
        .map(|s| escape(s))
        .collect::<Vec<_>>()
        .join("|")
}

/// The alpha gate of upstream's resize preemption.
const GATE: &str = "InPlacePodVerticalScalingSchedulerPreemption=true";
/// Upstream's resize preemption spec, as `--ginkgo.focus`.
const PREEMPTION_FOCUS: &str = r"\(deferred-resize-preemption\)";
/// What the `with` mode changes in the installed policy before that spec, each `(from, to)` on
/// the text of `policy.yaml`: its pods are bare (nothing recreates them), so they may be victims
/// only with `allowBarePodVictims`; and with the gate off kube-apiserver drops the node's
/// `spec.podPreemptionPolicy` (`pkg/registry/core/node/strategy.go`, `PrepareForUpdate`), so
/// the spec's 10 s "victim NOT preempted while the node opts out" holds only if resize-guard waits
/// that long anyway (`minDeferredSeconds`, counted from the first resize's Deferred condition).
const PREEMPTION_POLICY: [(&str, &str); 2] = [
    ("allowBarePodVictims: false", "allowBarePodVictims: true"),
    (
        "preemption:\n  enabled: true\n",
        "preemption:\n  enabled: true\n  minDeferredSeconds: 20\n",
    ),
];
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = repo_root().canonicalize()?;
    let bin = std::env::var_os(BIN_ENV)
        .map(PathBuf::from)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "set {BIN_ENV} to \"$(third_party/upstream-e2e/build.sh | tail -n 1)/resize-e2e.test\""
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
        "gate" => vec![Mode::Gate],
        _ => vec![Mode::Without, Mode::With, Mode::Gate],
    };
    let focus = if args.short {
        Some(short_focus())
    } else {
        args.focus.clone()
    };
    let mut failed = false;
    let mut results = Vec::new();
    for mode in modes {
        let started = Instant::now();
        println!("upstream-e2e: {} …", mode.name());
        let observed = if args.reports_only {
            read_reports(mode, &out)?
        } else {
            run_mode(mode, &dir, &out, focus.as_deref(), args.procs)?
        };
        let mut verdict = compare(&observed, &table, mode);
        if focus.is_some() {
            // A focused run judges only what ran.
            verdict
                .differences
                .retain(|d| matches!(d.observed, Some(Outcome::Passed | Outcome::Failed(_))));
        }
        if args.short && mode != Mode::Gate {
            for fragment in SHORT {
                let ran = observed
                    .iter()
                    .any(|(name, o)| name.contains(fragment) && !matches!(o, Outcome::Skipped(_)));
                if !ran {
                    println!("  DIFFERS: no spec of the short subset's {fragment:?} ran");
                    failed = true;
                }
            }
        }
        report(mode, &verdict, started.elapsed());
        failed |= !verdict.differences.is_empty();
        results.push((mode, observed));
    }
    if let [(_, without), (_, with), ..] = &results[..] {
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

/// One ginkgo run of a mode: its name, and the focus and label filter that pick its specs.
#[derive(Debug, Clone, Copy)]
struct Phase {
    name: &'static str,
    focus: &'static str,
    labels: &'static str,
}

// The label filters leave out the specs whose feature gate is off by default in v1.37.2
// (`Feature:OffByDefault`: alpha, or beta off by default), since the control plane and the node
// run with default gates; the preemption phase picks its alpha spec by name instead.

/// The specs that share the node.
const PARALLEL: Phase = Phase {
    name: "parallel",
    focus: FOCUS_REGEX,
    labels: "!Feature:OffByDefault && !Serial",
};
/// The `[Serial]` specs, one at a time after them.
const SERIAL: Phase = Phase {
    name: "serial",
    focus: FOCUS_REGEX,
    labels: "!Feature:OffByDefault && Serial",
};
/// Upstream's resize preemption spec alone.
const PREEMPTION: Phase = Phase {
    name: "preemption",
    focus: PREEMPTION_FOCUS,
    labels: "Serial",
};

/// The phases `mode` runs, in order.
fn phases(mode: Mode) -> &'static [Phase] {
    match mode {
        Mode::Without => &[PARALLEL, SERIAL],
        Mode::With => &[PARALLEL, SERIAL, PREEMPTION],
        Mode::Gate => &[PREEMPTION],
    }
}

fn report_path(out: &Path, mode: Mode, phase: &str) -> PathBuf {
    out.join(format!("{}-{phase}.xml", mode.name()))
}

/// The outcomes in the reports an earlier run of `mode` wrote under `out`.
fn read_reports(
    mode: Mode,
    out: &Path,
) -> anyhow::Result<std::collections::BTreeMap<String, Outcome>> {
    let mut runs = Vec::new();
    for phase in phases(mode) {
        let path = report_path(out, mode, phase.name);
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
    let gates: &[&str] = if mode == Mode::Gate { &[GATE] } else { &[] };
    let mut node = RealNode::prepare()?;
    node.feature_gates = gates.iter().map(|g| (*g).to_owned()).collect();
    let cp = ControlPlane::start(&Options {
        real_node_host: Some(real_node::HOST.to_owned()),
        feature_gates: node.feature_gates.clone(),
    })?;
    cp.start_scheduler(gates)?;
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
    // The specs that share the node first, then the [Serial] ones, then the preemption spec.
    for phase in phases(mode) {
        let name = phase.name;
        if name == PREEMPTION.name
            && focus.is_some_and(|f| !f.contains("deferred-resize-preemption"))
        {
            continue;
        }
        if name == PREEMPTION.name && mode == Mode::With {
            preemption_policy(cp).await?;
        }
        let report = report_path(out, mode, name);
        let log = out.join(format!("{}-{name}.log", mode.name()));
        let _ = std::fs::remove_file(&report);
        // ginkgo's own flags, for its CLI (parallel processes) or the test binary itself.
        let ginkgo = [
            // The preemption phase runs its one spec whatever the focus (it ran only if the
            // focus names it).
            format!(
                "focus={}",
                focus
                    .filter(|_| name != PREEMPTION.name)
                    .unwrap_or(phase.focus)
            ),
            format!("label-filter={}", phase.labels),
            format!("junit-report={}", report.display()),
            "timeout=4h".to_owned(),
            "no-color".to_owned(),
            "v".to_owned(),
        ];
        let kubeconfig = format!("--kubeconfig={}", kubeconfig.display());
        let mut cmd = if name == PARALLEL.name && procs > 1 {
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
            .env("GINKGO_TIME_FORMAT", STEP_TIME_FORMAT)
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
            "upstream-e2e: {} {name}: {ran} specs ran in {} s ({status}; {})",
            mode.name(),
            started.elapsed().as_secs(),
            log.display()
        );
        if name == PREEMPTION.name {
            preemption_times(mode, out, &std::fs::read_to_string(&log)?)?;
        }
        runs.push(specs);
    }
    if let Some(mut m) = metrics {
        m.stop();
    }
    Ok(merge(runs))
}

/// Prints how long the preemption spec's preemptor waited and writes it to
/// `preemption-<mode>.json` (nothing when the spec stopped before its resize was applied).
fn preemption_times(mode: Mode, out: &Path, log: &str) -> anyhow::Result<()> {
    let path = out.join(format!("preemption-{}.json", mode.name()));
    let _ = std::fs::remove_file(&path);
    let Some(t) = PreemptionTimes::read(log) else {
        println!(
            "upstream-e2e: {}: the preemptor was never resized",
            mode.name()
        );
        return Ok(());
    };
    println!(
        "upstream-e2e: {}: preemptor resized {:.1} s after its resize was asked (Deferred), {:.1} s after the node's opt-out was lifted",
        mode.name(),
        t.deferred_to_resized,
        t.allowed_to_resized
    );
    let json = serde_json::json!({
        "mode": mode.name(),
        "deferredToResizedSeconds": t.deferred_to_resized,
        "allowedToResizedSeconds": t.allowed_to_resized,
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&json)?)?;
    bench_row(out);
    Ok(())
}

/// The README's benchmark row (`target/bench/upstream_preemption.json`, `make bench-report`)
/// once both sides' waits are in `out`: resize-guard's (gate off) beside the alpha gate's.
fn bench_row(out: &Path) {
    let read = |mode: Mode| -> Option<(f64, f64)> {
        let path = out.join(format!("preemption-{}.json", mode.name()));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        Some((
            v["deferredToResizedSeconds"].as_f64()?,
            v["allowedToResizedSeconds"].as_f64()?,
        ))
    };
    let (Some(rg), Some(gate)) = (read(Mode::With), read(Mode::Gate)) else {
        return;
    };
    let row = Row::new(
        "upstream's own resize preemption spec (`deferred-resize-preemption`, test/e2e/node/pod_resize.go v1.37.2) on the real node: its preemptor's resize asked (Deferred) → applied, and the node's opt-out lifted → applied",
        "`make upstream-e2e MODE=with FOCUS=deferred-resize-preemption`, then `MODE=gate`",
    )
    .other(&format!(
        "resize-guard, gate off (`allowBarePodVictims: true`, `minDeferredSeconds: 20`): {:.1} s / {:.1} s; kube-scheduler and kubelet with `InPlacePodVerticalScalingSchedulerPreemption`, no resize-guard: {:.1} s / {:.1} s (one run each; the spec holds the node opted out for its first 10 s)",
        rg.0, rg.1, gate.0, gate.1
    ));
    write_summary(
        "upstream_preemption",
        &serde_json::json!({ "rows": rows_json(&[row]) }),
    );
}

/// Applies [`PREEMPTION_POLICY`] to the installed policy and waits until every controller
/// replica logged it loaded.
async fn preemption_policy(cp: &ControlPlane) -> anyhow::Result<()> {
    let client = cp.client().await?;
    let maps: Api<ConfigMap> = Api::namespaced(client, "resize-guard");
    let mut policy = maps
        .get("resize-guard")
        .await?
        .data
        .and_then(|d| d.get("policy.yaml").cloned())
        .ok_or_else(|| anyhow::anyhow!("ConfigMap resize-guard has no policy.yaml"))?;
    for (from, to) in PREEMPTION_POLICY {
        anyhow::ensure!(
            policy.contains(from),
            "the installed policy has no {from:?}:\n{policy}"
        );
        policy = policy.replacen(from, to, 1);
    }
    let patch = serde_json::json!({"data": {"policy.yaml": policy}});
    maps.patch(
        "resize-guard",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    let kubectl = Kubectl::admin(cp);
    let selector = "app.kubernetes.io/name=resize-guard,app.kubernetes.io/component=controller";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pods = kubectl
            .run([
                "get",
                "pods",
                "-n",
                "resize-guard",
                "-l",
                selector,
                "-o",
                "name",
            ])
            .await?;
        let mut loaded = 0;
        let names: Vec<&str> = pods.stdout.lines().collect();
        for pod in &names {
            let logs = kubectl.run(["logs", "-n", "resize-guard", pod]).await?;
            let latest = logs
                .stdout
                .lines()
                .rev()
                .find(|l| l.contains("policy loaded"));
            if latest.is_some_and(|l| {
                l.contains("allowBarePodVictims: true") && l.contains("minDeferredSeconds: 20")
            }) {
                loaded += 1;
            }
        }
        if !names.is_empty() && loaded == names.len() {
            println!("upstream-e2e: the controllers loaded the preemption spec's policy");
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{loaded} of {} controllers loaded the preemption spec's policy within 60 s",
            names.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// resize-guard as `tests/e2e/real_node/mod.rs` installs it: the images `make image` wrote,
/// pushed with `make push` to the registry the node pulls from, and `kubectl apply -k` of
/// `deploy/` with the `images:` block `make push` printed.
async fn install(cp: &ControlPlane) -> anyhow::Result<()> {
    let (_, own) = real_node::push_images()?;
    let kubectl = Kubectl::admin(cp);
    let out = kubectl
        .run(["apply", "-k", &own.display().to_string()])
        .await?;
    anyhow::ensure!(
        out.success,
        "kubectl apply -k deploy/ + images: {}",
        out.stderr
    );
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
