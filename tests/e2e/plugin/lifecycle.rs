//! `check` around an install, through the real `kubectl` v1.37.2 against a real kube-apiserver:
//!
//! 1. `check --pre` before anything is installed: as the cluster's administrator every check
//!    passes (exit 0) and the note says what cannot be checked from here; as a namespace's
//!    administrator (every verb on every resource in one namespace, installing there) the
//!    cluster-scoped kinds and the roles' cluster-wide grants are refused, named (exit 4).
//! 2. `check --wait=3s` with nothing installed gives up with the failed checks (exit 4).
//! 3. `check --wait` started before the install is still waiting when the install begins, and
//!    exits 0 once resize-guard is installed from `deploy/` and ready.
//! 4. The installed release against the plugin's: the controller's Deployment set to an image
//!    tagged 0.1.0 is a ‼ in `check` (exit 0), a warning under `status`, and `skew: true` in
//!    their documents; pinned by digest alone it is read from its `app.kubernetes.io/version`
//!    label. `check --pre` on the installed cluster says applying again upgrades it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, PostParams};
use resize_guard_harness::account::Account;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::installed::Installed;
use resize_guard_harness::text::assert_contains_all;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::command::{plugin_dir, rg_run};

/// The release of the plugin and of `deploy/` (one workspace version).
const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The first line of `text` starting with `prefix`.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
}

async fn kubectl(env: &Env, args: &[&str]) {
    let out = env.kubectl().run(args).await.unwrap();
    assert!(out.success, "kubectl {args:?}: {}", out.stderr);
}

/// Points the controller's Deployment at `registry.invalid/resize-guard/resize-guard-controller`
/// with `reference` (`:TAG` or `@DIGEST`).
async fn set_controller_image(env: &Env, reference: &str) {
    let image =
        format!("controller=registry.invalid/resize-guard/resize-guard-controller{reference}");
    let deployment = "deployment/resize-guard-controller";
    kubectl(
        env,
        &["-n", "resize-guard", "set", "image", deployment, &image],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_install_checks_a_wait_for_the_install_and_the_installed_release() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    for _ in 0..2 {
        env.node("life", "2", "4Gi").await;
    }

    // 1. --pre, as the administrator.
    let out = rg_run(env, &[], &["check", "--pre"]).await;
    println!("{}", out.stdout);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    for want in [
        "✓ Kubernetes v1.37.2 is supported (v1.33–v1.37 are tested)\n",
        "✓ the API server serves pods/resize\n",
        "✓ you may get, create, patch the 15 kinds deploy/ creates (cluster-wide, and in namespace resize-guard)\n",
        "✓ you may escalate and bind roles and clusterroles, so you may grant the programs their permissions\n",
        "✓ resize-guard is not installed yet (no webhook configuration named resize-guard)\n",
        "\nStatus check results are ✓\n",
        "note: not checked from here: whether the API server can reach the webhook's pods on port 10250",
    ] {
        assert!(
            out.stdout.contains(want),
            "{want:?} not in:\n{}",
            out.stdout
        );
    }
    assert!(line(&out.stdout, "✓ the API server https://").ends_with(" answers from here"));
    // The suite's own two hollow nodes (upstream's kubelet labels them kubernetes.io/os=linux).
    assert_eq!(
        line(&out.stdout, "✓ 2 Ready"),
        "✓ 2 Ready, schedulable Linux nodes for resize-guard's pods (the webhook's two replicas \
         spread across them)"
    );
    let doc = rg_run(env, &[], &["check", "--pre", "-o", "json"]).await;
    let doc: serde_json::Value = serde_json::from_str(&doc.stdout).unwrap();
    assert_eq!(
        (doc["mode"].as_str(), doc["failed"].as_u64()),
        (Some("preInstall"), Some(0))
    );
    assert_eq!(doc["notes"].as_array().unwrap().len(), 1);

    // 1. --pre, as a namespace's administrator installing into its namespace: everything in it,
    // nothing cluster-wide.
    let team = env.namespace("team").await;
    kubectl(env, &["create", "serviceaccount", "ops", "-n", &team]).await;
    let client = env.client().await;
    let everything: Role = serde_json::from_value(json!({
        "metadata": {"name": "everything"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), &team)
        .create(&PostParams::default(), &everything)
        .await
        .unwrap();
    kubectl(
        env,
        &[
            "create",
            "rolebinding",
            "ops",
            "-n",
            &team,
            "--role=everything",
            &format!("--serviceaccount={team}:ops"),
        ],
    )
    .await;
    let ops = Account::of(env, &team, "ops").await.unwrap();
    let as_ops = ops.kubeconfig.display().to_string();
    let out = rg_run(
        env,
        &[("KUBECONFIG", as_ops.as_str())],
        &["check", "--pre", "--install-namespace", &team],
    )
    .await;
    println!("{}", out.stdout);
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    let refused = line(&out.stdout, "✗ you may not ");
    assert_contains_all(
        refused,
        &[
            "get, create, patch namespaces cluster-wide",
            "get, create, patch priorityclasses.scheduling.k8s.io cluster-wide",
            "get, create, patch clusterroles.rbac.authorization.k8s.io cluster-wide",
            "get, create, patch mutatingwebhookconfigurations.admissionregistration.k8s.io cluster-wide",
        ],
    );
    // Nothing in its own namespace is refused.
    assert!(!refused.contains(&format!(" in {team}")), "{refused}");
    let refused = line(
        &out.stdout,
        "✗ the API server will refuse deploy/'s roles and bindings",
    );
    assert!(
        refused.contains("get, list, watch, patch pods cluster-wide"),
        "{refused}"
    );
    assert!(!refused.contains(&format!(" in {team}")), "{refused}");
    assert_eq!(
        line(&out.stdout, "‼ cannot list nodes: "),
        format!(
            "‼ cannot list nodes: nodes is forbidden: User \"system:serviceaccount:{team}:ops\" \
             cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );

    // 2. --wait with nothing installed.
    let out = rg_run(env, &[], &["check", "--wait=3s"]).await;
    println!("{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("✗ no webhook configuration named resize-guard (Mutating or Validating)\n")
    );
    assert!(
        line(&out.stdout, "Gave up waiting after ")
            .ends_with("the failed checks above did not pass within 3s"),
        "{}",
        out.stdout
    );
    assert!(
        line(&out.stderr, "waiting: ").contains("no webhook configuration named resize-guard"),
        "{}",
        out.stderr
    );

    // 3. --wait through the install.
    let k = env.kubectl();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![plugin_dir()];
    dirs.extend(std::env::split_paths(&path));
    let mut waiting = tokio::process::Command::new(&k.bin)
        .args(["resize-guard", "check", "--wait=120s", "-o", "json"])
        .env("KUBECONFIG", &k.kubeconfig)
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut progress = BufReader::new(waiting.stderr.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), progress.next_line())
        .await
        .expect("check --wait said nothing")
        .unwrap()
        .unwrap();
    assert!(first.starts_with("waiting: "), "{first}");
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "check --wait ended before the install"
    );
    let (_installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
    let drain = tokio::spawn(async move {
        let mut rest = Vec::new();
        while let Ok(Some(l)) = progress.next_line().await {
            rest.push(l);
        }
        rest
    });
    let done = tokio::time::timeout(Duration::from_secs(150), waiting.wait_with_output())
        .await
        .expect("check --wait outlived its timeout")
        .unwrap();
    let said = drain.await.unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert_eq!(done.status.code(), Some(0), "{stdout}\n{first}\n{said:?}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["failed"], 0, "{doc:#}");
    assert_eq!(doc["wait"]["timedOut"], false, "{doc:#}");
    assert!(doc["wait"]["attempts"].as_u64().unwrap() >= 2, "{doc:#}");
    assert_eq!(doc["versions"]["skew"], false, "{doc:#}");
    let release = format!(
        "✓ resize-guard/resize-guard-webhook runs {RELEASE} (image tag), \
         resize-guard/resize-guard-controller runs {RELEASE} (image tag), the release of this plugin\n"
    );
    let out = rg_run(env, &[], &["check"]).await;
    assert!(
        out.stdout.contains(&release),
        "{release:?} not in:\n{}",
        out.stdout
    );

    // 4. An older controller.
    set_controller_image(env, ":0.1.0").await;
    let out = rg_run(env, &[], &["check"]).await;
    println!("{}", out.stdout);
    assert_eq!(out.code, 0, "a release skew is a warning:\n{}", out.stdout);
    let skew = format!(
        "‼ kubectl resize-guard is {RELEASE}, but resize-guard/resize-guard-controller runs 0.1.0 (image tag)\n"
    );
    assert!(
        out.stdout.contains(&skew),
        "{skew:?} not in:\n{}",
        out.stdout
    );
    assert!(
        line(
            &out.stdout,
            "    fix: install the plugin of the installed release"
        )
        .len()
            > 40
    );
    let doc = rg_run(env, &[], &["check", "-o", "json"]).await;
    let doc: serde_json::Value = serde_json::from_str(&doc.stdout).unwrap();
    assert_eq!(doc["versions"]["skew"], true);
    assert_eq!(doc["versions"]["programs"][1]["version"], "0.1.0");
    let out = rg_run(env, &[], &["status", "-A"]).await;
    assert!(
        line(&out.stdout, "warning: ").starts_with(&format!(
            "warning: kubectl resize-guard is {RELEASE}, but resize-guard/resize-guard-controller runs 0.1.0 (image tag): "
        )),
        "{}",
        out.stdout
    );
    let doc = rg_run(env, &[], &["status", "-A", "-o", "yaml"]).await;
    let doc: serde_json::Value = serde_yaml_ng::from_str(&doc.stdout).unwrap();
    assert_eq!(doc["versions"]["skew"], true);

    // Pinned by digest alone: the label names the release.
    let digest = format!("sha256:{}", "0".repeat(64));
    set_controller_image(env, &format!("@{digest}")).await;
    let doc = rg_run(env, &[], &["check", "-o", "json"]).await;
    let doc: serde_json::Value = serde_json::from_str(&doc.stdout).unwrap();
    let controller = &doc["versions"]["programs"][1];
    assert_eq!(
        (
            controller["version"].as_str(),
            controller["source"].as_str()
        ),
        (Some(RELEASE), Some("label")),
        "{doc:#}"
    );
    assert_eq!(doc["versions"]["skew"], false);

    // --pre on the installed cluster.
    let out = rg_run(env, &[], &["check", "--pre"]).await;
    assert!(
        out.stdout.contains(
            "‼ resize-guard is installed already (MutatingWebhookConfiguration resize-guard): \
             applying deploy/ again upgrades it in place\n"
        ),
        "{}",
        out.stdout
    );
}
