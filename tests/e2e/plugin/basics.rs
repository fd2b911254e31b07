//! `kubectl resize-guard` end to end, run through the real `kubectl` v1.37.2 (which finds the
//! plugin on `PATH`, as krew installs it) against a real kube-apiserver with hollow nodes
//! (upstream's kubelet), resize-guard installed from `deploy/` with both programs as their
//! ServiceAccounts and the certificates managed by the controller, as shipped.
//!
//! One test per behaviour, on one install ([`suite`]): `check` on the healthy install; bad input
//! and a bad policy edit; `what-if` on the field test's three walls (a QoS change, an Infeasible
//! and a Deferred resize); `explain` and `status` for a Deferred resize no pod can be preempted
//! for, once per reason; a laptop's kubeconfig with kubectl's connection flags and every exit
//! status; a resize waiting for a leader; and `check` on broken installs (the controller stopped,
//! a wrong `caBundle`, an expired serving certificate, the pod-write policy's binding deleted,
//! the shipped Service with no ready endpoint). The tests that break the install hold it alone
//! and put it back; a test that fails midway leaves it to the next one to put back.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::install::{Install, install, policy_has, set_policy, wait_policy};
use resize_guard_harness::installed::{Installed, bin};
use resize_guard_harness::objects::*;
use resize_guard_harness::replica::Replica;
use serde_json::json;
use tokio::sync::{Mutex, MutexGuard, OnceCell};

use super::command::{
    assert_has, assert_lines, assert_unreachable, cells, line, rg, rg_run, rg_until,
};

const T: Duration = Duration::from_secs(60);

/// The field test's node (1930m allocatable) and pods, for the scenarios that vary it.
const NODE: (&str, &str, &str) = ("n", "1930m", "3Gi");
const FIELD: [(&str, &str, &str, &str); 2] = [
    ("filler", "low", "1500m", "256Mi"),
    ("app", "high", "250m", "256Mi"),
];
/// The filler has the app's priority: nobody can be preempted for the app.
const EQUAL: [(&str, &str, &str, &str); 2] = [
    ("filler", "high", "1500m", "256Mi"),
    ("app", "high", "250m", "256Mi"),
];

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

/// What every test shares: resize-guard installed with [`Suite::policy`], the field test in
/// `field` (its `app` is `check`'s probe pod, and no test changes it), and the namespace the
/// policy protects by name.
struct Suite {
    env: &'static Env,
    installed: Installed,
    policy: String,
    field: String,
    field_node: String,
    protected_ns: String,
    /// `--probe-pod=<field>/app`.
    probe: String,
    /// The webhook's address as its configuration names it (`127.0.0.1:PORT`).
    served: String,
    /// False once a test failed while holding the suite: the next one puts the install back.
    whole: bool,
}

static SUITE: OnceCell<Mutex<Suite>> = OnceCell::const_new();

/// The suite's install, held by this test alone (some tests break it on purpose). Dropped during
/// a panic, it prints the control plane's logs and marks the install for repair.
struct Held {
    suite: MutexGuard<'static, Suite>,
    _logs: LogGuard<'static>,
}

impl Deref for Held {
    type Target = Suite;
    fn deref(&self) -> &Suite {
        &self.suite
    }
}

impl DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Suite {
        &mut self.suite
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.suite.whole = false;
        }
    }
}

/// Installs resize-guard on first use; then waits for the install, whole again.
async fn suite() -> Held {
    let env = shared(EnvOptions::default());
    let cell = SUITE
        .get_or_init(|| async { Mutex::new(Suite::start(env).await) })
        .await;
    let mut suite = cell.lock().await;
    if !suite.whole {
        suite.restore().await;
    }
    Held {
        suite,
        _logs: env.guard(),
    }
}

impl Suite {
    async fn start(env: &'static Env) -> Suite {
        let (installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
        env.priority_class("mid-never", 10_000, true).await;
        // The namespace first: the policy protects it by name.
        let protected_ns = env.namespace("protns").await;
        let policy = format!(
            "mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: 2\n  protectedNamespaces: [kube-system, {protected_ns}]\n",
        );
        set_policy(env, &policy).await;
        for p in [&installed.webhook, installed.controller.as_ref().unwrap()] {
            wait_policy(p, |l| policy_has(l, "maxVictimsPerResize: 2")).await;
        }
        let (field, field_node, _) = env.scenario("field", NODE, &FIELD).await;
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
        let probe = format!("--probe-pod={field}/app");
        // kube-apiserver picks up webhook configurations asynchronously: wait until `check`'s
        // own dry-run probe reaches resize-guard.
        rg_until(env, &["check", &probe], "reached resize-guard").await;
        Suite {
            env,
            installed,
            policy,
            field,
            field_node,
            protected_ns,
            probe,
            served,
            whole: true,
        }
    }

    /// `kubectl resize-guard check --probe-pod=<field>/app`.
    fn check(&self) -> [&str; 2] {
        ["check", &self.probe]
    }

    /// Puts the install back as [`Suite::start`] left it: `deploy/` re-applied with the local
    /// webhook, the policy, a leading controller (which repairs `caBundle` and the serving
    /// certificate), until `check` is green.
    async fn restore(&mut self) {
        let env = self.env;
        let how = Install {
            webhook_url: Some(format!("https://{}", self.served)),
            ..Default::default()
        };
        install(env, &how).await;
        set_policy(env, &self.policy).await;
        if self.installed.controller.is_none() {
            self.installed.start_controller(&env.cp).await.unwrap();
        }
        rg_until(env, &self.check(), "Status check results are ✓").await;
        self.whole = true;
    }

    /// Stops the controller (SIGTERM: it releases its Lease); `check` says no controller leads.
    async fn stop_controller(&mut self) {
        self.whole = false;
        self.installed.stop_controller();
        let out = rg(self.env, &self.check()).await;
        assert!(!out.success);
        assert_has(
            &out.stdout,
            &[
                "✗ no controller leads: Lease resize-guard/resize-guard-controller is released (no holder)\n",
            ],
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_on_a_healthy_install_is_green_line_by_line() {
    let s = suite().await;
    let env = s.env;
    let out = rg(env, &s.check()).await;
    println!("{}", out.stdout);
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(rg_run(env, &[], &s.check()).await.code, 0);
    let (served, field) = (&s.served, &s.field);
    assert_has(&out.stdout, &[
        "kubernetes\n----------\n✓ Kubernetes v1.37.2 is supported (v1.33–v1.37 are tested)\n".to_owned(),
        "✓ MutatingWebhookConfiguration resize-guard present: mutate.resize-guard.io, probe.resize-guard.io\n".to_owned(),
        format!("✓ mutate.resize-guard.io calls https://{served}/mutate (a URL, not a Service)\n"),
        format!("✓ mutate.resize-guard.io's caBundle verifies the certificate served at {served}\n"),
        format!("✓ the certificate served at {served} is valid for 89d more\n"),
        format!(
            "✓ a dry-run resize of pod {field}/app reached resize-guard (mutate decision no-change)\n",
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
    ]);
    assert!(
        line(
            &out.stdout,
            "✓ demo leads (Lease resize-guard/resize-guard-controller renewed "
        )
        .ends_with(" ago)"),
        "{}",
        out.stdout
    );
    let json_out = rg(env, &["check", &s.probe, "-o", "json"]).await;
    let lines: serde_json::Value = serde_json::from_str(&json_out.stdout).unwrap();
    assert!(
        lines["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["mark"] == "ok"),
        "{lines}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_kubectls_flags_give_one_clear_error_each() {
    let s = suite().await;
    let (env, f) = (s.env, &s.field);
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
    let out = rg(
        env,
        &["check", &s.probe, "--install-namespace", "elsewhere"],
    )
    .await;
    assert!(!out.success);
    assert_has(
        &out.stdout,
        &[
            "✗ no Lease elsewhere/resize-guard-controller: the controller has never led\n",
            "‼ ConfigMap elsewhere/resize-guard does not exist: both programs run on the last good copy if there is one, else judge and preempt nothing\n",
        ],
    );
}

/// A bad policy edit: check says where; explain judges with the last good copy, as both programs
/// do, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_policy_edit_is_located_by_check_and_explain_uses_the_last_good_copy() {
    let mut s = suite().await;
    let env = s.env;
    s.whole = false;
    set_policy(env, "preemption:\n  maxVictimsPerResize: many\n").await;
    let out = rg(env, &s.check()).await;
    assert!(!out.success);
    assert!(
        line(&out.stdout, "✗ ConfigMap resize-guard/resize-guard key policy.yaml does not parse: policy.yaml line 2")
            .contains("maxVictimsPerResize"),
        "{}",
        out.stdout
    );
    let out = rg(env, &["explain", "app", "-n", &s.field]).await;
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
    set_policy(env, &s.policy).await;
    s.whole = true;
}

/// `ValidatePodResize`'s 422 Invalid in upstream's words, then resize-guard's explanation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_refuses_a_qos_change_in_upstreams_words_and_exits_1() {
    let s = suite().await;
    let (env, f) = (s.env, &s.field);
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_says_an_infeasible_resize_can_never_fit() {
    let s = suite().await;
    let (env, f, node) = (s.env, &s.field, &s.field_node);
    let out = rg(env, &["what-if", "app", "-n", f, "--cpu", "2430m"]).await;
    println!("{}", out.stdout);
    assert!(!out.success);
    assert!(
        line(&out.stdout, "API server: refused (HTTP 403)").contains(&format!(
            "pods \"app\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930. resize-guard: this resize can never fit on node {node}: the pod would request cpu 2430m but the node's allocatable cpu is 1930m"
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
                    "the resize can never fit on node {node}: the pod would request cpu 2430m but the node's allocatable cpu is 1930m. No preemption can help."
                ),
            ),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_names_whom_a_deferred_resize_will_preempt_and_changes_nothing() {
    let s = suite().await;
    let (env, f, node) = (s.env, &s.field, &s.field_node);
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
                    "Warning: resize-guard: node {node} lacks cpu 120m; the resize will be Deferred; resize-guard will preempt {f}/filler"
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
    let pods: Api<Pod> = Api::namespaced(env.client().await, f);
    assert_eq!(
        pods.get("app").await.unwrap().metadata.generation,
        Some(1),
        "what-if changed nothing"
    );
}

/// A Deferred resize no pod can be preempted for: a scenario on a node of its own, and what
/// resize-guard says.
struct Stuck {
    name: &'static str,
    pods: &'static [(&'static str, &'static str, &'static str, &'static str)],
    /// What `app` asks for.
    cpu: &'static str,
    reason: &'static str,
    /// Why, with `{node}` for the node's name.
    why: &'static str,
}

static STUCK: [Stuck; 7] = [
    Stuck {
        name: "equal",
        pods: &EQUAL,
        cpu: "550m",
        reason: "NoLowerPriorityPods",
        why: "no pod on node {node} with priority below 1000000 can be preempted",
    },
    Stuck {
        name: "never",
        pods: &[
            ("filler", "low", "1500m", "256Mi"),
            ("app", "mid-never", "250m", "256Mi"),
        ],
        cpu: "550m",
        reason: "PreemptionPolicyNever",
        why: "the pod has preemptionPolicy: Never, so it may not preempt others",
    },
    Stuck {
        name: "pdb",
        pods: &FIELD,
        cpu: "550m",
        reason: "NoLowerPriorityPods",
        why: "no pod on node {node} with priority below 1000000 can be preempted (1 held by a PodDisruptionBudget)",
    },
    Stuck {
        name: "protns",
        pods: &FIELD,
        cpu: "550m",
        reason: "NoLowerPriorityPods",
        why: "no pod on node {node} with priority below 1000000 can be preempted (1 protected by policy (preemption.protectedNamespaces))",
    },
    Stuck {
        name: "label",
        pods: &FIELD,
        cpu: "550m",
        reason: "NoLowerPriorityPods",
        why: "no pod on node {node} with priority below 1000000 can be preempted (1 protected by policy (preemption.protectedSelector))",
    },
    Stuck {
        name: "optout",
        pods: &FIELD,
        cpu: "550m",
        reason: "NodeOptedOut",
        why: "node {node} is labelled resize-guard.io/preemption=disabled",
    },
    Stuck {
        name: "toomany",
        pods: &[
            ("f0", "low", "500m", "64Mi"),
            ("f1", "low", "500m", "64Mi"),
            ("f2", "low", "500m", "64Mi"),
            ("app", "high", "250m", "64Mi"),
        ],
        cpu: "1431m",
        reason: "TooManyVictims",
        why: "making room takes 3 victims, more than preemption.maxVictimsPerResize (2)",
    },
];

impl Stuck {
    /// The scenario, with what keeps its filler (a PodDisruptionBudget, the protected label, the
    /// node opted out), and `app`'s resize Deferred. Returns the namespace and the node.
    async fn set_up(&self, s: &Suite) -> (String, String) {
        let env = s.env;
        let (ns, node, api) = if self.name == "protns" {
            let node = env.node(NODE.0, NODE.1, NODE.2).await;
            let api = Api::namespaced(env.client().await, &s.protected_ns);
            create_all(&api, &node, self.pods).await.unwrap();
            (s.protected_ns.clone(), node, api)
        } else {
            env.scenario(self.name, NODE, self.pods).await
        };
        match self.name {
            "pdb" => {
                let pdb: PodDisruptionBudget = serde_json::from_value(json!({
                    "metadata": {"name": "keep-filler"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"role": "filler"}}},
                }))
                .unwrap();
                label(&api, "filler", "role", "filler").await;
                Api::<PodDisruptionBudget>::namespaced(env.client().await, &ns)
                    .create(&PostParams::default(), &pdb)
                    .await
                    .unwrap();
            }
            "label" => label(&api, "filler", "resize-guard.io/protected", "true").await,
            "optout" => {
                let labels =
                    json!({"metadata": {"labels": {"resize-guard.io/preemption": "disabled"}}});
                Api::<Node>::all(env.client().await)
                    .patch(&node, &PatchParams::default(), &Patch::Merge(labels))
                    .await
                    .unwrap();
            }
            _ => {}
        }
        defer(env, &ns, &api, self.cpu).await;
        (ns, node)
    }

    /// `explain` names the reason and the controller's `ResizePreemptionFailed` Event.
    async fn assert_explained(&self, env: &Env, ns: &str, node: &str) {
        let name = self.name;
        let out = rg_until(env, &["explain", "app", "-n", ns], "ResizePreemptionFailed").await;
        assert!(out.success, "{}", out.stderr);
        assert_eq!(
            line(&out.stdout, "resize-guard:"),
            "resize-guard: deferred-stuck",
            "{name}"
        );
        let why = self.why.replace("{node}", node);
        assert!(
            line(&out.stdout, &format!("node {node} lacks cpu"))
                .ends_with(&format!(", and resize-guard cannot make room: {why}.")),
            "{name}: {why}\n{}",
            out.stdout
        );
        for prefix in [
            "fix:",
            "Resize: Deferred (PodResizePending), for ",
            "kubelet: Node didn't have enough resource: cpu, requested: ",
        ] {
            assert!(
                line(&out.stdout, prefix).len() > 10,
                "{name}: {}",
                out.stdout
            );
        }
        let json_out = rg(env, &["explain", "app", "-n", ns, "-o", "json"]).await;
        let x: serde_json::Value = serde_json::from_str(&json_out.stdout).unwrap();
        assert_eq!(x["decision"]["reason"], self.reason, "{name}: {x}");
    }
}

/// Deferred, and no pod can be preempted, once per reason: `explain` names the reason and the
/// controller's `ResizePreemptionFailed` Event; `status` lists them all, by priority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_status_say_why_no_pod_can_be_preempted_once_per_reason() {
    let s = suite().await;
    let env = s.env;
    let s = &*s;
    // Boxed: an array of seven of these futures on the stack is what overflowed it.
    let stuck: Vec<(String, String)> = futures::future::join_all(
        STUCK
            .iter()
            .map(|row| Box::pin(async move { row.set_up(s).await })),
    )
    .await;
    for (row, (ns, node)) in STUCK.iter().zip(&stuck) {
        row.assert_explained(env, ns, node).await;
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
    for (row, (ns, node)) in STUCK.iter().zip(&stuck) {
        let row_cells = cells(line(&out.stdout, &format!("{ns} ")));
        let priority = if row.name == "never" {
            "10000"
        } else {
            "1000000"
        };
        assert_eq!(
            &row_cells[..5],
            [ns.as_str(), "app", node, priority, "Deferred"],
            "{row_cells:?}"
        );
        assert!(row_cells[6].starts_with("stuck: "), "{row_cells:?}");
    }
    let row_of = |name: &str| {
        let (ns, _) = &stuck[STUCK.iter().position(|r| r.name == name).unwrap()];
        out.stdout.lines().position(|l| l.starts_with(ns)).unwrap()
    };
    assert!(
        row_of("equal") < row_of("never"),
        "highest priority first:\n{}",
        out.stdout
    );
    let never = out.stdout.lines().nth(row_of("never")).unwrap();
    let only = rg(env, &["status", "-n", cells(never)[0]]).await;
    assert_eq!(only.stdout.lines().count(), 2, "{}", only.stdout);
    assert!(only.stdout.starts_with("NAME "), "{}", only.stdout);
}

/// A laptop's kubeconfig: `KUBECONFIG=a:b`, `--kubeconfig`, `--context`, `--cluster`, `--as`,
/// `--as-group`, `--request-timeout`, and every exit status (through the real kubectl, which
/// `exec`s the plugin): 0 done, 1 what-if refused, 2 usage, 3 cluster error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_laptops_kubeconfig_with_kubectls_connection_flags_and_every_exit_status() {
    let s = suite().await;
    let env = s.env;
    // A resize pending in the context's namespace, which nobody can make room for.
    let (pending, _, pods) = env.scenario("laptop", NODE, &EQUAL).await;
    defer(env, &pending, &pods, "550m").await;
    Box::pin(laptop(env, &pending, &s.field)).await;
}

/// No leader (the controller killed: its Lease stays until it expires): `check` says so (✗, exit
/// 4); a Deferred resize with a victim waits, and `explain` and `status` show whom resize-guard
/// will preempt once a controller leads. The controller comes back and preempts; the resize
/// completes and `explain` shows `PreemptingForResize`, with no empty victims table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_leader_check_fails_and_a_resize_waits_until_one_preempts_for_it() {
    let mut s = suite().await;
    let env = s.env;
    let (f, node, pods) = env.scenario("waiting", NODE, &FIELD).await;
    s.whole = false;
    s.installed.kill_controller();
    let out = rg_until(env, &s.check(), "✗ no controller leads").await;
    assert!(!out.success, "a failed check exits 4");
    let failed = rg_run(env, &[], &s.check()).await;
    assert_eq!(failed.code, 4, "{}", failed.stdout);
    let stale = line(
        &out.stdout,
        "✗ no controller leads: Lease resize-guard/resize-guard-controller was last renewed by demo ",
    );
    assert!(stale.ends_with(" ago (lease duration 15s)"), "{stale}");
    assert_has(
        &out.stdout,
        &[
            format!(
                "{stale}\n    fix: kubectl -n resize-guard get pods -l app.kubernetes.io/component=controller; kubectl -n resize-guard logs deploy/resize-guard-controller\n"
            ),
            "\nStatus check results are ✗: 1 check(s) failed\n".to_owned(),
        ],
    );

    env.resize_cpu(&f, "app", "550m").await;
    wait_pod(&pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    let out = rg(env, &["explain", "app", "-n", &f]).await;
    println!("{}", out.stdout);
    assert_lines(
        &out.stdout,
        &[
            ("resize-guard:", "resize-guard: deferred-preemptible"),
            (
                &format!("node {node} lacks"),
                &format!("node {node} lacks cpu 120m; resize-guard will preempt {f}/filler:"),
            ),
            (
                "but no controller",
                "but no controller holds the Lease, so nobody acts on this plan now",
            ),
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
        cells(line(&out.stdout, &format!("{f}/filler"))),
        [
            format!("{f}/filler").as_str(),
            "100",
            "1500m",
            "256Mi",
            "no"
        ]
    );
    assert_eq!(
        cells(line(&out.stdout, "cpu ")),
        ["cpu", "1930m", "1500m", "0", "250m", "550m", "180m"]
    );
    let status = rg(env, &["status", "-n", &f, "-o", "wide"]).await;
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
    s.installed.start_controller(&env.cp).await.unwrap();
    let done = wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m") && resize_pending(p).is_none()
    })
    .await;
    if let Err(e) = done {
        let log = s
            .installed
            .controller
            .as_ref()
            .map(|c| c.log_tail(20_000))
            .unwrap_or_default();
        let filler = pods.get_opt("filler").await;
        let events = env
            .kubectl()
            .run(["events", "-n", &f])
            .await
            .map(|o| o.stdout);
        panic!(
            "the resize did not complete: {e:#}\n==== filler ====\n{filler:?}\n==== events ====\n{events:?}\n==== controller log ====\n{log}"
        );
    }
    s.whole = true;
    let out = rg_until(env, &["explain", "app", "-n", &f], "PreemptingForResize").await;
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
        out.stdout.lines().any(|l| {
            l.contains("Normal    PreemptingForResize") && l.contains(&format!(
            "preempting {f}/filler (priority 100) on node {node} to free cpu 120m for this resize"
        ))
        }),
        "{}",
        out.stdout
    );
    let empty = rg(env, &["status", "-n", &f]).await;
    assert_eq!(
        empty.stdout,
        format!("No pending resizes in namespace {f}.\n")
    );
}

/// The controller stopped (SIGTERM: it releases its Lease): ✗ with exit 4, naming the Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_once_the_controller_stops_and_releases_its_lease() {
    let mut s = suite().await;
    s.stop_controller().await;
    assert_eq!(rg_run(s.env, &[], &s.check()).await.code, 4);
    s.restore().await;
}

/// A wrong caBundle (another CA's), with no controller to repair it: ✗ with the fix, and the
/// dry-run probe gets no answer; the right one back, the probe reaches resize-guard again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_on_a_wrong_ca_bundle_and_the_probe_gets_no_answer() {
    let mut s = suite().await;
    let env = s.env;
    s.stop_controller().await;
    let hooks: Api<MutatingWebhookConfiguration> = Api::all(env.client().await);
    let set_bundle = |bundle: Vec<u8>| {
        let hooks = hooks.clone();
        async move {
            let mut c = hooks.get("resize-guard").await.unwrap();
            let hook = &mut c.webhooks.as_mut().unwrap()[0];
            let old = hook.client_config.ca_bundle.replace(ByteString(bundle));
            hooks
                .replace("resize-guard", &PostParams::default(), &c)
                .await
                .unwrap();
            old.unwrap()
        }
    };
    let other =
        resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback()).unwrap();
    let original = set_bundle(other.ca_cert_pem.clone().into_bytes()).await;
    let out = rg_until(env, &s.check(), "got no answer from resize-guard").await;
    assert!(!out.success);
    let (served, f) = (&s.served, &s.field);
    assert_has(
        &out.stdout,
        &[
            format!(
                "✗ mutate.resize-guard.io's caBundle does not verify the certificate served at {served}: invalid peer certificate: UnknownIssuer\n    fix: the API server cannot call the webhook"
            ),
            format!(
                "✗ a dry-run resize of pod {f}/app got no answer from resize-guard (API server: accepted)\n"
            ),
        ],
    );
    set_bundle(original.0).await;
    rg_until(env, &s.check(), "reached resize-guard").await;
    s.restore().await;
}

/// An expired serving certificate, signed by the right CA: ✗ with the fix; the controller comes
/// back, renews it, and `check` is green again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_on_an_expired_serving_certificate_until_the_controller_renews_it() {
    let mut s = suite().await;
    let env = s.env;
    s.stop_controller().await;
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
    let out = rg_until(env, &s.check(), "expired").await;
    assert!(!out.success);
    let served = &s.served;
    assert_has(
        &out.stdout,
        &[format!(
            "✗ the certificate served at {served} expired 2d ago\n    fix: the controller renews the certificate"
        )],
    );
    assert!(
        line(&out.stdout, &format!("✗ mutate.resize-guard.io's caBundle does not verify the certificate served at {served}: invalid peer certificate: certificate expired: verification time ")).len() > 10
    );

    s.installed.start_controller(&env.cp).await.unwrap();
    let out = rg_until(env, &s.check(), "Status check results are ✓").await;
    assert!(out.success, "{}", out.stdout);
    s.whole = true;
}

/// The pod-write guard's binding removed: the controller's patch pods is no longer narrowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_when_the_pod_write_policy_has_no_binding() {
    let mut s = suite().await;
    let env = s.env;
    s.whole = false;
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
    let out = rg_run(env, &[], &s.check()).await;
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    assert_has(
        &out.stdout,
        &[
            "✗ ValidatingAdmissionPolicy resize-guard-controller-pod-writes has no ValidatingAdmissionPolicyBinding resize-guard-controller-pod-writes: the policy is not enforced\n    fix: kubectl apply --server-side -f deploy/base/controller-pod-writes.yaml",
        ],
    );
    s.restore().await;
}

/// `deploy/` re-applied as is (its clientConfig names the Service
/// resize-guard/resize-guard-webhook), a replica published in its EndpointSlice: `check` verifies
/// caBundle against the serving Secret (a Service is not reachable from outside) and is green;
/// then ✗ once the replica is no longer ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_calls_the_shipped_service_and_fails_once_no_endpoint_is_ready() {
    let mut s = suite().await;
    let env = s.env;
    s.whole = false;
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
    let out = rg_until(env, &s.check(), "Status check results are ✓").await;
    assert_has(
        &out.stdout,
        &[
            "✓ mutate.resize-guard.io calls Service resize-guard/resize-guard-webhook:443 (1 ready endpoint(s))\n",
            "✓ mutate.resize-guard.io's caBundle verifies the certificate in Secret resize-guard/resize-guard-webhook-tls\n",
            "✓ the certificate in Secret resize-guard/resize-guard-webhook-tls is valid for 89d more\n",
            "(mutate decision no-change)\n",
        ],
    );
    // The replica stops being ready (a failing readiness probe): no endpoint is left.
    replica.publish(env, false, false).await.unwrap();
    let out = rg_until(env, &s.check(), "has no ready endpoints").await;
    assert!(!out.success);
    assert_has(
        &out.stdout,
        &[
            "✗ mutate.resize-guard.io calls Service resize-guard/resize-guard-webhook:443, which has no ready endpoints\n    fix: kubectl -n resize-guard get pods -l app.kubernetes.io/component=webhook; kubectl -n resize-guard describe deploy/resize-guard-webhook\n",
        ],
    );
    s.restore().await;
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
