//! The Helm chart `charts/resize-guard`, with upstream `helm` v3 built from Go modules
//! (`third_party/helm/build.sh`, found through `RESIZE_GUARD_HELM_BIN`; never skipped): it lints
//! (also `--strict`); its values schema refuses typos; rendered with default values it is the same
//! objects as `kubectl kustomize deploy/` but for Helm's own labels, and its variants are the
//! overlays'; every render applies on server dry run against a real kube-apiserver v1.37.2 (those
//! needing cert-manager's or the Prometheus Operator's CRDs are rendered and checked, their other
//! objects applied); everything namespaced follows the install namespace; NOTES says what each
//! mode installed; and the documented `helm install … --create-namespace` really installs (every
//! command NOTES prints then runs and succeeds, but those the harness's node-less cluster cannot
//! satisfy: waiting for rollouts, which the real-node suite runs), upgrades and uninstalls.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{LazyLock, OnceLock};

use resize_guard_harness::account::Account;
use resize_guard_harness::env::{Env, EnvOptions, alone, shared};
use resize_guard_harness::install::repo_root;
use resize_guard_harness::installed::bin;
use resize_guard_harness::text::assert_contains_all;
use serde::Deserialize;
use serde_json::Value;

const CHART: &str = "charts/resize-guard";
const NAMESPACE: &str = "resize-guard";
/// The labels Helm charts add by convention; the parity check ignores them.
const HELM_LABELS: [&str; 3] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
];

mod post_install_check;

/// Held by the tests that write to the API server (server dry runs read the objects a real
/// install creates, and an uninstall may delete them mid-apply).
mod upgrade;

static CLUSTER: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(|| tokio::sync::Mutex::new(()));

/// (kind, namespace or "", name).
pub(crate) type Key = (String, String, String);

fn path(rel: &str) -> String {
    repo_root().join(rel).display().to_string()
}

/// `--set value` for each of `values`, as `helm template` or `install` take them.
fn set<'a>(values: &[&'a str]) -> Vec<&'a str> {
    values.iter().flat_map(|v| ["--set", v]).collect()
}

/// The helm binary and a private HELM_*_HOME, so no user configuration or repository is read.
struct Helm {
    bin: PathBuf,
    home: tempfile::TempDir,
}

fn helm() -> &'static Helm {
    static HELM: OnceLock<Helm> = OnceLock::new();
    HELM.get_or_init(|| {
        let hint = "build helm with third_party/helm/build.sh and run the tests with \
                    RESIZE_GUARD_HELM_BIN=\"$(third_party/helm/build.sh | tail -n 1)/helm\" \
                    (make test does)";
        let Some(bin) = std::env::var_os("RESIZE_GUARD_HELM_BIN") else {
            panic!("RESIZE_GUARD_HELM_BIN is not set: {hint}");
        };
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "RESIZE_GUARD_HELM_BIN={} is not a file: {hint}",
            bin.display()
        );
        Helm {
            bin,
            home: tempfile::tempdir().unwrap(),
        }
    })
}

#[derive(Debug)]
struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Helm {
    async fn run(&self, args: &[&str]) -> Output {
        let home = self.home.path();
        let out = tokio::process::Command::new(&self.bin)
            .args(args)
            .current_dir(repo_root())
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env_remove("HELM_NAMESPACE")
            .env_remove("HELM_KUBECONTEXT")
            .env_remove("KUBECONFIG")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        Output {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args).await;
        assert!(
            out.success,
            "helm {}:\n{}\n{}",
            args.join(" "),
            out.stdout,
            out.stderr
        );
        out
    }

    /// `helm template resize-guard charts/resize-guard --namespace NS <set…>`.
    /// `helm template` without the test hooks (`templates/tests/`, which `helm install` does not
    /// apply: `post_install_check.rs` renders them).
    async fn template_in(&self, namespace: &str, set: &[&str]) -> String {
        let chart = path(CHART);
        let mut args = vec![
            "template",
            "resize-guard",
            &chart,
            "--namespace",
            namespace,
            "--skip-tests",
        ];
        args.extend_from_slice(set);
        self.ok(&args).await.stdout
    }

    async fn template(&self, set: &[&str]) -> String {
        self.template_in(NAMESPACE, set).await
    }

    /// `helm template resize-guard charts/resize-guard <set…>`, which must fail saying each of
    /// `says`.
    async fn refuses(&self, set: &[&str], says: &[&str]) {
        let chart = path(CHART);
        let mut args = vec!["template", "resize-guard", &chart];
        args.extend_from_slice(set);
        let out = self.run(&args).await;
        for says in says {
            assert!(
                !out.success && out.stderr.contains(says),
                "{set:?} must fail saying {says:?}: {}{}",
                out.stdout,
                out.stderr
            );
        }
    }
}

/// The arguments of a `helm install` or `upgrade` into `ns` of the cluster `kubeconfig` names,
/// with both Deployments at 0 replicas: nothing runs.
fn idle<'a>(ns: &'a str, kubeconfig: &'a str) -> [&'a str; 8] {
    [
        "--namespace",
        ns,
        "--kubeconfig",
        kubeconfig,
        "--set",
        "webhook.replicas=0",
        "--set",
        "controller.replicas=0",
    ]
}

/// [`super::kubectl`]'s stdout.
async fn kubectl(env: &Env, args: &[&str]) -> String {
    super::kubectl(env, args).await.stdout
}

/// The objects of a YAML stream by (kind, namespace, name); empty documents skipped.
/// Creates the install namespace as the chart renders it (`namespace.create=true`: Pod Security
/// restricted enforced), so a server dry run also judges pod templates under it.
async fn apply_chart_namespace(env: &Env, helm: &Helm, chart: &str) {
    let ns = helm
        .ok(&[
            "template",
            "resize-guard",
            chart,
            "--namespace",
            NAMESPACE,
            "--set",
            "namespace.create=true",
            "--show-only",
            "templates/namespace.yaml",
        ])
        .await
        .stdout;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &ns).unwrap();
    kubectl(env, &["apply", "-f", &file.path().display().to_string()]).await;
}

/// The objects of a YAML stream by (kind, namespace, name); each must have a kind and a name
/// and appear once (also read by `monitoring/component.rs`).
pub(crate) fn objects(stream: &str) -> BTreeMap<Key, Value> {
    let mut out = BTreeMap::new();
    for doc in serde_yaml_ng::Deserializer::from_str(stream) {
        let v = Value::deserialize(doc).unwrap_or_else(|e| panic!("bad YAML: {e}\n{stream}"));
        if v.is_null() {
            continue;
        }
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let key = (s("/kind"), s("/metadata/namespace"), s("/metadata/name"));
        assert!(
            !key.0.is_empty() && !key.2.is_empty(),
            "object without kind or name: {v}"
        );
        assert!(out.insert(key.clone(), v).is_none(), "{key:?} twice");
    }
    out
}

/// Drops Helm's labels and `helm.sh/…` annotations (and `labels`/`annotations` left empty).
fn without_helm(mut v: Value) -> Value {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            labels.retain(|k, _| !HELM_LABELS.contains(&k.as_str()));
        }
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.retain(|k, _| !k.starts_with("helm.sh/"));
        }
        for field in ["labels", "annotations"] {
            if meta
                .get(field)
                .and_then(Value::as_object)
                .is_some_and(serde_json::Map::is_empty)
            {
                meta.remove(field);
            }
        }
    }
    v
}

/// Every top-level field (and metadata) where two objects differ, `labels` included or not.
fn differences(a: &Value, b: &Value, with_labels: bool) -> Vec<String> {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if !with_labels && let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("labels");
        }
        v
    };
    let (a, b) = (strip(a), strip(b));
    let empty = serde_json::Map::new();
    let (ma, mb) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let fields: BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
    fields
        .into_iter()
        .filter(|f| ma.get(*f) != mb.get(*f))
        .map(|f| {
            format!(
                "  {f}:\n    kustomize: {}\n    helm:      {}",
                ma.get(f).map_or("(none)".to_owned(), Value::to_string),
                mb.get(f).map_or("(none)".to_owned(), Value::to_string)
            )
        })
        .collect()
}

/// The same (kind, namespace, name) set and equal objects: every field (`spec`, `rules`,
/// `webhooks`, `data`, `subjects`, `roleRef`, `value`, annotations, …), labels too when asked,
/// Helm's own labels and annotations aside.
fn assert_same_objects(what: &str, kustomize: &str, helm: &str, with_labels: bool) {
    let k = objects(kustomize);
    let h: BTreeMap<Key, Value> = objects(helm)
        .into_iter()
        .map(|(key, v)| (key, without_helm(v)))
        .collect();
    let only_k: Vec<_> = k.keys().filter(|key| !h.contains_key(*key)).collect();
    let only_h: Vec<_> = h.keys().filter(|key| !k.contains_key(*key)).collect();
    assert!(
        only_k.is_empty() && only_h.is_empty(),
        "{what}: objects differ\n  only in kustomize: {only_k:?}\n  only in helm: {only_h:?}"
    );
    let mut wrong = Vec::new();
    for (key, kv) in &k {
        let diffs = differences(kv, &h[key], with_labels);
        if !diffs.is_empty() {
            wrong.push(format!("{key:?}\n{}", diffs.join("\n")));
        }
    }
    assert!(
        wrong.is_empty(),
        "{what}: the chart renders differently from kustomize:\n{}",
        wrong.join("\n")
    );
}

/// Applies a render on server dry run (`kubectl apply --dry-run=server -f`), without the
/// objects of the given API groups (CRDs not installed here); returns kubectl's output.
async fn dry_run(env: &Env, what: &str, rendered: &str, skip_groups: &[&str]) -> String {
    let docs: Vec<Value> = objects(rendered)
        .into_values()
        .filter(|v| {
            let api = v["apiVersion"].as_str().unwrap_or("");
            !skip_groups
                .iter()
                .any(|g| api.starts_with(&format!("{g}/")))
        })
        .collect();
    let stream: Vec<String> = docs.iter().map(Value::to_string).collect();
    let out = super::dry_run(env, "apply", &stream.join("\n---\n")).await;
    assert!(
        out.success,
        "{what}: kubectl apply --dry-run=server:\n{}\n{}",
        out.stdout, out.stderr
    );
    assert!(
        !out.stderr.contains("PodSecurity") && !out.stderr.contains("Warning"),
        "{what}: warnings on dry run (Pod Security restricted is enforced): {}",
        out.stderr
    );
    let lines = out.stdout.lines().count();
    assert_eq!(
        lines,
        docs.len(),
        "{what}: one line per object:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.lines().all(|l| l.ends_with("(server dry run)")),
        "{what}: {}",
        out.stdout
    );
    out.stdout
}

/// No object carries a caBundle field: the controller or cert-manager's CA injector owns it
/// (the controller's write guard names it in CEL text, which is not a field).
fn assert_no_ca_bundle(what: &str, rendered: &str) {
    fn has_field(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.iter().any(|(k, v)| k == "caBundle" || has_field(v)),
            Value::Array(a) => a.iter().any(has_field),
            _ => false,
        }
    }
    for (key, v) in objects(rendered) {
        assert!(!has_field(&v), "{what}: {key:?} carries a caBundle");
    }
}

/// `rendered` (documents separated by `---` lines) without its one object of `kind`.
fn without_kind(rendered: &str, kind: &str) -> String {
    let docs: Vec<&str> = rendered.split("\n---").collect();
    let kept: Vec<&str> = docs
        .iter()
        .copied()
        .filter(|doc| !doc.lines().any(|l| l == format!("kind: {kind}")))
        .collect();
    assert_eq!(kept.len() + 1, docs.len(), "one {kind} in:\n{rendered}");
    kept.join("\n---")
}

fn kinds(rendered: &str) -> BTreeSet<(String, String)> {
    objects(rendered)
        .into_keys()
        .map(|(kind, _, name)| (kind, name))
        .collect()
}

/// Asserts that `rendered` holds the (kind, name)s of `base` less `removed` plus `added`.
fn assert_kinds(
    rendered: &str,
    base: &BTreeSet<(String, String)>,
    removed: &[(&str, &str)],
    added: &[(&str, &str)],
) {
    let mut expected = base.clone();
    for (kind, name) in removed {
        expected.remove(&((*kind).to_owned(), (*name).to_owned()));
    }
    for (kind, name) in added {
        expected.insert(((*kind).to_owned(), (*name).to_owned()));
    }
    assert_eq!(kinds(rendered), expected);
}

fn find<'a>(objs: &'a BTreeMap<Key, Value>, kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|((k, _, n), _)| k == kind && n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{kind}/{name} not rendered"))
}

fn args(deployment: &Value) -> Vec<String> {
    deployment
        .pointer("/spec/template/spec/containers/0/args")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_chart_lints_strictly() {
    let helm = helm();
    let chart = path(CHART);
    let version = helm.ok(&["version", "--template", "{{.Version}}"]).await;
    assert!(version.stdout.starts_with("v3."), "{}", version.stdout);
    for strict in [false, true] {
        let mut args = vec!["lint", &chart];
        if strict {
            args.push("--strict");
        }
        let out = helm.ok(&args).await;
        assert!(out.stdout.contains("0 chart(s) failed"), "{}", out.stdout);
    }
    for set in [
        "webhooks.mutating=false",
        "certificates.mode=cert-manager",
        "serviceMonitor.enabled=true",
        "priorityClass.create=false,priorityClass.name=system-cluster-critical,resourceQuota.create=true",
    ] {
        let out = helm.ok(&["lint", &chart, "--strict", "--set", set]).await;
        assert!(
            out.stdout.contains("0 chart(s) failed"),
            "{set}: {}",
            out.stdout
        );
    }
}

#[tokio::test]
async fn the_values_schema_and_the_templates_refuse_what_cannot_work() {
    let helm = helm();
    for (set, says) in [
        (
            "webhook.replica=3",
            "additional properties 'replica' not allowed",
        ),
        ("certificates.mode=vault", "certificates/mode"),
        ("webhooks.failurePolicy=fail", "failurePolicy"),
        ("webhooks.timeoutSeconds=60", "timeoutSeconds"),
        ("logFormat=xml", "logFormat"),
        ("rbac.controller.deletePods=sometimes", "deletePods"),
        (
            "priorityClass.name=system-cluster-critical",
            "set priorityClass.create=false",
        ),
    ] {
        helm.refuses(&["--set", set], &[says]).await;
    }
}

#[tokio::test]
async fn the_controllers_delete_and_resize_grants_follow_the_policy_as_the_components_add_them() {
    use super::kustomize::{controller_rules, with_components};
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let helm = helm();
    let role = |stream: &str| {
        controller_rules(stream)
            .into_iter()
            .map(without_helm)
            .collect::<Vec<_>>()
    };
    let kustomized = |components: &'static [&'static str]| async move {
        controller_rules(&kubectl(env, &["kustomize", &with_components(components)]).await)
    };
    let base = role(&kubectl(env, &["kustomize", &path("deploy")]).await);
    let deletes = kustomized(&["best-effort-deletes"]).await;
    let resizes = kustomized(&["revert-infeasible"]).await;
    let both = kustomized(&["best-effort-deletes", "revert-infeasible"]).await;
    assert_ne!(deletes, base);
    assert_ne!(resizes, base);
    let best_effort = "policy.config=preemption: {pdb: bestEffort}";
    let revert = "policy.config=feasibility: {revertInfeasible: true}";
    for (set, want, what) in [
        (vec![], &base, "defaults (pdb: respect, no revert)"),
        (
            vec!["--set-string", best_effort],
            &deletes,
            "pdb: bestEffort",
        ),
        (vec!["--set-string", revert], &resizes, "revertInfeasible"),
        (
            set(&[
                "policy.create=false",
                "rbac.controller.deletePods=true",
                "rbac.controller.resizePods=true",
            ]),
            &both,
            "both grants set explicitly",
        ),
        (
            vec![
                "--set-string",
                best_effort,
                "--set",
                "rbac.controller.deletePods=true",
                "--set",
                "rbac.controller.resizePods=false",
            ],
            &deletes,
            "bestEffort with deletes granted, resizes not",
        ),
        (
            vec!["--set", "policy.create=false"],
            &base,
            "a policy the chart cannot read, grants auto",
        ),
    ] {
        let rendered = helm.template(&set).await;
        assert_eq!(&role(&rendered), want, "{what}");
    }
    for (set, says) in [
        (
            [best_effort, "rbac.controller.deletePods=false"],
            "rbac.controller.deletePods=false leaves the controller without `delete pods`",
        ),
        (
            [revert, "rbac.controller.resizePods=false"],
            "rbac.controller.resizePods=false leaves the controller without `patch pods/resize`",
        ),
    ] {
        let set = ["--set-string", set[0], "--set", set[1]];
        helm.refuses(&set, &[says]).await;
    }
}

#[tokio::test]
async fn the_default_render_is_the_kustomize_install_and_variants_are_the_overlays() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let helm = helm();

    let kustomize = kubectl(env, &["kustomize", &path("deploy")]).await;
    // By default Helm's --create-namespace makes the namespace, so the chart renders every object
    // of deploy/ but the Namespace; namespace.create=true renders that too.
    let with_namespace = helm.template(&["--set", "namespace.create=true"]).await;
    assert_same_objects(
        "namespace.create=true vs deploy/",
        &kustomize,
        &with_namespace,
        true,
    );
    let default = helm.template(&[]).await;
    let without_namespace = without_kind(&kustomize, "Namespace");
    assert_same_objects("defaults vs deploy/", &without_namespace, &default, true);
    // Without --namespace (Helm's `default`), the install namespace is still resize-guard.
    let chart = path(CHART);
    let bare = helm
        .ok(&["template", "resize-guard", &chart, "--skip-tests"])
        .await
        .stdout;
    assert_same_objects("no --namespace vs deploy/", &without_namespace, &bare, true);

    // Every Helm label is there, on every object, and nowhere in selectors or pod templates.
    for (key, v) in objects(&default) {
        let labels = &v["metadata"]["labels"];
        assert_eq!(labels["helm.sh/chart"], "resize-guard-0.2.0", "{key:?}");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{key:?}");
        assert_eq!(
            labels["app.kubernetes.io/instance"], "resize-guard",
            "{key:?}"
        );
        for p in ["/spec/selector", "/spec/template/metadata"] {
            if let Some(s) = v.pointer(p) {
                assert!(!s.to_string().contains("helm.sh"), "{key:?} {p}: {s}");
                assert!(!s.to_string().contains("instance"), "{key:?} {p}: {s}");
            }
        }
    }

    // The variants that have an overlay render the overlay's objects (cert-manager's overlay
    // leaves its own objects unlabelled, so labels are not compared here).
    for (overlay, set) in [
        ("deploy/overlays/validating-only", "webhooks.mutating=false"),
        ("deploy/overlays/audit", "policy.config=mode: audit"),
        (
            "deploy/overlays/cert-manager",
            "certificates.mode=cert-manager",
        ),
    ] {
        let kustomize = kubectl(env, &["kustomize", &path(overlay)]).await;
        let rendered = helm
            .template(&["--set", set, "--set", "namespace.create=true"])
            .await;
        assert_same_objects(
            &format!("--set {set} vs {overlay}"),
            &kustomize,
            &rendered,
            false,
        );
    }
}

/// The admission port is 10250 inside the pod (the port managed control planes reach nodes on),
/// served on IPv4 and IPv6 by default in both installs; with `hostNetwork` that port is the
/// kubelet's, so the chart refuses it (and a health port of 10250) naming the fix; a `strategy`
/// value replaces the rollout the network mode picks.
#[tokio::test]
async fn the_admission_port_is_the_kubelets_but_never_on_the_nodes_network() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let helm = helm();
    let container = |d: &Value| d["spec"]["template"]["spec"]["containers"][0].clone();
    for (how, rendered) in [
        ("helm", helm.template(&[]).await),
        (
            "kustomize",
            kubectl(env, &["kustomize", &path("deploy")]).await,
        ),
    ] {
        let objs = objects(&rendered);
        let webhook = find(&objs, "Deployment", "resize-guard-webhook");
        assert_eq!(
            container(webhook)["ports"][0]["containerPort"],
            10250,
            "{how}"
        );
        // The program's own default address, [::]:10250, so no --tls-addr flag.
        assert!(
            !container(webhook)["args"].to_string().contains("addr"),
            "{how}: {}",
            container(webhook)["args"]
        );
        assert_eq!(
            webhook["spec"]["strategy"]["rollingUpdate"],
            serde_json::json!({"maxUnavailable": 0, "maxSurge": 1}),
            "{how}"
        );
    }
    for set in [
        "webhook.hostNetwork=true",
        "webhook.hostNetwork=true,webhook.port=9443,webhook.healthPort=10250",
    ] {
        let says = [
            "port 10250 is the kubelet's",
            "--set webhook.port=9443,webhook.healthPort=9080",
        ];
        helm.refuses(&["--set", set], &says).await;
    }
    // Default-deny egress clusters: both programs' policies allow what the value names, and
    // only then restrict egress at all.
    let egress = r#"networkPolicy.egress=[{"to":[{"ipBlock":{"cidr":"10.0.0.10/32"}}],"ports":[{"port":6443,"protocol":"TCP"}]}]"#;
    let objs = objects(&helm.template(&["--set-json", egress]).await);
    for name in ["resize-guard", "resize-guard-controller"] {
        let spec = &find(&objs, "NetworkPolicy", name)["spec"];
        assert_eq!(
            spec["policyTypes"],
            serde_json::json!(["Ingress", "Egress"]),
            "{name}"
        );
        assert_eq!(
            spec["egress"][0]["ports"][0]["port"], 6443,
            "{name}: {spec}"
        );
    }
    let objs = objects(&helm.template(&[]).await);
    let spec = &find(&objs, "NetworkPolicy", "resize-guard-controller")["spec"];
    assert!(
        spec["egress"].is_null() && spec["policyTypes"] == serde_json::json!(["Ingress"]),
        "{spec}"
    );
    let objs = objects(
        &helm
            .template(&[
                "--set-json",
                r#"webhook.strategy={"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"50%","maxSurge":0}}"#,
            ])
            .await,
    );
    assert_eq!(
        find(&objs, "Deployment", "resize-guard-webhook")["spec"]["strategy"],
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%", "maxSurge": 0}})
    );
}

/// The admission port's NetworkPolicy rule: open to any source by default (kube-apiserver's
/// source differs by cluster), narrowed to `networkPolicy.admissionFrom` when given — the same
/// objects as `deploy/overlays/admission-from` — with the health port left open either way.
#[tokio::test]
async fn the_admission_port_is_narrowed_only_when_admission_from_is_given() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let helm = helm();

    let default = objects(&helm.template(&[]).await);
    let open = &find(&default, "NetworkPolicy", "resize-guard")["spec"]["ingress"];
    assert_eq!(open[0]["ports"][0]["port"], 10250);
    assert!(open[0]["from"].is_null(), "narrowed by default: {open}");
    assert!(open[1]["from"].is_null(), "{open}");

    let peer = r#"networkPolicy.admissionFrom=[{"ipBlock":{"cidr":"10.0.0.0/24"}}]"#;
    let narrowed = helm
        .template(&["--set-json", peer, "--set", "namespace.create=true"])
        .await;
    let overlay = kubectl(env, &["kustomize", &path("deploy/overlays/admission-from")]).await;
    assert_same_objects(
        "--set-json networkPolicy.admissionFrom vs deploy/overlays/admission-from",
        &overlay,
        &narrowed,
        false,
    );
    let objs = objects(&narrowed);
    let rules = &find(&objs, "NetworkPolicy", "resize-guard")["spec"]["ingress"];
    assert_eq!(
        rules[0]["from"],
        serde_json::json!([{"ipBlock": {"cidr": "10.0.0.0/24"}}])
    );
    assert_eq!(rules[0]["ports"][0]["port"], 10250);
    // The kubelet's probes and Prometheus still reach the health port.
    assert_eq!(rules[1]["ports"][0]["port"], 8080);
    assert!(rules[1]["from"].is_null(), "{rules}");
    // The controller's policy is not narrowed with it.
    let controller = &find(&objs, "NetworkPolicy", "resize-guard-controller")["spec"]["ingress"];
    assert!(controller[0]["from"].is_null(), "{controller}");

    // A konnectivity peer (namespace and pod selectors together) reaches the object whole, on
    // the port the webhook listens on.
    let konnectivity = r#"networkPolicy.admissionFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}},"podSelector":{"matchLabels":{"k8s-app":"konnectivity-agent"}}}]"#;
    let objs = objects(
        &helm
            .template(&["--set-json", konnectivity, "--set", "webhook.port=9443"])
            .await,
    );
    let rules = &find(&objs, "NetworkPolicy", "resize-guard")["spec"]["ingress"];
    assert_eq!(rules[0]["ports"][0]["port"], 9443);
    assert_eq!(
        rules[0]["from"][0]["podSelector"]["matchLabels"]["k8s-app"],
        "konnectivity-agent"
    );
    assert_eq!(
        rules[0]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "kube-system"
    );
}

#[tokio::test]
async fn every_render_applies_on_server_dry_run() {
    let (env, _alone) = alone(&CLUSTER).await;
    let helm = helm();
    // Dry run does not create the namespace: create it as the chart renders it (Pod Security
    // restricted enforced), so the dry run also judges both pod templates under it.
    let chart = path(CHART);
    apply_chart_namespace(env, helm, &chart).await;
    let labels = kubectl(
        env,
        &[
            "get",
            "namespace",
            NAMESPACE,
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    )
    .await;
    assert!(
        labels.contains(r#""pod-security.kubernetes.io/enforce":"restricted""#),
        "{labels}"
    );

    let base: BTreeSet<(String, String)> = kinds(&helm.template(&[]).await);

    // Defaults.
    let out = dry_run(env, "defaults", &helm.template(&[]).await, &[]).await;
    assert_contains_all(
        &out,
        &[
            "priorityclass.scheduling.k8s.io/resize-guard",
            "deployment.apps/resize-guard-webhook",
            "deployment.apps/resize-guard-controller",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/resize-guard",
        ],
    );
    assert!(
        !out.contains("validatingwebhookconfiguration"),
        "one webhook call per resize: {out}"
    );

    // Validating only.
    let rendered = helm.template(&["--set", "webhooks.mutating=false"]).await;
    assert_kinds(
        &rendered,
        &base,
        &[("MutatingWebhookConfiguration", "resize-guard")],
        &[("ValidatingWebhookConfiguration", "resize-guard")],
    );
    dry_run(env, "webhooks.mutating=false", &rendered, &[]).await;

    // Audit.
    let rendered = helm.template(&["--set", "policy.config=mode: audit"]).await;
    assert_eq!(kinds(&rendered), base);
    let objs = objects(&rendered);
    assert_eq!(
        find(&objs, "ConfigMap", "resize-guard")["data"]["policy.yaml"],
        "mode: audit"
    );
    dry_run(env, "policy.config=mode: audit", &rendered, &[]).await;

    // The policy ConfigMap left to the user.
    let rendered = helm.template(&["--set", "policy.create=false"]).await;
    assert_kinds(&rendered, &base, &[("ConfigMap", "resize-guard")], &[]);
    dry_run(env, "policy.create=false", &rendered, &[]).await;

    // Host network on other ports (EKS with a custom CNI).
    let rendered = helm
        .template(&set(&[
            "webhook.hostNetwork=true",
            "webhook.port=9443",
            "webhook.healthPort=9080",
        ]))
        .await;
    assert_eq!(kinds(&rendered), base);
    // (Not applied here: host networking is outside Pod Security `restricted`, which this
    // namespace enforces; NOTES tell such an install to label its namespace `privileged`.)

    // system-cluster-critical (GKE): no PriorityClass of our own, a ResourceQuota admitting it.
    let rendered = helm
        .template(&set(&[
            "priorityClass.create=false",
            "priorityClass.name=system-cluster-critical",
            "resourceQuota.create=true",
        ]))
        .await;
    assert_kinds(
        &rendered,
        &base,
        &[("PriorityClass", "resize-guard")],
        &[("ResourceQuota", "resize-guard-critical-pods")],
    );
    let objs = objects(&rendered);
    for d in ["resize-guard-webhook", "resize-guard-controller"] {
        assert_eq!(
            find(&objs, "Deployment", d)["spec"]["template"]["spec"]["priorityClassName"],
            "system-cluster-critical"
        );
    }
    let quota = find(&objs, "ResourceQuota", "resize-guard-critical-pods");
    assert_eq!(
        quota["spec"]["scopeSelector"]["matchExpressions"][0],
        serde_json::json!({"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]})
    );
    dry_run(env, "system-cluster-critical + quota", &rendered, &[]).await;

    // cert-manager: its objects (CRDs not installed here) checked, the rest applied.
    let rendered = helm
        .template(&["--set", "certificates.mode=cert-manager"])
        .await;
    let added = [
        ("Issuer", "resize-guard-selfsigned"),
        ("Issuer", "resize-guard-ca"),
        ("Certificate", "resize-guard-ca"),
        ("Certificate", "resize-guard-webhook"),
    ];
    assert_kinds(&rendered, &base, &[], &added);
    let objs = objects(&rendered);
    assert_eq!(
        find(&objs, "MutatingWebhookConfiguration", "resize-guard")["metadata"]["annotations"],
        serde_json::json!({"cert-manager.io/inject-ca-from": "resize-guard/resize-guard-webhook"}),
    );
    assert_eq!(
        args(find(&objs, "Deployment", "resize-guard-controller")),
        ["--log-format=json", "--certificates=external"]
    );
    assert_eq!(
        find(&objs, "Certificate", "resize-guard-webhook")["spec"]["secretName"],
        "resize-guard-webhook-tls"
    );
    dry_run(
        env,
        "certificates.mode=cert-manager",
        &rendered,
        &["cert-manager.io"],
    )
    .await;

    // ServiceMonitor: one for both programs' metrics, through a headless Service each.
    let rendered = helm
        .template(&["--set", "serviceMonitor.enabled=true"])
        .await;
    let added = [
        ("ServiceMonitor", "resize-guard"),
        ("Service", "resize-guard-webhook-metrics"),
        ("Service", "resize-guard-controller-metrics"),
    ];
    assert_kinds(&rendered, &base, &[], &added);
    let objs = objects(&rendered);
    let monitor = find(&objs, "ServiceMonitor", "resize-guard");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let wanted = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    let port = monitor["spec"]["endpoints"][0]["port"].as_str().unwrap();
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!([NAMESPACE])
    );
    let selected: BTreeSet<&str> = objs
        .iter()
        .filter(|((kind, _, _), _)| kind == "Service")
        .filter(|(_, svc)| {
            wanted
                .iter()
                .all(|(k, v)| &svc["metadata"]["labels"][k.as_str()] == v)
        })
        .map(|((_, _, name), _)| name.as_str())
        .collect();
    assert_eq!(
        selected,
        BTreeSet::from([
            "resize-guard-webhook-metrics",
            "resize-guard-controller-metrics"
        ]),
        "the ServiceMonitor selects both metrics Services and not the admission Service"
    );
    for (svc, deployment, container_port) in [
        ("resize-guard-webhook-metrics", "resize-guard-webhook", 8080),
        (
            "resize-guard-controller-metrics",
            "resize-guard-controller",
            8081,
        ),
    ] {
        let svc = find(&objs, "Service", svc);
        let pod = &find(&objs, "Deployment", deployment)["spec"]["template"];
        assert_eq!(svc["spec"]["selector"], pod["metadata"]["labels"]);
        assert_eq!(svc["spec"]["ports"][0]["name"], port);
        let target = svc["spec"]["ports"][0]["targetPort"].as_str().unwrap();
        let named = pod["spec"]["containers"][0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == target)
            .unwrap();
        assert_eq!(named["containerPort"], container_port);
    }
    dry_run(
        env,
        "serviceMonitor.enabled=true",
        &rendered,
        &["monitoring.coreos.com"],
    )
    .await;

    // No caBundle in any render: the controller or cert-manager's injector owns it.
    for set in [
        "webhooks.mutating=true",
        "certificates.mode=cert-manager",
        "serviceMonitor.enabled=true",
    ] {
        assert_no_ca_bundle(set, &helm.template(&["--set", set]).await);
    }
}

#[tokio::test]
async fn everything_namespaced_follows_the_install_namespace() {
    let helm = helm();
    let ns = "guard-system";
    let rendered = helm
        .template_in(
            ns,
            &set(&["certificates.mode=cert-manager", "namespace.create=true"]),
        )
        .await;
    assert_no_ca_bundle(ns, &rendered);
    let objs = objects(&rendered);
    let cluster_scoped = [
        "Namespace",
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ];
    for ((kind, namespace, name), v) in &objs {
        if cluster_scoped.contains(&kind.as_str()) {
            assert_eq!(namespace, "", "{kind}/{name} is cluster-scoped");
        } else {
            assert_eq!(namespace, ns, "{kind}/{name}");
        }
        for subject in v["subjects"].as_array().into_iter().flatten() {
            assert_eq!(subject["namespace"], ns, "{kind}/{name} subjects");
        }
    }
    assert!(objs.contains_key(&("Namespace".into(), String::new(), ns.into())));
    // The controller's write guards name its ServiceAccount in any namespace, and find the
    // install namespace in the request's user name, never as a literal.
    for guard in [
        "pod-writes",
        "status-writes",
        "resize-writes",
        "removals",
        "webhook-writes",
    ] {
        let policy = &objs[&(
            "ValidatingAdmissionPolicy".to_owned(),
            String::new(),
            format!("resize-guard-controller-{guard}"),
        )];
        let matched = policy["spec"]["matchConditions"][0]["expression"]
            .as_str()
            .unwrap_or_default();
        assert!(
            matched.contains("endsWith(':resize-guard-controller')") && !matched.contains(ns),
            "{guard}: {matched}"
        );
        assert!(
            !policy["spec"].to_string().contains(&format!("'{ns}'")),
            "{guard} names the install namespace"
        );
    }
    {
        let (kind, path) = ("MutatingWebhookConfiguration", "/mutate");
        let config = &objs[&(kind.to_owned(), String::new(), "resize-guard".to_owned())];
        let webhook = &config["webhooks"][0];
        assert_eq!(
            webhook["clientConfig"]["service"],
            serde_json::json!({"name": "resize-guard-webhook", "namespace": ns, "path": path, "port": 443})
        );
        assert_eq!(
            webhook["namespaceSelector"]["matchExpressions"][0]["values"],
            serde_json::json!(["kube-system", ns]),
            "{kind}: the install namespace is never judged"
        );
        assert_eq!(
            config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            format!("{ns}/resize-guard-webhook")
        );
    }
    let cert = find(&objs, "Certificate", "resize-guard-webhook");
    assert_eq!(
        cert["spec"]["dnsNames"],
        serde_json::json!([
            "resize-guard-webhook",
            format!("resize-guard-webhook.{ns}"),
            format!("resize-guard-webhook.{ns}.svc"),
            format!("resize-guard-webhook.{ns}.svc.cluster.local"),
        ])
    );
    let monitor = helm
        .template_in(ns, &["--set", "serviceMonitor.enabled=true"])
        .await;
    let objs = objects(&monitor);
    assert_eq!(
        find(&objs, "ServiceMonitor", "resize-guard")["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!([ns])
    );
}

#[tokio::test]
async fn values_reach_the_objects() {
    let helm = helm();
    let rendered = helm
        .template(&set(&[
            "image.webhook.repository=registry.example/rg-webhook",
            "image.webhook.tag=1.2.3",
            "image.controller.pullPolicy=Always",
            "imagePullSecrets[0].name=regcred",
            "webhook.replicas=3",
            "controller.replicas=1",
            "webhook.resources.limits.cpu=1",
            "controller.extraArgs={--lease-duration=30s,--renew-interval=5s}",
            "webhook.extraArgs={--max-body-bytes=8388608}",
            "webhooks.timeoutSeconds=5",
            "webhooks.failurePolicy=Fail",
            "webhooks.objectSelector.matchLabels.resize-guard\\.io/judge=yes",
            "networkPolicy.enabled=false",
            "logFormat=text",
        ]))
        .await;
    let objs = objects(&rendered);
    let webhook = find(&objs, "Deployment", "resize-guard-webhook");
    let controller = find(&objs, "Deployment", "resize-guard-controller");
    let container = |d: &Value| d["spec"]["template"]["spec"]["containers"][0].clone();
    assert_eq!(
        container(webhook)["image"],
        "registry.example/rg-webhook:1.2.3"
    );
    assert_eq!(webhook["spec"]["replicas"], 3);
    assert_eq!(container(webhook)["resources"]["limits"]["cpu"], 1);
    assert_eq!(
        args(webhook),
        ["--log-format=text", "--max-body-bytes=8388608"]
    );
    assert_eq!(
        container(controller)["image"],
        "registry.invalid/resize-guard/resize-guard-controller:0.2.0"
    );
    assert_eq!(container(controller)["imagePullPolicy"], "Always");
    assert_eq!(
        args(controller),
        [
            "--log-format=text",
            "--lease-duration=30s",
            "--renew-interval=5s"
        ]
    );
    for d in [webhook, controller] {
        assert_eq!(
            d["spec"]["template"]["spec"]["imagePullSecrets"],
            serde_json::json!([{"name": "regcred"}])
        );
    }
    // One controller replica: no PDB that would block every drain; three webhooks keep theirs.
    assert!(
        !objs
            .keys()
            .any(|(k, _, n)| k == "PodDisruptionBudget" && n == "resize-guard-controller")
    );
    find(&objs, "PodDisruptionBudget", "resize-guard-webhook");
    assert!(!objs.keys().any(|(k, _, _)| k == "NetworkPolicy"));
    {
        let w = &find(&objs, "MutatingWebhookConfiguration", "resize-guard")["webhooks"][0];
        assert_eq!(w["timeoutSeconds"], 5);
        assert_eq!(w["failurePolicy"], "Fail");
        assert_eq!(
            w["objectSelector"],
            serde_json::json!({"matchLabels": {"resize-guard.io/judge": "yes"}})
        );
    }
    // The operator's values: environment, pod metadata, placement, security, ports, digest.
    let digest = format!("sha256:{}", "ab".repeat(32));
    let digest_value = format!("image.controller.digest={digest}");
    let mut values = set(&[
        "webhook.extraEnv[0].name=RUST_LOG",
        "webhook.extraEnv[0].value=debug",
        "controller.podAnnotations.example\\.com/team=platform",
        "webhook.podLabels.team=platform",
        &digest_value,
        "webhook.hostNetwork=true",
        "webhook.port=9443",
        "webhook.healthPort=9080",
    ]);
    values.extend([
            "--set-json",
            r#"webhook.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/arch","operator":"In","values":["arm64"]}]}]}}}"#,
            "--set-json",
            r#"controller.topologySpreadConstraints=[{"maxSkew":2,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app.kubernetes.io/component":"controller"}}}]"#,
            "--set-json",
            r#"webhook.podSecurityContext={"runAsNonRoot":true,"runAsUser":1000,"seccompProfile":{"type":"RuntimeDefault"}}"#,
            "--set-json",
            r#"webhooks.matchConditions=[{"name":"not-kube-system-users","expression":"!request.userInfo.username.startsWith('system:serviceaccount:kube-system:')"}]"#,
        ]);
    let rendered = helm.template(&values).await;
    let objs = objects(&rendered);
    let webhook = find(&objs, "Deployment", "resize-guard-webhook");
    let controller = find(&objs, "Deployment", "resize-guard-controller");
    let pod = |d: &Value| d["spec"]["template"].clone();
    // The allocator setting both programs ship with, then the user's extra env.
    for d in [webhook, controller] {
        assert_eq!(
            container(d)["env"][2],
            serde_json::json!({"name": "MIMALLOC_ARENA_EAGER_COMMIT", "value": "0"})
        );
    }
    assert_eq!(
        container(webhook)["env"][3],
        serde_json::json!({"name": "RUST_LOG", "value": "debug"})
    );
    assert_eq!(
        pod(controller)["metadata"]["annotations"]["example.com/team"],
        "platform"
    );
    assert_eq!(pod(webhook)["metadata"]["labels"]["team"], "platform");
    assert!(
        !webhook["spec"]["selector"].to_string().contains("team"),
        "pod labels stay out of the selector"
    );
    assert_eq!(
        container(controller)["image"],
        format!("registry.invalid/resize-guard/resize-guard-controller@{digest}")
    );
    let affinity = &pod(webhook)["spec"]["affinity"];
    assert!(affinity["nodeAffinity"].is_object() && affinity["podAntiAffinity"].is_null());
    assert_eq!(
        pod(controller)["spec"]["topologySpreadConstraints"][0]["maxSkew"],
        2
    );
    assert_eq!(pod(webhook)["spec"]["securityContext"]["runAsUser"], 1000);
    assert_eq!(
        pod(webhook)["spec"]["nodeSelector"],
        serde_json::json!({"kubernetes.io/os": "linux"})
    );
    assert_eq!(pod(webhook)["spec"]["hostNetwork"], true);
    assert_eq!(pod(webhook)["spec"]["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(
        args(webhook),
        [
            "--log-format=json",
            "--tls-addr=[::]:9443",
            "--health-addr=[::]:9080"
        ]
    );
    assert_eq!(
        container(webhook)["ports"],
        serde_json::json!([{"name": "https", "containerPort": 9443}, {"name": "health", "containerPort": 9080}])
    );
    // On the node's network a surge pod would need a node free of the ports: one at a time.
    assert_eq!(
        webhook["spec"]["strategy"],
        serde_json::json!({"rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    let policy = find(&objs, "NetworkPolicy", "resize-guard");
    assert_eq!(
        policy["spec"]["ingress"][0]["ports"][0]["port"], 9443,
        "the NetworkPolicy follows the admission port"
    );
    assert_eq!(policy["spec"]["ingress"][1]["ports"][0]["port"], 9080);
    assert_eq!(
        find(&objs, "MutatingWebhookConfiguration", "resize-guard")["webhooks"][0]["matchConditions"]
            [0]["name"],
        "not-kube-system-users"
    );
    // No CPU limit on either program by default (the admission path is never throttled).
    for d in [webhook, controller] {
        assert!(container(d)["resources"]["limits"]["cpu"].is_null(), "{d}");
        assert!(container(d)["resources"]["requests"]["memory"].is_string());
    }

    // A policy given as a map is rendered as YAML text.
    let rendered = helm
        .template(&[
            "--set-json",
            r#"policy.config={"mode":"audit","qos":{"onChange":"repair"}}"#,
        ])
        .await;
    let objs = objects(&rendered);
    assert_eq!(
        find(&objs, "ConfigMap", "resize-guard")["data"]["policy.yaml"],
        "mode: audit\nqos:\n  onChange: repair\n"
    );
}

/// An operator's own images, as `make push` prints the flags for them.
const OWN_WEBHOOK_IMAGE: &str = "image.webhook.repository=registry.example/platform/resize-guard-webhook,image.webhook.digest=sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OWN_CONTROLLER_IMAGE: &str = "image.controller.repository=registry.example/platform/resize-guard-controller,image.controller.digest=sha256:1111111111111111111111111111111111111111111111111111111111111111";
const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// The commands NOTES prints (indented `kubectl …` lines), but those with a `<placeholder>`.
fn notes_commands(helm_stdout: &str) -> Vec<String> {
    let notes = helm_stdout
        .split_once("NOTES:\n")
        .map(|(_, n)| n)
        .unwrap_or_else(|| panic!("no NOTES in:\n{helm_stdout}"));
    notes
        .lines()
        .filter(|l| l.starts_with("  kubectl "))
        .filter(|l| !l.contains('<'))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// Runs `command` with `sh -c` as a user would paste it, with the harness's kubectl first on
/// PATH and its admin kubeconfig; retried for up to 30 s (NOTES says what appears "within
/// seconds" of the controller starting).
async fn run_note(env: &Env, command: &str) -> String {
    let kubectl = &env.cp.binaries().kubectl;
    let dir = kubectl.parent().unwrap().display().to_string();
    let path = format!("{dir}:{}", std::env::var("PATH").unwrap_or_default());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = tokio::process::Command::new("sh")
            .args(["-c", command])
            .env("PATH", &path)
            .env("KUBECONFIG", env.cp.kubeconfig_path())
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "NOTES command failed: {command}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn helm_install_create_namespace_runs_what_notes_prints_in_every_mode() {
    let (env, _alone) = alone(&CLUSTER).await;
    let helm = helm();
    // Its own namespace: the other tests' dry runs use resize-guard.
    let ns = "resize-guard-helm";
    let chart = path(CHART);
    let kubeconfig = env.cp.kubeconfig_path().display().to_string();
    resize_guard_harness::issuer::install_cert_manager_crds(env)
        .await
        .unwrap();
    // The Deployment controller, so `rollout status` has a status to read.
    env.cp.start_controller_manager().unwrap();
    // Each mode as an operator installs it; the programs run as local processes (the
    // Deployments at 0 replicas, so their rollouts are complete), the controller as the
    // namespace's own ServiceAccount.
    for (mode, set) in [
        ("defaults", vec![]),
        ("validating-only", vec!["webhooks.mutating=false"]),
        ("audit", vec!["policy.config=mode: audit"]),
        ("cert-manager", vec!["certificates.mode=cert-manager"]),
        (
            "own registry",
            vec![OWN_WEBHOOK_IMAGE, OWN_CONTROLLER_IMAGE],
        ),
        // Last: the policy ConfigMap NOTES have the operator create is theirs and stays.
        ("own policy", vec!["policy.create=false"]),
    ] {
        let mut args = vec!["install", "resize-guard", &chart, "--create-namespace"];
        args.extend(idle(ns, &kubeconfig));
        for s in &set {
            args.extend(["--set", s]);
        }
        let install = helm.ok(&args).await;
        assert!(
            install.stdout.contains("STATUS: deployed"),
            "{mode}: {}",
            install.stdout
        );
        assert!(
            !install.stdout.contains("mutating + validating"),
            "{mode}: one webhook configuration per install: {}",
            install.stdout
        );
        // NOTES name the images in use, and say when they cannot be pulled.
        let own = set.contains(&OWN_WEBHOOK_IMAGE);
        let images = if own {
            format!(
                "  webhook     registry.example/platform/resize-guard-webhook@{DIGEST}\n  \
                 controller  registry.example/platform/resize-guard-controller@{DIGEST}\n"
            )
        } else {
            "  webhook     registry.invalid/resize-guard/resize-guard-webhook:0.2.0\n  \
             controller  registry.invalid/resize-guard/resize-guard-controller:0.2.0\n"
                .to_owned()
        };
        assert!(
            install.stdout.contains(&format!("Images:\n{images}"))
                && install.stdout.contains("never resolves") != own,
            "{mode}: NOTES name the images in use:\n{}",
            install.stdout
        );
        let kind = if set.contains(&"webhooks.mutating=false") {
            "validatingwebhookconfiguration"
        } else {
            "mutatingwebhookconfiguration"
        };
        let other = if kind.starts_with("mutating") {
            "validatingwebhookconfiguration"
        } else {
            "mutatingwebhookconfiguration"
        };
        assert!(
            install.stdout.contains(kind) && !install.stdout.contains(other),
            "{mode}: NOTES name the configuration installed ({kind}) and not the other:\n{}",
            install.stdout
        );
        let cert_manager = set.contains(&"certificates.mode=cert-manager");
        // The controller as the namespace's ServiceAccount, as the chart's Deployment runs it:
        // it makes the certificates NOTES tells the user to check.
        let mut controller = Account::of(env, ns, "resize-guard-controller")
            .await
            .unwrap()
            .spawn_controller(
                env,
                &bin("resize-guard-controller")
                    .unwrap()
                    .display()
                    .to_string(),
                &format!("{ns}-controller"),
                if cert_manager {
                    &["--certificates=external"]
                } else {
                    &[]
                },
            )
            .unwrap();
        if cert_manager {
            resize_guard_harness::issuer::issue(env, ns, "resize-guard-webhook")
                .await
                .unwrap();
            resize_guard_harness::issuer::inject(
                env,
                resize_guard_harness::admission::Webhooks::Mutating,
            )
            .await
            .unwrap();
        }
        let commands = notes_commands(&install.stdout);
        for wanted in [
            "kubectl label namespace",
            "rollout status deployment/resize-guard-webhook",
            "rollout status deployment/resize-guard-controller",
            "events --for configmap/resize-guard",
        ] {
            assert!(
                commands.iter().any(|c| c.contains(wanted)),
                "{mode}: NOTES lack {wanted:?}: {commands:?}"
            );
        }
        for command in &commands {
            let out = run_note(env, command).await;
            if command.contains("caBundle") {
                assert!(out.len() > 100, "{mode}: {command}: caBundle is {out:?}");
            }
        }
        eprintln!("{mode}: {} NOTES commands succeeded", commands.len());
        controller.stop(std::time::Duration::from_secs(10));
        let labels = kubectl(
            env,
            &["get", "namespace", ns, "-o", "jsonpath={.metadata.labels}"],
        )
        .await;
        assert!(
            labels.contains(r#""pod-security.kubernetes.io/enforce":"restricted""#),
            "{mode}: NOTES' label command: {labels}"
        );
        if mode == "defaults" {
            upgrade_to_validating_only(env, &chart, ns, &kubeconfig).await;
        }
        uninstall(env, ns, &kubeconfig).await;
    }
}

/// Upgrading to validating-only replaces the mutating configuration by the validating one.
async fn upgrade_to_validating_only(env: &Env, chart: &str, ns: &str, kubeconfig: &str) {
    helm()
        .ok(&[
            "upgrade",
            "resize-guard",
            chart,
            "--namespace",
            ns,
            "--reuse-values",
            "--set",
            "webhooks.mutating=false",
            "--kubeconfig",
            kubeconfig,
        ])
        .await;
    let gone = env
        .kubectl()
        .run(["get", "mutatingwebhookconfiguration", "resize-guard"])
        .await
        .unwrap();
    assert!(
        !gone.success && gone.stderr.contains("NotFound"),
        "{}",
        gone.stderr
    );
    kubectl(
        env,
        &["get", "validatingwebhookconfiguration", "resize-guard"],
    )
    .await;
}

/// Uninstalling removes everything the chart rendered; the namespace (Helm's, from
/// --create-namespace) stays.
async fn uninstall(env: &Env, ns: &str, kubeconfig: &str) {
    helm()
        .ok(&[
            "uninstall",
            "resize-guard",
            "--namespace",
            ns,
            "--kubeconfig",
            kubeconfig,
        ])
        .await;
    for object in [
        "priorityclass/resize-guard",
        "clusterrole/resize-guard-controller",
        "validatingwebhookconfiguration/resize-guard",
        "mutatingwebhookconfiguration/resize-guard",
    ] {
        let out = env.kubectl().run(["get", object]).await.unwrap();
        assert!(
            !out.success && out.stderr.contains("NotFound"),
            "{object}: {}",
            out.stderr
        );
    }
    let out = env
        .kubectl()
        .run(["get", "deployment", "resize-guard-webhook", "-n", ns])
        .await
        .unwrap();
    assert!(!out.success, "{}", out.stdout);
    kubectl(env, &["get", "namespace", ns]).await;
    remove_leftovers(env, ns).await;
}

/// The operator's guide page that says how to uninstall.
const UNINSTALL: &str = "docs/src/operator/uninstall.md";

/// What the programs made at run time stays after `helm uninstall`; the one command of the
/// operator's guide ([`UNINSTALL`], run as printed but for the namespace) names all of it and
/// removes it.
async fn remove_leftovers(env: &Env, ns: &str) {
    let page = std::fs::read_to_string(path(UNINSTALL)).unwrap();
    let command = page
        .lines()
        .find(|l| l.starts_with("kubectl -n resize-guard delete --ignore-not-found secret/"))
        .unwrap_or_else(|| panic!("{UNINSTALL} names the leftovers in one command"))
        .replacen("-n resize-guard ", &format!("-n {ns} "), 1);
    let left = || async {
        kubectl(
            env,
            &["get", "secrets,configmaps,leases", "-n", ns, "-o", "name"],
        )
        .await
        .lines()
        // The namespace's own, and (with policy.create=false) the policy NOTES had the operator
        // create: theirs, not the programs'.
        .filter(|l| !matches!(*l, "configmap/kube-root-ca.crt" | "configmap/resize-guard"))
        .map(str::to_owned)
        .collect::<Vec<_>>()
    };
    let before = left().await;
    assert!(
        before.iter().any(|o| o.starts_with("lease")),
        "the controller ran, so at least its Lease is left: {before:?}"
    );
    for object in &before {
        assert!(
            command.split(' ').any(|word| word == object),
            "{object} is left after helm uninstall but {UNINSTALL}'s command does not name it: \
             {command}"
        );
    }
    run_note(env, &command).await;
    assert_eq!(left().await, Vec::<String>::new(), "after: {command}");
}
