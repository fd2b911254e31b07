//! `kubectl resize-guard` end to end, run through the real `kubectl` v1.37.2 (which finds the
//! plugin on `PATH`, as krew installs it) against a real kube-apiserver with hollow nodes
//! (upstream's kubelet), resize-guard installed from `deploy/` with both programs as their
//! ServiceAccounts and the certificates managed by the controller, as shipped.
//!
//! One test, in phases, because the later phases break the install on purpose:
//! 1. `check` on the healthy install: every line ✓, exit 0.
//! 2. The field test: `what-if` for a QoS-changing, an Infeasible and a Deferred resize.
//! 3. Deferred with no possible victim, once per reason (no strictly-lower-priority pod,
//!    `preemptionPolicy: Never`, a PodDisruptionBudget, a protected namespace, the protected
//!    label, a node opted out, `maxVictimsPerResize`): `explain` names the reason and the
//!    controller's `ResizePreemptionFailed` Event; `status` lists them all, by priority.
//!    Then a laptop's kubeconfig (`laptop`): `KUBECONFIG=a:b` with the context in one file
//!    and the cluster and user in the other, `status` in the context's namespace,
//!    `--kubeconfig` overriding the list, `--context`, `--cluster`, `--as` (Forbidden, naming
//!    the user), `--as-group`, `--request-timeout` against a silent server, a refused connection
//!    naming the server and context, and every exit status (run through the real kubectl, which
//!    `exec`s the plugin): 0 done, 1 what-if refused, 2 usage, 3 cluster error, 4 check failed.
//! 4. No leader (the controller killed): `check` says so once its Lease expires (✗, exit 4); a Deferred resize with a victim waits, and
//!    `explain` and `status` show whom resize-guard will preempt once a controller leads.
//!    The controller comes back and preempts; the resize completes and `explain` shows
//!    `PreemptingForResize`, with no empty victims table.
//! 5. `check` on broken installs — the controller stopped (its Lease released), a wrong
//!    `caBundle`, an expired serving certificate — each ✗ with its fix and exit 4; then the
//!    controller comes back, repairs both, and `check` is green again; then the controller's
//!    pod-write ValidatingAdmissionPolicyBinding is deleted: ✗, exit 4.
//! 6. `deploy/` re-applied as shipped, its webhook configuration naming the Service, a webhook
//!    replica published in the Service's EndpointSlice: `check` green through the Service, then
//!    ✗ once the replica is no longer ready.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::install::{Install, install, policy_has, set_policy, wait_policy};
use resize_guard_harness::installed::{Installed, bin};
use resize_guard_harness::kubectl::KubectlOutput;
use resize_guard_harness::objects::*;
use resize_guard_harness::replica::Replica;
use serde_json::json;

const T: Duration = Duration::from_secs(60);

/// The directory holding the plugin binary cargo built for this test.
pub(super) fn plugin_dir() -> PathBuf {
    PathBuf::from(crate::scenario::program("kubectl-resize_guard"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `kubectl resize-guard <args>`.
async fn rg(env: &Env, args: &[&str]) -> KubectlOutput {
    let mut all = vec!["resize-guard"];
    all.extend_from_slice(args);
    env.kubectl().plugin(&plugin_dir(), all).await.unwrap()
}

/// A finished plugin run with its exit status.
pub(super) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `kubectl resize-guard <args>` through the real kubectl (which `exec`s the plugin, so its exit
/// status is the plugin's), with `vars` set on top of the admin `KUBECONFIG`.
pub(super) async fn rg_run(env: &Env, vars: &[(&str, &str)], args: &[&str]) -> Run {
    let k = env.kubectl();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![plugin_dir()];
    dirs.extend(std::env::split_paths(&path));
    let out = tokio::process::Command::new(&k.bin)
        .arg("resize-guard")
        .args(args)
        .env("KUBECONFIG", &k.kubeconfig)
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .envs(vars.iter().copied())
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `kubectl resize-guard <args>` until its stdout contains `want` (the system has had its
/// chance once it does); panics with the last output after `T`.
async fn rg_until(env: &Env, args: &[&str], want: &str) -> KubectlOutput {
    let deadline = Instant::now() + T;
    loop {
        let out = rg(env, args).await;
        if out.stdout.contains(want) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl resize-guard {args:?} never said {want:?}:\n{}\n{}",
            out.stdout,
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Asserts that `out` is the error for an API server at `server` that cannot be reached through
/// the kubeconfig context `context` (user `me`): exit 3, saying so on the first line.
fn assert_unreachable(out: &Run, server: &str, context: &str) {
    assert_eq!(out.code, 3, "{}", out.stderr);
    let want =
        format!("error: cannot reach the API server {server} (context {context}, user me): ");
    assert!(out.stderr.starts_with(&want), "{}", out.stderr);
}

/// The line of `text` that starts with `prefix` (after indentation).
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
}

/// Asserts, for each (prefix, line), that the first line of `text` starting with `prefix` is
/// `line`.
fn assert_lines(text: &str, want: &[(&str, &str)]) {
    for (prefix, want) in want {
        assert_eq!(line(text, prefix), *want, "the line starting {prefix:?}");
    }
}

/// The cells of a table row (kubectl pads columns with at least three spaces).
fn cells(row: &str) -> Vec<&str> {
    row.split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// A namespace, a hollow node with `cpu` allocatable and running Guaranteed pods.
async fn scenario(
    env: &Env,
    ns: &str,
    node_cpu: &str,
    pods: &[(&str, &str, &str, &str)],
) -> (String, Api<Pod>) {
    let node = env.node("n", node_cpu, "3Gi").await;
    let api: Api<Pod> = Api::namespaced(env.client().await, ns);
    create_all(&api, &node, pods).await.unwrap();
    (node, api)
}

/// Resizes `app` to `cpu` and waits until the kubelet defers it.
async fn defer(env: &Env, ns: &str, pods: &Api<Pod>, cpu: &str) {
    env.resize_cpu(ns, "app", cpu).await;
    let p = wait_pod(pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    assert_eq!(resize_pending(&p).unwrap().0, "Deferred", "{ns}");
}

async fn label(pods: &Api<Pod>, name: &str, key: &str, value: &str) {
    pods.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_subcommand_on_the_field_test_and_check_on_healthy_and_broken_installs() {
    // On the heap: the phases' state machine is large in a debug build.
    Box::pin(phases()).await;
}

/// The phases of the one test, in order (see the module docs).
async fn phases() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let (mut installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
    env.priority_class("mid-never", 10_000, true).await;

    // The namespaces first: the policy protects one of them by name.
    let names = [
        "field", "equal", "never", "pdb", "protns", "label", "optout", "toomany",
    ];
    let mut ns = std::collections::BTreeMap::new();
    for n in names {
        ns.insert(n, env.namespace(n).await);
    }
    let policy = format!(
        "mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: 2\n  protectedNamespaces: [kube-system, {}]\n",
        ns["protns"]
    );
    set_policy(env, &policy).await;
    for p in [&installed.webhook, installed.controller.as_ref().unwrap()] {
        wait_policy(p, |l| policy_has(l, "maxVictimsPerResize: 2")).await;
    }

    // The field test and one scenario per reason, each on its own node (1930m allocatable).
    let field = [
        ("filler", "low", "1500m", "256Mi"),
        ("app", "high", "250m", "256Mi"),
    ];
    let (field_node, field_pods) = scenario(env, &ns["field"], "1930m", &field).await;
    let stuck = futures::future::join_all(
        [
            (
                "equal",
                vec![
                    ("filler", "high", "1500m", "256Mi"),
                    ("app", "high", "250m", "256Mi"),
                ],
            ),
            (
                "never",
                vec![
                    ("filler", "low", "1500m", "256Mi"),
                    ("app", "mid-never", "250m", "256Mi"),
                ],
            ),
            ("pdb", field.to_vec()),
            ("protns", field.to_vec()),
            ("label", field.to_vec()),
            ("optout", field.to_vec()),
            (
                "toomany",
                vec![
                    ("f0", "low", "500m", "64Mi"),
                    ("f1", "low", "500m", "64Mi"),
                    ("f2", "low", "500m", "64Mi"),
                    ("app", "high", "250m", "64Mi"),
                ],
            ),
        ]
        .map(|(name, pods)| {
            let ns = ns[name].clone();
            // Boxed: an array of seven of these futures on the stack is what overflowed it.
            Box::pin(async move {
                let (node, api) = scenario(env, &ns, "1930m", &pods).await;
                (name, ns, node, api)
            })
        }),
    )
    .await;

    // kube-apiserver picks up webhook configurations asynchronously: wait until `check`'s own
    // dry-run probe reaches resize-guard.
    let probe = format!("--probe-pod={}/app", ns["field"]);
    rg_until(env, &["check", &probe], "reached resize-guard").await;

    // 1. check, healthy.
    let out = rg(env, &["check", &probe]).await;
    println!("{}", out.stdout);
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(rg_run(env, &[], &["check", &probe]).await.code, 0);
    let hooks: Api<MutatingWebhookConfiguration> = Api::all(env.client().await);
    let config = hooks.get("resize-guard").await.unwrap();
    let url = config.webhooks.as_ref().unwrap()[0]
        .client_config
        .url
        .clone()
        .unwrap();
    let served = url
        .trim_start_matches("https://")
        .trim_end_matches("/mutate")
        .to_owned();
    let healthy = [
        "kubernetes\n----------\n✓ Kubernetes v1.37.2 is supported (v1.33–v1.37 are tested)\n".to_owned(),
        "✓ MutatingWebhookConfiguration resize-guard present: mutate.resize-guard.io, probe.resize-guard.io\n".to_owned(),
        format!("✓ mutate.resize-guard.io calls {url} (a URL, not a Service)\n"),
        format!("✓ mutate.resize-guard.io's caBundle verifies the certificate served at {served}\n"),
        format!("✓ the certificate served at {served} is valid for 89d more\n"),
        format!(
            "✓ a dry-run resize of pod {}/app reached resize-guard (mutate decision no-change)\n",
            ns["field"]
        ),
        "✓ ConfigMap resize-guard/resize-guard parses: mode enforce, qos.onChange reject, preemption on (max 2 victims)\n".to_owned(),
        "✓ ServiceAccount resize-guard/resize-guard-webhook has the 13 permissions it needs and none of 10 it must not have\n".to_owned(),
        "✓ ServiceAccount resize-guard/resize-guard-controller has the 28 permissions it needs and none of 9 it must not have\n".to_owned(),
        "✓ ValidatingAdmissionPolicy resize-guard-controller-pod-writes and its binding (Deny) limit resize-guard-controller's pod writes to its plan annotation\n".to_owned(),
        "✓ ValidatingAdmissionPolicy resize-guard-controller-status-writes and its binding (Deny) limit resize-guard-controller's pod status writes to adding DisruptionTarget\n".to_owned(),
        "✓ ValidatingAdmissionPolicy resize-guard-controller-resize-writes and its binding (Deny) limit resize-guard-controller's resizes to the resources the kubelet reports\n".to_owned(),
        "✓ ValidatingAdmissionPolicy resize-guard-admission-probe and its binding (Deny) limit resize-guard-controller's resizes in its own namespace to the admission probe's dry runs\n".to_owned(),
        "✓ ValidatingAdmissionPolicy resize-guard-controller-removals and its binding (Deny) limit resize-guard-controller's evictions and deletions to namespaces other than kube-system and its own\n".to_owned(),
        "✓ ValidatingAdmissionPolicy resize-guard-controller-webhook-writes and its binding (Deny) limit resize-guard-controller's webhook configuration writes to caBundle\n".to_owned(),
        "\nStatus check results are ✓\n".to_owned(),
    ];
    for want in &healthy {
        assert!(
            out.stdout.contains(want.as_str()),
            "missing {want:?} in:\n{}",
            out.stdout
        );
    }
    assert!(
        line(
            &out.stdout,
            "✓ demo leads (Lease resize-guard/resize-guard-controller renewed "
        )
        .ends_with(" ago)"),
        "{}",
        out.stdout
    );
    let json_out = rg(env, &["check", &probe, "-o", "json"]).await;
    let lines: serde_json::Value = serde_json::from_str(&json_out.stdout).unwrap();
    assert!(
        lines["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["mark"] == "ok"),
        "{lines}"
    );

    // Bad input and kubectl's flags.
    let f = &ns["field"];
    let out = rg(env, &["explain", "nosuch", "-n", f]).await;
    assert!(!out.success);
    assert_eq!(
        out.stderr,
        format!("error: pods \"nosuch\" not found in namespace {f}\n")
    );
    let out = rg(env, &["explain", "shop/app"]).await;
    assert_eq!(
        out.stderr,
        "error: \"shop/app\" is not a pod name: pass NAME or pod/NAME, and the namespace with -n\n"
    );
    let kubeconfig = env.cp.kubeconfig_path().display().to_string();
    let out = rg_run(env, &[], &["status", "--context", "nope"]).await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(&format!(
            "error: loading kubeconfig (KUBECONFIG={kubeconfig}): "
        )),
        "{}",
        out.stderr
    );
    let out = rg(
        env,
        &[
            "status",
            "-A",
            "-o",
            "yaml",
            "--context",
            "resize-guard",
            "--kubeconfig",
            &kubeconfig,
        ],
    )
    .await;
    assert!(out.success, "{}", out.stderr);
    let rows: serde_yaml_ng::Value = serde_yaml_ng::from_str(&out.stdout).unwrap();
    assert!(rows["items"].as_sequence().is_some(), "{}", out.stdout);
    let out = rg(env, &["check", &probe, "--install-namespace", "elsewhere"]).await;
    assert!(!out.success);
    assert!(
        out.stdout.contains(
            "✗ no Lease elsewhere/resize-guard-controller: the controller has never led\n"
        ),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(
        "‼ ConfigMap elsewhere/resize-guard does not exist: both programs run on the last good copy if there is one, else judge and preempt nothing\n"
    ), "{}", out.stdout);
    // A bad policy edit: check says where; explain judges with the last good copy, as both
    // programs do, and says so.
    set_policy(env, "preemption:\n  maxVictimsPerResize: many\n").await;
    let out = rg(env, &["check", &probe]).await;
    assert!(!out.success);
    assert!(
        line(&out.stdout, "✗ ConfigMap resize-guard/resize-guard key policy.yaml does not parse: policy.yaml line 2")
            .contains("maxVictimsPerResize"),
        "{}",
        out.stdout
    );
    let out = rg(env, &["explain", "app", "-n", f]).await;
    assert!(
        line(
            &out.stdout,
            "note: ConfigMap resize-guard/resize-guard key policy.yaml does not parse"
        )
        .ends_with(
            ": judged with the last good copy (ConfigMap resize-guard/resize-guard-last-good), as both programs do"
        ),
        "{}",
        out.stdout
    );
    set_policy(env, &policy).await;

    // 2. The field test's walls, tried first with what-if.
    let qos_change = [
        "what-if",
        "app",
        "-n",
        f,
        "--cpu",
        "500m",
        "--requests-only",
    ];
    let out = rg(env, &qos_change).await;
    println!("{}", out.stdout);
    assert!(!out.success, "a refused resize exits 1");
    let refused = rg_run(env, &[], &qos_change).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    // `ValidatePodResize`'s 422 Invalid in upstream's words, then resize-guard's explanation.
    let refusal = line(
        &out.stdout,
        "API server: refused (HTTP 422): admission webhook \"mutate.resize-guard.io\" denied the request: Pod \"app\" is invalid: [",
    );
    assert!(
        refusal.contains("spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing]. resize-guard: this resize would change the pod's QoS class from Guaranteed to Burstable")
            && refusal.contains("container app: cpu request 500m ≠ limit 250m"),
        "{}",
        out.stdout
    );
    assert_lines(
        &out.stdout,
        &[
            ("Plan:", "Plan: qos-change"),
            (
                "kubectl patch",
                &format!(
                    r#"kubectl patch pod app -n {f} --subresource resize --type strategic -p '{{"spec":{{"containers":[{{"name":"app","resources":{{"requests":{{"cpu":"500m"}}}}}}]}}}}'"#
                ),
            ),
        ],
    );

    let out = rg(env, &["what-if", "app", "-n", f, "--cpu", "2430m"]).await;
    println!("{}", out.stdout);
    assert!(!out.success);
    assert!(
        line(&out.stdout, "API server: refused (HTTP 403)").contains(&format!(
            "pods \"app\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930. resize-guard: this resize can never fit on node {field_node}: the pod would request cpu 2430m but the node's allocatable cpu is 1930m"
        )),
        "{}",
        out.stdout
    );
    assert_lines(
        &out.stdout,
        &[
            ("Plan:", "Plan: infeasible"),
            (
                "the resize can never fit",
                &format!(
                    "the resize can never fit on node {field_node}: the pod would request cpu 2430m but the node's allocatable cpu is 1930m. No preemption can help."
                ),
            ),
        ],
    );

    let out = rg(env, &["what-if", "app", "-n", f, "--cpu", "550m"]).await;
    println!("{}", out.stdout);
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    assert_lines(
        &out.stdout,
        &[
            (
                "Resize pod",
                &format!(
                    "Resize pod {f}/app, container app: cpu request 250m → 550m, cpu limit 250m → 550m"
                ),
            ),
            (
                "API server:",
                "API server: accepted (dry run: nothing was changed)",
            ),
            (
                "Warning:",
                &format!(
                    "Warning: resize-guard: node {field_node} lacks cpu 120m; the resize will be Deferred; resize-guard will preempt {f}/filler"
                ),
            ),
            (
                "resize-guard's mutate webhook decided:",
                "resize-guard's mutate webhook decided: deferred-preemptible",
            ),
            ("Plan:", "Plan: deferred-preemptible"),
        ],
    );
    assert_eq!(
        cells(line(&out.stdout, &format!("{f}/filler"))),
        [format!("{f}/filler").as_str(), "100", "1500m", "256Mi"]
    );
    assert_eq!(
        field_pods.get("app").await.unwrap().metadata.generation,
        Some(1),
        "what-if changed nothing"
    );

    // 3. Deferred, and no pod can be preempted: one scenario per reason.
    for (name, ns, node, api) in &stuck {
        match *name {
            "pdb" => {
                let pdb: PodDisruptionBudget = serde_json::from_value(json!({
                    "metadata": {"name": "keep-filler"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"role": "filler"}}},
                }))
                .unwrap();
                label(api, "filler", "role", "filler").await;
                Api::<PodDisruptionBudget>::namespaced(env.client().await, ns)
                    .create(&PostParams::default(), &pdb)
                    .await
                    .unwrap();
            }
            "label" => label(api, "filler", "resize-guard.io/protected", "true").await,
            "optout" => {
                Api::<k8s_openapi::api::core::v1::Node>::all(env.client().await)
                    .patch(
                        node,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"labels": {"resize-guard.io/preemption": "disabled"}}})),
                    )
                    .await
                    .unwrap();
            }
            _ => {}
        }
    }
    futures::future::join_all(stuck.iter().map(|(name, ns, _, api)| async move {
        let cpu = if *name == "toomany" { "1431m" } else { "550m" };
        defer(env, ns, api, cpu).await;
    }))
    .await;
    let reasons = [
        (
            "equal",
            "NoLowerPriorityPods",
            "no pod on node {node} with priority below 1000000 can be preempted",
        ),
        (
            "never",
            "PreemptionPolicyNever",
            "the pod has preemptionPolicy: Never, so it may not preempt others",
        ),
        (
            "pdb",
            "NoLowerPriorityPods",
            "no pod on node {node} with priority below 1000000 can be preempted (1 held by a PodDisruptionBudget)",
        ),
        (
            "protns",
            "NoLowerPriorityPods",
            "no pod on node {node} with priority below 1000000 can be preempted (1 protected by policy (preemption.protectedNamespaces))",
        ),
        (
            "label",
            "NoLowerPriorityPods",
            "no pod on node {node} with priority below 1000000 can be preempted (1 protected by policy (preemption.protectedSelector))",
        ),
        (
            "optout",
            "NodeOptedOut",
            "node {node} is labelled resize-guard.io/preemption=disabled",
        ),
        (
            "toomany",
            "TooManyVictims",
            "making room takes 3 victims, more than preemption.maxVictimsPerResize (2)",
        ),
    ];
    for (name, reason, why) in reasons {
        let (_, ns, node, _) = stuck.iter().find(|s| s.0 == name).unwrap();
        let out = rg_until(env, &["explain", "app", "-n", ns], "ResizePreemptionFailed").await;
        println!("{}", out.stdout);
        assert!(out.success, "{}", out.stderr);
        assert_eq!(
            line(&out.stdout, "resize-guard:"),
            "resize-guard: deferred-stuck",
            "{name}"
        );
        let why = why.replace("{node}", node);
        assert!(
            line(&out.stdout, &format!("node {node} lacks cpu"))
                .ends_with(&format!(", and resize-guard cannot make room: {why}.")),
            "{name}: {why}\n{}",
            out.stdout
        );
        assert!(line(&out.stdout, "fix:").len() > 10, "{}", out.stdout);
        assert!(
            line(&out.stdout, "Resize: Deferred (PodResizePending), for ").len() > 10,
            "{}",
            out.stdout
        );
        assert!(
            line(
                &out.stdout,
                "kubelet: Node didn't have enough resource: cpu, requested: "
            )
            .len()
                > 10
        );
        let json_out = rg(env, &["explain", "app", "-n", ns, "-o", "json"]).await;
        let x: serde_json::Value = serde_json::from_str(&json_out.stdout).unwrap();
        assert_eq!(x["decision"]["reason"], reason, "{name}: {x}");
    }
    let out = rg(env, &["status", "-A"]).await;
    println!("{}", out.stdout);
    assert_eq!(
        cells(out.stdout.lines().next().unwrap()),
        [
            "NAMESPACE",
            "NAME",
            "NODE",
            "PRIORITY",
            "RESIZE",
            "AGE",
            "RESIZE-GUARD"
        ]
    );
    for (name, _, _) in reasons {
        let (_, ns, node, _) = stuck.iter().find(|s| s.0 == name).unwrap();
        let row = cells(line(&out.stdout, &format!("{ns} ")));
        let priority = if name == "never" { "10000" } else { "1000000" };
        assert_eq!(
            &row[..5],
            [ns.as_str(), "app", node, priority, "Deferred"],
            "{row:?}"
        );
        assert!(row[6].starts_with("stuck: "), "{row:?}");
    }
    let never_row = out
        .stdout
        .lines()
        .position(|l| l.starts_with(&ns["never"]))
        .unwrap();
    let equal_row = out
        .stdout
        .lines()
        .position(|l| l.starts_with(&ns["equal"]))
        .unwrap();
    assert!(
        equal_row < never_row,
        "highest priority first:\n{}",
        out.stdout
    );
    let only = rg(env, &["status", "-n", &ns["never"]]).await;
    assert_eq!(only.stdout.lines().count(), 2, "{}", only.stdout);
    assert!(only.stdout.starts_with("NAME "), "{}", only.stdout);
    Box::pin(laptop(env, &ns["never"], f)).await;

    // 4. check with no leader (killed: its Lease stays until it expires); meanwhile a Deferred
    // resize that has a victim waits for one.
    installed.kill_controller();
    let out = rg_until(env, &["check", &probe], "✗ no controller leads").await;
    println!("{}", out.stdout);
    assert!(!out.success, "a failed check exits 4");
    let failed = rg_run(env, &[], &["check", &probe]).await;
    assert_eq!(failed.code, 4, "{}", failed.stdout);
    let stale = line(
        &out.stdout,
        "✗ no controller leads: Lease resize-guard/resize-guard-controller was last renewed by demo ",
    );
    assert!(stale.ends_with(" ago (lease duration 15s)"), "{stale}");
    assert!(out.stdout.contains(&format!(
        "{stale}\n    fix: kubectl -n resize-guard get pods -l app.kubernetes.io/component=controller; kubectl -n resize-guard logs deploy/resize-guard-controller\n"
    )), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("\nStatus check results are ✗: 1 check(s) failed\n"),
        "{}",
        out.stdout
    );

    env.resize_cpu(f, "app", "550m").await;
    wait_pod(&field_pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    let out = rg(env, &["explain", "app", "-n", f]).await;
    println!("{}", out.stdout);
    assert_lines(
        &out.stdout,
        &[
            ("resize-guard:", "resize-guard: deferred-preemptible"),
            (
                &format!("node {field_node} lacks"),
                &format!("node {field_node} lacks cpu 120m; resize-guard will preempt {f}/filler:"),
            ),
            (
                "but no controller",
                "but no controller holds the Lease, so nobody acts on this plan now",
            ),
        ],
    );
    assert_eq!(
        cells(line(&out.stdout, &format!("{f}/filler"))),
        [
            format!("{f}/filler").as_str(),
            "100",
            "1500m",
            "256Mi",
            "no"
        ]
    );
    assert_lines(
        &out.stdout,
        &[
            (
                "controller:",
                "controller: no controller holds the Lease: nothing will be preempted until one does",
            ),
            (
                "QoS class:",
                "QoS class:  Guaranteed — every container sets cpu and memory limits equal to its requests",
            ),
        ],
    );
    assert_eq!(
        cells(line(&out.stdout, "cpu ")),
        ["cpu", "1930m", "1500m", "0", "250m", "550m", "180m"]
    );
    let status = rg(env, &["status", "-n", f, "-o", "wide"]).await;
    println!("{}", status.stdout);
    let row = cells(line(&status.stdout, "app "));
    assert_eq!(
        row[5],
        format!("will preempt {f}/filler"),
        "{}",
        status.stdout
    );
    assert_eq!(row[6], crate::scenario::FIELD_TEST_DEFERRED);

    // The controller comes back and preempts for the waiting resize, which completes.
    installed.start_controller(&env.cp).await.unwrap();
    let done = wait_pod(&field_pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m") && resize_pending(p).is_none()
    })
    .await;
    if let Err(e) = done {
        let log = installed
            .controller
            .as_ref()
            .map(|c| c.log_tail(20_000))
            .unwrap_or_default();
        let filler = field_pods.get_opt("filler").await;
        let events = env
            .kubectl()
            .run(["events", "-n", f])
            .await
            .map(|o| o.stdout);
        panic!(
            "the resize did not complete: {e:#}\n==== filler ====\n{filler:?}\n==== events ====\n{events:?}\n==== controller log ====\n{log}"
        );
    }
    let out = rg_until(env, &["explain", "app", "-n", f], "PreemptingForResize").await;
    println!("{}", out.stdout);
    assert_lines(
        &out.stdout,
        &[
            ("Resize:", "Resize: none pending (spec and status agree)"),
            ("resize-guard:", "resize-guard: none"),
            (
                "nothing to decide",
                "nothing to decide: no resize is pending",
            ),
        ],
    );
    assert!(
        !out.stdout.contains("VICTIM"),
        "no victims, no empty table header:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.lines().any(|l| l.contains("Normal    PreemptingForResize") && l.contains(&format!(
            "preempting {f}/filler (priority 100) on node {field_node} to free cpu 120m for this resize"
        ))),
        "{}",
        out.stdout
    );
    let empty = rg(env, &["status", "-n", f]).await;
    assert_eq!(
        empty.stdout,
        format!("No pending resizes in namespace {f}.\n")
    );

    // 5. check on broken installs, the controller stopped (SIGTERM: it releases its Lease).
    installed.stop_controller();
    let out = rg(env, &["check", &probe]).await;
    assert!(!out.success);
    assert!(out.stdout.contains(
        "✗ no controller leads: Lease resize-guard/resize-guard-controller is released (no holder)\n"
    ), "{}", out.stdout);
    // A wrong caBundle (another CA's):
    let original = config.webhooks.as_ref().unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .unwrap();
    let other =
        resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback()).unwrap();
    let set_bundle = |bundle: Vec<u8>| {
        let hooks = hooks.clone();
        async move {
            let mut c = hooks.get("resize-guard").await.unwrap();
            c.webhooks.as_mut().unwrap()[0].client_config.ca_bundle = Some(ByteString(bundle));
            hooks
                .replace("resize-guard", &PostParams::default(), &c)
                .await
                .unwrap();
        }
    };
    set_bundle(other.ca_cert_pem.clone().into_bytes()).await;
    let out = rg_until(env, &["check", &probe], "got no answer from resize-guard").await;
    println!("{}", out.stdout);
    assert!(!out.success);
    assert!(out.stdout.contains(&format!(
        "✗ mutate.resize-guard.io's caBundle does not verify the certificate served at {served}: invalid peer certificate: UnknownIssuer\n    fix: the API server cannot call the webhook"
    )), "{}", out.stdout);
    assert!(out.stdout.contains(&format!(
        "✗ a dry-run resize of pod {f}/app got no answer from resize-guard (API server: accepted)\n"
    )), "{}", out.stdout);
    set_bundle(original.0).await;
    rg_until(env, &["check", &probe], "reached resize-guard").await;

    // An expired serving certificate, signed by the right CA:
    let secrets: Api<Secret> = Api::namespaced(env.client().await, "resize-guard");
    let ca = secrets.get("resize-guard-ca").await.unwrap();
    let text =
        |s: &Secret, k: &str| String::from_utf8(s.data.as_ref().unwrap()[k].0.clone()).unwrap();
    let authority =
        resize_guard_certs::Authority::from_pem(&text(&ca, "ca.crt"), &text(&ca, "ca.key"))
            .unwrap();
    let mut spec = resize_guard_certs::CertSpec::for_loopback();
    spec.leaf_validity = Duration::from_secs(86400);
    let leaf = authority
        .sign(&spec, SystemTime::now() - Duration::from_secs(3 * 86400))
        .unwrap();
    secrets
        .patch(
            "resize-guard-webhook-tls",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"stringData": {"tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem}}),
            ),
        )
        .await
        .unwrap();
    let out = rg_until(env, &["check", &probe], "expired").await;
    println!("{}", out.stdout);
    assert!(!out.success);
    assert!(out.stdout.contains(&format!(
        "✗ the certificate served at {served} expired 2d ago\n    fix: the controller renews the certificate"
    )), "{}", out.stdout);
    assert!(
        line(&out.stdout, &format!("✗ mutate.resize-guard.io's caBundle does not verify the certificate served at {served}: invalid peer certificate: certificate expired: verification time ")).len() > 10
    );

    // The controller comes back and repairs the certificate: check is green again.
    installed.start_controller(&env.cp).await.unwrap();
    let out = rg_until(env, &["check", &probe], "Status check results are ✓").await;
    assert!(out.success, "{}", out.stdout);

    // The pod-write guard's binding removed: the controller's patch pods is no longer narrowed.
    // (Step 6 re-applies deploy/, which brings it back.)
    let deleted = env
        .kubectl()
        .run([
            "delete",
            "validatingadmissionpolicybinding",
            "resize-guard-controller-pod-writes",
        ])
        .await
        .unwrap();
    assert!(deleted.success, "{}", deleted.stderr);
    let out = rg_run(env, &[], &["check", &probe]).await;
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains(
        "✗ ValidatingAdmissionPolicy resize-guard-controller-pod-writes has no ValidatingAdmissionPolicyBinding resize-guard-controller-pod-writes: the policy is not enforced\n    fix: kubectl apply --server-side -f deploy/base/controller-pod-writes.yaml"
    ), "{}", out.stdout);

    // 6. The shipped Service: deploy/ re-applied as is (its clientConfig names the Service
    // resize-guard/resize-guard-webhook), a replica published in its EndpointSlice. check
    // verifies caBundle against the serving Secret (a Service is not reachable from outside).
    install(
        env,
        &Install {
            through_service: true,
            ..Default::default()
        },
    )
    .await;
    let webhook = bin("resize-guard-webhook").unwrap();
    let replica = Replica::bring_up(env, &webhook.display().to_string(), "replica-a", T)
        .await
        .unwrap();
    let out = rg_until(env, &["check", &probe], "Status check results are ✓").await;
    println!("{}", out.stdout);
    for want in [
        "✓ mutate.resize-guard.io calls Service resize-guard/resize-guard-webhook:443 (1 ready endpoint(s))\n",
        "✓ mutate.resize-guard.io's caBundle verifies the certificate in Secret resize-guard/resize-guard-webhook-tls\n",
        "✓ the certificate in Secret resize-guard/resize-guard-webhook-tls is valid for 89d more\n",
        "(mutate decision no-change)\n",
    ] {
        assert!(
            out.stdout.contains(want),
            "missing {want:?} in:\n{}",
            out.stdout
        );
    }
    // The replica stops being ready (a failing readiness probe): no endpoint is left.
    replica.publish(env, false, false).await.unwrap();
    let out = rg_until(env, &["check", &probe], "has no ready endpoints").await;
    println!("{}", out.stdout);
    assert!(!out.success);
    assert!(out.stdout.contains(
        "✗ mutate.resize-guard.io calls Service resize-guard/resize-guard-webhook:443, which has no ready endpoints\n    fix: kubectl -n resize-guard get pods -l app.kubernetes.io/component=webhook; kubectl -n resize-guard describe deploy/resize-guard-webhook\n"
    ), "{}", out.stdout);
}

/// kubectl's connection flags and the exit statuses, on a laptop's kubeconfig: a merge list whose
/// first file holds only the context (namespace `pending_ns`, where a resize is pending) and
/// whose second holds the cluster and the user; `--context`, `--cluster`, `--as`, `--as-group`
/// and `--request-timeout` reaching the server; each error saying where it went wrong.
async fn laptop(env: &Env, pending_ns: &str, other_ns: &str) {
    use resize_guard_harness::control_plane::ADMIN_TOKEN;
    let dir = env.cp.dir().join("laptop");
    std::fs::create_dir_all(&dir).unwrap();
    let server = env.cp.url();
    let contexts = dir.join("contexts");
    let clusters = dir.join("clusters");
    std::fs::write(
        &contexts,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: work\ncontexts:\n\
             - name: work\n  context: {{cluster: live, user: me, namespace: {pending_ns}}}\n\
             - name: dead\n  context: {{cluster: gone, user: me}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        &clusters,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\nclusters:\n\
             - name: live\n  cluster: {{server: '{server}', insecure-skip-tls-verify: true}}\n\
             - name: gone\n  cluster: {{server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}\n\
             users:\n- name: me\n  user: {{token: {ADMIN_TOKEN}}}\n\
             contexts:\n- name: work\n  context: {{cluster: gone, user: me, namespace: {other_ns}}}\n"
        ),
    )
    .unwrap();
    let list = std::env::join_paths([&contexts, &clusters])
        .unwrap()
        .into_string()
        .unwrap();
    let vars = [("KUBECONFIG", list.as_str())];

    // KUBECONFIG=a:b: the first file's context (and its namespace) wins; the cluster and the
    // user come from the second. `status` lists the context's namespace, like kubectl get pods.
    let out = rg_run(env, &vars, &["status"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("NAME "), "{}", out.stdout);
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    assert_eq!(cells(line(&out.stdout, "app "))[0], "app", "{}", out.stdout);
    // --kubeconfig names one file and overrides KUBECONFIG: the second file alone has the
    // context `work` on the dead cluster.
    let clusters_arg = clusters.display().to_string();
    let out = rg_run(
        env,
        &vars,
        &["status", "--kubeconfig", &clusters_arg, "--context", "work"],
    )
    .await;
    assert_unreachable(&out, "https://127.0.0.1:1", "work");
    // A refused connection names the server and the context (exit 3).
    let out = rg_run(env, &vars, &["explain", "app", "--context", "dead"]).await;
    assert_unreachable(&out, "https://127.0.0.1:1", "dead");
    assert!(out.stderr.contains("Connection refused"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    // --cluster replaces the context's cluster.
    let out = rg_run(
        env,
        &vars,
        &["status", "--context", "dead", "--cluster", "live", "-A"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("NAMESPACE "), "{}", out.stdout);

    // --as a user without RBAC: Forbidden, naming the user, exit 3.
    let out = rg_run(env, &vars, &["status", "-A", "--as", "nobody"]).await;
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.starts_with("error: ")
            && out.stderr.contains(
                "pods is forbidden: User \"nobody\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
            )
            && out.stderr.ends_with(&format!("(the API server {server} (context work, user me as nobody))\n")),
        "{}",
        out.stderr
    );
    // An identity that may read the pod but not resize it: what-if's dry run is Forbidden by
    // RBAC, which is an error (exit 3), not a refusal of the resize (exit 1).
    let webhook_sa = "system:serviceaccount:resize-guard:resize-guard-webhook";
    let out = rg_run(
        env,
        &vars,
        &[
            "what-if", "app", "-n", other_ns, "--cpu", "300m", "--as", webhook_sa,
        ],
    )
    .await;
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.starts_with(&format!(
            "error: the dry-run resize of pod {other_ns}/app failed (HTTP 403): "
        )) && out.stderr.contains(&format!(
            "User \"{webhook_sa}\" cannot patch resource \"pods/resize\""
        )) && out.stderr.ends_with(&format!(
            "(the API server {server} (context work, user me as {webhook_sa}))\n"
        )),
        "{}",
        out.stderr
    );
    // … and with a group that may: the groups reach the server too.
    let out = rg_run(
        env,
        &vars,
        &[
            "status",
            "-A",
            "--as",
            "nobody",
            "--as-group",
            "system:masters",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    // --request-timeout: a server that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("https://{}", silent.local_addr().unwrap());
    let hang = dir.join("hang");
    std::fs::write(
        &hang,
        std::fs::read_to_string(&clusters)
            .unwrap()
            .replace("https://127.0.0.1:1", &silent_url),
    )
    .unwrap();
    let hang_arg = hang.display().to_string();
    let started = Instant::now();
    let out = rg_run(
        env,
        &[],
        &[
            "explain",
            "app",
            "--kubeconfig",
            &hang_arg,
            "--context",
            "work",
            "--request-timeout",
            "1s",
        ],
    )
    .await;
    assert_unreachable(&out, &silent_url, "work");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    drop(silent);

    // Usage errors exit 2, before anything is sent.
    for args in [
        &["status", "--as-group", "sre"][..],
        &["status", "--request-timeout", "soon"],
        &["what-if", "app"],
        &["explain", "shop/app"],
        &["status", "--no-such-flag"],
    ] {
        let out = rg_run(env, &vars, args).await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.starts_with("error: "),
            "{args:?}: {}",
            out.stderr
        );
    }
    // A pod that does not exist is the cluster's answer: exit 3.
    let out = rg_run(env, &vars, &["explain", "nosuch"]).await;
    assert_eq!(out.code, 3);
    assert_eq!(
        out.stderr,
        format!("error: pods \"nosuch\" not found in namespace {pending_ns}\n")
    );
    // Examples in every subcommand's help.
    for sub in ["explain", "what-if", "status", "check"] {
        let out = rg_run(env, &[], &[sub, "--help"]).await;
        assert_eq!(out.code, 0);
        assert!(
            out.stdout.contains("Examples:\n  # ")
                && out.stdout.contains(&format!("kubectl resize-guard {sub}")),
            "{sub}: {}",
            out.stdout
        );
    }
    let out = rg_run(env, &[], &["--help"]).await;
    assert!(
        out.stdout.contains("Exit status:\n  0  done"),
        "{}",
        out.stdout
    );
}
