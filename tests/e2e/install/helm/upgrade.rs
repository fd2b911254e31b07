//! Upgrading a real 0.1 install: the 0.1 chart, taken from git history (the commit before the
//! 0.2.0 release), installed as an operator did; `helm upgrade --reuse-values` to this chart
//! refuses with the one command that upgrades, and that command, run as printed (the chart path
//! and images filled in), upgrades it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

use resize_guard_harness::env::alone;
use resize_guard_harness::install::repo_root;

use super::{CHART, CLUSTER, helm, kubectl, path};

/// The last commit whose chart is 0.1.0 (the parent of the 0.2.0 release commit).
const CHART_0_1: &str = "b631374^";

/// `charts/resize-guard` as of [`CHART_0_1`], extracted into `dir`.
fn chart_0_1(dir: &std::path::Path) -> String {
    let archive = Command::new("git")
        .args(["archive", "--format=tar", CHART_0_1, "charts/resize-guard"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        archive.status.success(),
        "git archive {CHART_0_1} (a shallow clone lacks the 0.1 chart: fetch the history): {}",
        String::from_utf8_lossy(&archive.stderr)
    );
    let tar = dir.join("chart.tar");
    std::fs::write(&tar, &archive.stdout).unwrap();
    let untar = Command::new("tar")
        .arg("-xf")
        .arg(&tar)
        .arg("-C")
        .arg(dir)
        .status()
        .unwrap();
    assert!(untar.success());
    let chart = dir.join("charts/resize-guard");
    let version = std::fs::read_to_string(chart.join("Chart.yaml")).unwrap();
    assert!(version.contains("\nversion: 0.1.0\n"), "{version}");
    chart.display().to_string()
}

#[tokio::test]
async fn a_0_1_install_upgrades_with_the_command_reuse_values_names() {
    let (env, _alone) = alone(&CLUSTER).await;
    let helm = helm();
    let ns = "resize-guard-upgrade";
    let kubeconfig = env.cp.kubeconfig_path().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let old = chart_0_1(dir.path());
    let chart = path(CHART);

    // 0.1 as its values.yaml told an operator to install it (its Namespace left to Helm here),
    // the Deployments at 0 replicas: nothing runs in this cluster.
    let common = super::idle(ns, &kubeconfig);
    let mut install = vec![
        "install",
        "resize-guard",
        &old,
        "--create-namespace",
        "--set",
        "namespace.create=false",
    ];
    install.extend(common);
    helm.ok(&install).await;

    // --reuse-values: refused before anything changes, naming the command.
    let refused = helm
        .run(&[
            "upgrade",
            "resize-guard",
            &chart,
            "--namespace",
            ns,
            "--kubeconfig",
            &kubeconfig,
            "--reuse-values",
        ])
        .await;
    assert!(!refused.success, "{}", refused.stdout);
    let command = refused
        .stderr
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("helm upgrade resize-guard <chart>"))
        .unwrap_or_else(|| panic!("no upgrade command in:\n{}", refused.stderr))
        .to_owned();
    assert!(
        command.contains(&format!("-n {ns} --reset-then-reuse-values")),
        "{command}"
    );
    let digest = format!("sha256:{}", "cd".repeat(32));
    let run = command
        .replace("<chart>", &chart)
        .replace(
            "image.webhook.repository=…",
            "image.webhook.repository=registry.example/rg/resize-guard-webhook",
        )
        .replace(
            "image.controller.repository=…",
            "image.controller.repository=registry.example/rg/resize-guard-controller",
        )
        .replace("digest=…", &format!("digest={digest}"));
    assert!(!run.contains('…') && !run.contains('<'), "{run}");
    let mut args: Vec<&str> = run.split(' ').skip(1).collect();
    args.extend(["--kubeconfig", &kubeconfig]);
    let upgraded = helm.ok(&args).await;
    assert!(
        upgraded.stdout.contains("STATUS: deployed"),
        "{}",
        upgraded.stdout
    );

    // 0.2's layout, with what the operator set in 0.1 kept (0 replicas) and the images named.
    let deployment = kubectl(
        env,
        &[
            "get",
            "deployment",
            "resize-guard-webhook",
            "-n",
            ns,
            "-o",
            "json",
        ],
    )
    .await;
    let deployment: serde_json::Value = serde_json::from_str(&deployment).unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["containerPort"], 10250);
    assert_eq!(
        container["image"],
        format!("registry.example/rg/resize-guard-webhook@{digest}")
    );
    assert_eq!(deployment["spec"]["replicas"], 0);
    let policy = kubectl(
        env,
        &[
            "get",
            "configmap",
            "resize-guard",
            "-n",
            ns,
            "-o",
            "jsonpath={.data.policy\\.yaml}",
        ],
    )
    .await;
    assert!(policy.starts_with("mode: enforce\n"), "{policy}");
    helm.ok(&[
        "uninstall",
        "resize-guard",
        "--namespace",
        ns,
        "--kubeconfig",
        &kubeconfig,
    ])
    .await;
}
