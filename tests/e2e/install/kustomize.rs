//! The install as shipped, against a real kube-apiserver v1.37.2: `kubectl apply -k deploy/`
//! (server side, unmodified) succeeds and passes Pod Security `restricted`; the overlays apply on
//! dry run (cert-manager's renders: its CRDs are not installed here); the manifests carry no
//! `caBundle`; and each ServiceAccount may do exactly what its program needs
//! (`kubectl auth can-i --as`): the network-facing webhook cannot change or evict any pod. And
//! an install moved to another namespace the documented way (`namespace:` plus
//! `deploy/follow-namespace` under `transformers:`), by default and with cert-manager, judges
//! resizes: both programs run as that namespace's real ServiceAccounts (tokens from the
//! TokenRequest API), the webhook behind the moved Service, so kube-apiserver verifies its
//! certificate for `resize-guard-webhook.platform-rg.svc`. The moved install leaves the
//! namespace alone: made beforehand with a pod in it, both are still there after `kubectl delete
//! -k`. cert-manager is not built here: a
//! stand-in (`resize_guard_harness::issuer`) issues for the installed Certificate's DNS names and
//! injects the CA its annotation names.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use super::kubectl;
use std::time::{Duration, Instant};

use resize_guard_harness::account::Account;
use resize_guard_harness::installed::bin;
use resize_guard_harness::objects::cpu_resize;
use resize_guard_harness::replica::Replica;

use resize_guard_harness::env::{Env, EnvOptions, alone, shared};
use resize_guard_harness::install::repo_root;

/// Held by every test here: the moved install rebinds the cluster-scoped RBAC and webhook
/// configuration the others check (tests in one binary run concurrently).
static CLUSTER: std::sync::LazyLock<tokio::sync::Mutex<()>> =
    std::sync::LazyLock::new(|| tokio::sync::Mutex::new(()));

const WEBHOOK: &str = "system:serviceaccount:resize-guard:resize-guard-webhook";
const CONTROLLER: &str = "system:serviceaccount:resize-guard:resize-guard-controller";

fn path(rel: &str) -> String {
    repo_root().join(rel).display().to_string()
}

#[tokio::test]
async fn the_shipped_install_applies_passes_restricted_and_has_no_ca_bundle() {
    let (env, _alone) = alone(&CLUSTER).await;
    let deploy = path("deploy");
    let out = kubectl(env, &["apply", "-k", &deploy, "--server-side"]).await;
    assert!(
        !out.stderr.contains("PodSecurity"),
        "both Deployments pass Pod Security restricted: {}",
        out.stderr
    );
    for object in [
        "namespace/resize-guard",
        "priorityclass.scheduling.k8s.io/resize-guard",
        "serviceaccount/resize-guard-webhook",
        "serviceaccount/resize-guard-controller",
        "deployment.apps/resize-guard-webhook",
        "deployment.apps/resize-guard-controller",
        "poddisruptionbudget.policy/resize-guard-webhook",
        "poddisruptionbudget.policy/resize-guard-controller",
        "service/resize-guard-webhook",
        "networkpolicy.networking.k8s.io/resize-guard",
        "configmap/resize-guard",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/resize-guard",
    ] {
        assert!(out.stdout.contains(object), "{object} in:\n{}", out.stdout);
    }
    // One webhook call per resize: the mutating webhook judges everything.
    assert!(
        !out.stdout.contains("validatingwebhookconfiguration"),
        "the default install registers no validating webhook:\n{}",
        out.stdout
    );
    // Pod Security restricted, as the API server judges a pod from each template.
    for deployment in ["resize-guard-webhook", "resize-guard-controller"] {
        let template = kubectl(
            env,
            &[
                "get",
                "deployment",
                deployment,
                "-n",
                "resize-guard",
                "-o",
                "jsonpath={.spec.template}",
            ],
        )
        .await
        .stdout;
        let mut pod: serde_json::Value = serde_json::from_str(&template).unwrap();
        pod["apiVersion"] = "v1".into();
        pod["kind"] = "Pod".into();
        pod["metadata"]["name"] = format!("{deployment}-psa-check").into();
        pod["metadata"]["namespace"] = "resize-guard".into();
        let out = super::dry_run(env, "create", &pod.to_string()).await;
        assert!(
            out.success && !out.stderr.contains("violate"),
            "{deployment}'s pod under enforce=restricted: {}",
            out.stderr
        );
    }
    {
        let kind = "mutatingwebhookconfiguration";
        let bundle = kubectl(
            env,
            &[
                "get",
                kind,
                "resize-guard",
                "-o",
                "jsonpath={.webhooks[*].clientConfig.caBundle}",
            ],
        )
        .await
        .stdout;
        assert_eq!(bundle, "", "{kind} ships without caBundle");
    }
    // Re-applying changes nothing, as a GitOps sync should not.
    let versions = || async {
        kubectl(
            env,
            &[
                "get",
                "mutatingwebhookconfiguration/resize-guard",
                "deployment/resize-guard-webhook",
                "-n",
                "resize-guard",
                "-o",
                "jsonpath={.items[*].metadata.resourceVersion}",
            ],
        )
        .await
        .stdout
    };
    let before = versions().await;
    kubectl(env, &["apply", "-k", &deploy, "--server-side"]).await;
    assert_eq!(versions().await, before, "a re-apply is a no-op");

    // The overlays.
    for overlay in ["deploy/overlays/audit", "deploy/overlays/validating-only"] {
        kubectl(
            env,
            &[
                "apply",
                "-k",
                &path(overlay),
                "--server-side",
                "--dry-run=server",
            ],
        )
        .await;
    }
    let audit = kubectl(env, &["kustomize", &path("deploy/overlays/audit")]).await;
    assert!(audit.stdout.contains("mode: audit"), "{}", audit.stdout);
    let validating = kubectl(
        env,
        &["kustomize", &path("deploy/overlays/validating-only")],
    )
    .await;
    assert!(!validating.stdout.contains("MutatingWebhookConfiguration"));
    assert!(
        validating
            .stdout
            .contains("kind: ValidatingWebhookConfiguration"),
        "{}",
        validating.stdout
    );
    let cm = kubectl(env, &["kustomize", &path("deploy/overlays/cert-manager")]).await;
    assert_eq!(
        cm.stdout
            .matches("cert-manager.io/inject-ca-from: resize-guard/resize-guard-webhook")
            .count(),
        1,
        "{}",
        cm.stdout
    );
    assert!(cm.stdout.contains("--certificates=external"));
    assert!(cm.stdout.contains("secretName: resize-guard-webhook-tls"));
}

#[tokio::test]
async fn each_service_account_may_do_exactly_what_its_program_needs() {
    let (env, _alone) = alone(&CLUSTER).await;
    kubectl(env, &["apply", "-k", &path("deploy"), "--server-side"]).await;
    // Each account's `kubectl auth can-i` answers ([`can_i`]).
    let table = [
        can_i(
            WEBHOOK,
            &[
                "yes list pods",
                "yes watch nodes",
                "yes watch poddisruptionbudgets.policy",
                "yes create events.events.k8s.io shop",
                "yes get pods.metrics.k8s.io shop",
                "yes get configmaps/resize-guard resize-guard",
                "yes get secrets/resize-guard-webhook-tls resize-guard",
                "yes watch configmaps/resize-guard-last-good resize-guard",
                "no  patch configmaps/resize-guard-last-good resize-guard",
                "no  get secrets/resize-guard-plan-key resize-guard",
                "no  patch pods shop",
                "no  update pods shop",
                "no  delete pods shop",
                "no  create pods/eviction shop",
                "no  patch pods/resize shop",
                "no  list pods.metrics.k8s.io shop",
                "no  get secrets/resize-guard-ca resize-guard",
                "no  list secrets resize-guard",
                "no  patch validatingwebhookconfigurations/resize-guard",
                "no  create leases.coordination.k8s.io resize-guard",
                "no  create events shop",
            ],
        ),
        can_i(
            CONTROLLER,
            &[
                "yes create pods/eviction shop",
                "yes patch configmaps/resize-guard-last-good resize-guard",
                "yes get secrets/resize-guard-plan-key resize-guard",
                // Only with deploy/components/best-effort-deletes and revert-infeasible (below).
                "no  delete pods shop",
                "yes patch pods shop",
                "yes patch pods/status shop",
                "no  patch pods/resize shop",
                "no  update pods shop",
                "no  create pods shop",
                "yes get secrets/resize-guard-ca resize-guard",
                "yes update secrets/resize-guard-webhook-tls resize-guard",
                "yes create secrets resize-guard",
                "no  get secrets/someone-elses resize-guard",
                "no  create secrets shop",
                "yes patch mutatingwebhookconfigurations/resize-guard",
                "yes patch validatingwebhookconfigurations/resize-guard",
                "no  patch validatingwebhookconfigurations/another",
                "yes update leases.coordination.k8s.io/resize-guard-controller resize-guard",
                "no  update leases.coordination.k8s.io/kube-scheduler kube-system",
                "no  get priorityclasses.scheduling.k8s.io",
                "no  create events shop",
            ],
        ),
    ]
    .concat();
    // A binding another test here re-created a moment ago may take a moment to be seen.
    assert_rbac_within(env, &table, Duration::from_secs(10)).await;
    // Each policy component adds its grant, and a later `kubectl apply -k deploy/` takes it back
    // (the ClusterRole's rules are one list, owned by the applier).
    let grants = can_i(
        CONTROLLER,
        &[
            "yes delete pods shop",
            "yes patch pods/resize shop",
            "no  delete nodes",
            "no  update pods/resize shop",
        ],
    );
    let both = with_components(&["best-effort-deletes", "revert-infeasible"]);
    kubectl(env, &["apply", "-k", &both, "--server-side"]).await;
    assert_rbac_within(env, &grants, Duration::from_secs(10)).await;
    kubectl(env, &["apply", "-k", &path("deploy"), "--server-side"]).await;
    let taken_back: Vec<_> = grants
        .iter()
        .map(|&(who, verb, resource, ns, _)| (who, verb, resource, ns, false))
        .collect();
    assert_rbac_within(env, &taken_back, Duration::from_secs(10)).await;
}

/// One `kubectl auth can-i` question and its answer: (who, verb, resource, namespace or "" for
/// cluster-wide, allowed).
type Can<'a> = (&'a str, &'a str, &'a str, &'a str, bool);

/// The questions for the account `who`, one a row: `<yes|no> <verb> <resource> [<namespace>]`
/// (`pods/eviction` a subresource, `secrets/x` one object; no namespace: cluster-wide).
fn can_i<'a>(who: &'a str, rows: &[&'a str]) -> Vec<Can<'a>> {
    let row = |row: &'a str| {
        let words: Vec<&str> = row.split_whitespace().collect();
        let (verb, resource, ns) = match words[1..] {
            [verb, resource] => (verb, resource, ""),
            [verb, resource, ns] => (verb, resource, ns),
            _ => panic!("{row:?}: expected `<yes|no> <verb> <resource> [<namespace>]`"),
        };
        match words[0] {
            "yes" => (who, verb, resource, ns, true),
            "no" => (who, verb, resource, ns, false),
            other => panic!("{row:?}: {other:?} is neither yes nor no"),
        }
    };
    rows.iter().map(|r| row(r)).collect()
}

/// Asks `table` until `kubectl auth can-i` answers every row as it says, for up to `within`
/// (kube-apiserver's RBAC authorizer reads bindings through an informer).
async fn assert_rbac_within(env: &Env, table: &[Can<'_>], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let wrong = rbac_differences(env, table).await;
        if wrong.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "RBAC differs from the table:\n{}",
            wrong.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A user's kustomization of `deploy/` with `components` of `deploy/components/`, written three
/// levels below the repository root (kustomize takes bases by relative path).
pub(super) fn with_components(components: &[&str]) -> String {
    let dir = repo_root().join("target/harness-overlays").join(format!(
        "{}-components-{}",
        std::process::id(),
        components.join("-")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let list: String = components
        .iter()
        .map(|c| format!("  - ../../../deploy/components/{c}\n"))
        .collect();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - ../../../deploy\ncomponents:\n{list}"
        ),
    )
    .unwrap();
    dir.display().to_string()
}

/// The rules of ClusterRole resize-guard-controller in a rendered stream.
pub(super) fn controller_rules(stream: &str) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    for doc in serde_yaml_ng::Deserializer::from_str(stream) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        if v["kind"] == "ClusterRole" && v["metadata"]["name"] == "resize-guard-controller" {
            return v["rules"].as_array().cloned().unwrap_or_default();
        }
    }
    panic!("no ClusterRole resize-guard-controller in:\n{stream}");
}

#[tokio::test]
async fn the_base_grants_no_deletes_or_resizes_and_each_component_adds_only_its_own() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let base = kubectl(env, &["kustomize", &path("deploy")]).await.stdout;
    let rules = controller_rules(&base);
    let grants = |verb: &str, resource: &str| {
        rules.iter().any(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
                && r["verbs"].as_array().unwrap().iter().any(|x| x == verb)
        })
    };
    assert!(!grants("delete", "pods"), "{rules:?}");
    assert!(!grants("patch", "pods/resize"), "{rules:?}");
    assert!(grants("patch", "pods/status") && grants("create", "pods/eviction"));
    // Five policies and their bindings guard the controller's writes in the base.
    for name in [
        "resize-guard-controller-pod-writes",
        "resize-guard-controller-status-writes",
        "resize-guard-controller-resize-writes",
        "resize-guard-controller-removals",
        "resize-guard-controller-webhook-writes",
    ] {
        for kind in [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ] {
            assert!(
                base.contains(&format!("kind: {kind}\nmetadata:\n  labels:\n    app.kubernetes.io/part-of: resize-guard\n    app.kubernetes.io/version: 0.2.0\n  name: {name}\n")),
                "{kind} {name} missing from deploy/"
            );
        }
    }
    for (component, added) in [
        (
            "best-effort-deletes",
            serde_json::json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}),
        ),
        (
            "revert-infeasible",
            serde_json::json!({"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}),
        ),
    ] {
        let rendered = kubectl(env, &["kustomize", &with_components(&[component])])
            .await
            .stdout;
        let mut want = rules.clone();
        want.push(added);
        assert_eq!(controller_rules(&rendered), want, "{component}");
        // Nothing else changes.
        let without_role = |s: &str| -> Vec<String> {
            s.split("\n---\n")
                .filter(|d| !d.contains("kind: ClusterRole\n"))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(without_role(&rendered), without_role(&base), "{component}");
    }
}

/// The rows of `table` (who, verb, resource, namespace, allowed) `kubectl auth can-i` answers
/// otherwise.
async fn rbac_differences(env: &Env, table: &[Can<'_>]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (who, verb, resource, ns, allowed) in table {
        // `pods/eviction` is a subresource; `secrets/x` names one object.
        let subresource = resource
            .strip_prefix("pods/")
            .map(|s| format!("--subresource={s}"));
        let target = if subresource.is_some() {
            "pods"
        } else {
            resource
        };
        let mut args = vec!["auth", "can-i", verb, target, "--as", who];
        if let Some(s) = &subresource {
            args.push(s);
        }
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        // An aggregated group nothing serves here (metrics.k8s.io without metrics-server) is
        // not discoverable, so kubectl cannot resolve it: ask the authorizer directly.
        if let Some(group_resource) = resource.strip_suffix(".metrics.k8s.io") {
            let answer = access_review(env, who, verb, group_resource, "metrics.k8s.io", ns).await;
            if answer != *allowed {
                wrong.push(format!("{who} {verb} {resource} {ns}: allowed={answer}"));
            }
            continue;
        }
        let out = env.kubectl().run(&args).await.unwrap();
        let answer = out.stdout.trim() == "yes";
        if answer != *allowed {
            wrong.push(format!(
                "{who} {verb} {resource} {ns}: {} ({})",
                out.stdout.trim(),
                out.stderr.trim()
            ));
        }
    }
    wrong
}

/// A SubjectAccessReview for `who`: may it `verb` `resource` in `group` (in `ns`)?
async fn access_review(
    env: &Env,
    who: &str,
    verb: &str,
    resource: &str,
    group: &str,
    ns: &str,
) -> bool {
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
        "spec": {"user": who, "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": resource, "group": group, "namespace": ns}}
    }))
    .unwrap();
    let api: kube::Api<SubjectAccessReview> = kube::Api::all(env.client().await);
    let answer = api.create(&Default::default(), &review).await.unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

/// The namespace the moved install goes to.
const MOVED: &str = "platform-rg";

/// A user's kustomization that moves `deploy/<resource>` to [`MOVED`] as
/// `deploy/follow-namespace` documents, plus what local processes need (no Deployment replicas),
/// written three levels below the repository root (kustomize takes bases by relative path).
fn moved_kustomization(resource: &str) -> String {
    let dir = repo_root().join("target/harness-overlays").join(format!(
        "{}-moved-{}",
        std::process::id(),
        resource.replace('/', "-")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             namespace: {MOVED}\nresources:\n  - ../../../deploy/{resource}\n\
             transformers:\n  - ../../../deploy/follow-namespace\n\
             patches:\n  - target: {{kind: Deployment}}\n    patch: |-\n      - {{op: replace, path: /spec/replicas, value: 0}}\n"
        ),
    )
    .unwrap();
    dir.display().to_string()
}

/// Runs the controller (with `extra` flags) and one webhook replica of the moved install as
/// its ServiceAccounts until a resize in `ns` is judged through the moved Service, then stops
/// both and unpublishes the replica.
async fn judged_by_the_moved_install(env: &Env, ns: &str, mode: &str, extra: &[&str]) {
    let (controller, webhook) = (
        bin("resize-guard-controller")
            .unwrap()
            .display()
            .to_string(),
        bin("resize-guard-webhook").unwrap().display().to_string(),
    );
    let as_controller = Account::of(env, MOVED, "resize-guard-controller")
        .await
        .unwrap();
    let as_webhook = Account::of(env, MOVED, "resize-guard-webhook")
        .await
        .unwrap();
    let mut program = as_controller
        .spawn_controller(env, &controller, &format!("moved-controller-{mode}"), extra)
        .unwrap();
    let replica = Replica::bring_up_as(
        env,
        &webhook,
        &format!("moved-{mode}"),
        Some(&as_webhook),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    wait_judged(env, ns, mode).await;
    program.stop(Duration::from_secs(10));
    replica.unpublish(env).await.unwrap();
}

/// The moved controller's own token (TokenRequest) evicts in a tenant namespace `ns` but never
/// in its own namespace or kube-system: `resize-guard-controller-removals` reads the install
/// namespace from the request's user name, so the move needs no replacement for it. Dry runs:
/// admission judges them, nothing is removed.
async fn removals_follow_the_moved_namespace(env: &Env, ns: &str) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, PostParams};
    let account = Account::of(env, MOVED, "resize-guard-controller")
        .await
        .unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&account.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let admin: Api<Pod> = Api::namespaced(env.client().await, MOVED);
    let pod = super::privileges::restricted_pod("moved-victim");
    admin.create(&PostParams::default(), &pod).await.unwrap();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let evict = |namespace: &str, name: &str| {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let body = serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name}});
        let (name, dry) = (name.to_owned(), dry.clone());
        async move {
            api.create_subresource::<_, serde_json::Value>("eviction", &name, &dry, &body)
                .await
        }
    };
    let says = format!(
        "may not evict pod {MOVED}/moved-victim: it never preempts in kube-system or its own namespace"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match evict(MOVED, "moved-victim").await {
            Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains(&says) => break,
            other => assert!(
                Instant::now() < deadline,
                "the moved controller evicts in its own namespace: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    evict(ns, "filler").await.unwrap();
    admin
        .delete("moved-victim", &Default::default())
        .await
        .unwrap();
}

/// Until a dry-run resize of the field test's `app` in `ns` is judged by resize-guard.
async fn wait_judged(env: &Env, ns: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = env
            .kubectl()
            .resize_dry_run(ns, "app", &cpu_resize("550m"))
            .await
            .unwrap();
        if out.stderr.contains("resize-guard will preempt") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the moved install never judged a resize: {}",
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn an_install_moved_to_another_namespace_judges_resizes_by_default_and_with_cert_manager() {
    let (env, _alone) = alone(&CLUSTER).await;
    let (ns, _node, _pods) = env.field_test("moved").await;

    // Every overlay moves whole: no value still names resize-guard's namespace.
    for overlay in [
        "",
        "overlays/audit",
        "overlays/validating-only",
        "overlays/cert-manager",
    ] {
        let out = kubectl(env, &["kustomize", &moved_kustomization(overlay)])
            .await
            .stdout;
        assert!(
            out.contains(&format!("values:\n      - kube-system\n      - {MOVED}\n")),
            "{overlay}: the moved namespace is excluded from judgement:\n{out}"
        );
        // The namespace is the user's: no Namespace object, so no labels on it and no deletion.
        assert!(
            !out.contains("kind: Namespace\n"),
            "{overlay}: a moved install renders a Namespace:\n{out}"
        );
        for stale in [
            "namespace: resize-guard\n",
            ".resize-guard.svc",
            "inject-ca-from: resize-guard/",
            "      - resize-guard\n",
        ] {
            assert!(!out.contains(stale), "{overlay}: {stale:?} left in:\n{out}");
        }
    }

    // The namespace exists before the install, holding a workload of its own.
    let neighbour = Neighbour::create(env).await;

    // Default: the controller makes the certificates for the moved Service and injects caBundle.
    let dir = moved_kustomization("");
    kubectl(
        env,
        &["apply", "-k", &dir, "--server-side", "--force-conflicts"],
    )
    .await;
    judged_by_the_moved_install(env, &ns, "default", &[]).await;
    removals_follow_the_moved_namespace(env, &ns).await;

    // cert-manager: its stand-in issues for the Certificate as installed and injects the CA the
    // moved annotation names; the controller leaves certificates alone.
    resize_guard_harness::issuer::install_cert_manager_crds(env)
        .await
        .unwrap();
    let dir = moved_kustomization("overlays/cert-manager");
    kubectl(
        env,
        &["apply", "-k", &dir, "--server-side", "--force-conflicts"],
    )
    .await;
    let names = resize_guard_harness::issuer::issue(env, MOVED, "resize-guard-webhook")
        .await
        .unwrap();
    assert!(
        names.contains(&format!("resize-guard-webhook.{MOVED}.svc")),
        "{names:?}"
    );
    let from = resize_guard_harness::issuer::inject(
        env,
        resize_guard_harness::admission::Webhooks::Mutating,
    )
    .await
    .unwrap();
    assert_eq!(from, format!("{MOVED}/resize-guard-webhook"));
    judged_by_the_moved_install(env, &ns, "cert-manager", &["--certificates=external"]).await;
    // Uninstalled as a user would (`kubectl delete -k`, waiting for every object to go): the
    // install's objects are gone, the namespace and the workload already in it are not. This also
    // takes the moved install's cluster-scoped objects (RBAC bindings to platform-rg, the webhook
    // configuration) away from the other tests here, which install into resize-guard.
    let out = kubectl(env, &["delete", "-k", &dir, "--ignore-not-found"]).await;
    assert!(
        out.stdout
            .contains("deployment.apps \"resize-guard-webhook\" deleted")
            && !out.stdout.lines().any(|l| l.starts_with("namespace ")),
        "{}",
        out.stdout
    );
    neighbour.assert_untouched(env).await;
}

/// A namespace [`MOVED`] made before the install, with a pod of its own in it.
struct Neighbour {
    namespace_uid: String,
    pod_uid: String,
}

impl Neighbour {
    async fn create(env: &Env) -> Self {
        use k8s_openapi::api::core::v1::{Namespace, Pod};
        use kube::api::{Api, PostParams};
        let client = env.client().await;
        let namespace: Namespace = serde_json::from_value(
            serde_json::json!({"metadata": {"name": MOVED, "labels": {"team": "platform"}}}),
        )
        .unwrap();
        let namespace = Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "neighbour"},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
        }))
        .unwrap();
        let pod = Api::<Pod>::namespaced(client, MOVED)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        Self {
            namespace_uid: namespace.metadata.uid.unwrap(),
            pod_uid: pod.metadata.uid.unwrap(),
        }
    }

    /// The namespace is the same object, not terminating, with only its own labels; the pod is
    /// the same pod.
    async fn assert_untouched(&self, env: &Env) {
        use k8s_openapi::api::core::v1::{Namespace, Pod};
        use kube::api::Api;
        let client = env.client().await;
        let namespace = Api::<Namespace>::all(client.clone())
            .get(MOVED)
            .await
            .unwrap();
        assert_eq!(
            namespace.metadata.uid.as_deref(),
            Some(&*self.namespace_uid)
        );
        assert!(
            namespace.metadata.deletion_timestamp.is_none(),
            "{namespace:?}"
        );
        let labels = namespace.metadata.labels.unwrap_or_default();
        assert!(
            labels
                .keys()
                .all(|k| !k.starts_with("pod-security.kubernetes.io/"))
                && labels.get("team").map(String::as_str) == Some("platform"),
            "{labels:?}"
        );
        let pod = Api::<Pod>::namespaced(client, MOVED)
            .get("neighbour")
            .await
            .unwrap();
        assert_eq!(pod.metadata.uid.as_deref(), Some(&*self.pod_uid));
        assert!(pod.metadata.deletion_timestamp.is_none(), "{pod:?}");
    }
}
