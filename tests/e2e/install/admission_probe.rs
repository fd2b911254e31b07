//! The admission probe (controller/src/admission_probe.rs) against a real kube-apiserver v1.37.2:
//! `deploy/` applied with `kubectl apply -k` (only `clientConfig` pointed at the local webhook),
//! the webhook as its ServiceAccount, the controller as its own, probing a pod of resize-guard's
//! namespace every second. While the webhook answers, every probe reaches it (no probe is ever
//! counted bypassed, `/readyz` is a plain `ok`); nobody else's dry run gets the probe's note —
//! not an admin's of that pod, not a tenant's own ServiceAccount named like the controller's —
//! and the controller's grant resizes nothing for real. Once the webhook process is gone the API
//! server fails open (its own `apiserver_admission_webhook_fail_open_count` says so) and the
//! controller notices without it: `resize_guard_admission_probe_bypassed` 1, the bypassed
//! counter, a `/readyz` note and a Warning Event; with the webhook back, the gauge drops to 0.
//! The post-install check's account (`deploy/post-install-check/`) runs the same probe once with
//! `resize-guard-controller probe`: exit 0 while it reaches the webhook, 3 while bypassed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller::wait_event_for;
use crate::scenario::webhook as support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_controller::admission_probe::outcome::{Answer, Outcome, classify};
use resize_guard_controller::admission_probe::request::send;
use resize_guard_harness::account::Account;
use resize_guard_harness::control_plane::Identity;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::install::{
    Install, http_get, install, repo_root, spawn_as_service_account,
};
use resize_guard_harness::objects::create_running_as_is;
use resize_guard_harness::process::{Process, free_port};
use resize_guard_policy::admission_probe::arrival;
use serde_json::json;

const NS: &str = "resize-guard";
const POD: &str = "controller-0";
const T: Duration = Duration::from_secs(30);

/// A pod of resize-guard's namespace (Pod Security restricted, as deploy/ labels it) standing in
/// for the controller's own, on hollow node `node`.
fn probed_pod(name: &str, node: &str) -> Pod {
    let restricted = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}});
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS,
            "labels": {"app.kubernetes.io/name": "resize-guard", "app.kubernetes.io/component": "controller"}},
        "spec": {"nodeName": node,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "controller", "image": "registry.example/controller:1",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                "securityContext": restricted}]}
    }))
    .unwrap()
}

fn spawn_webhook(env: &Env, port: u16, health: u16) -> Process {
    spawn_as_service_account(
        env,
        Identity::Webhook,
        &crate::scenario::program("resize-guard-webhook"),
        "webhook-probe",
        &[
            format!("--tls-addr=127.0.0.1:{port}"),
            format!("--health-addr=127.0.0.1:{health}"),
            format!("--namespace={NS}"),
            "--instance=probe-e2e-webhook".into(),
        ],
    )
}

/// The value of the sample `name` (with its labels) in an exposition, if present.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Polls the controller's `/metrics` until `holds` accepts it; panics with the last one after
/// `T`.
async fn wait_metrics(port: u16, what: &str, holds: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + T;
    loop {
        let text = http_get(port, "/metrics").await.unwrap_or_default();
        if holds(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not within {T:?}; metrics:\n{}",
            text.lines()
                .filter(|l| l.contains("admission_probe"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const REACHED: &str = "resize_guard_admission_probe_total{result=\"reached\"}";
const BYPASSED: &str = "resize_guard_admission_probe_total{result=\"bypassed\"}";
const GAUGE: &str = "resize_guard_admission_probe_bypassed";

/// kube-apiserver's own count of fail-open calls of the probe's webhook entry.
async fn fail_open(env: &Env) -> f64 {
    let out = env
        .kubectl()
        .run(["get", "--raw", "/metrics"])
        .await
        .unwrap();
    out.stdout
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_admission_webhook_fail_open_count{")
                && l.contains("name=\"probe.resize-guard.io\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// A client from a kubeconfig file (an [`Account`]'s).
async fn client_of(kubeconfig: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The probe's request, sent as `client`'s user: its whole answer.
async fn dry_run(client: &kube::Client, ns: &str, pod: &str) -> Answer {
    send(client, ns, pod).await.unwrap().0
}

/// `resize-guard-controller probe` as `account`, probing `pod`: exit code and stdout.
async fn probe_once(account: &Account, pod: &str, wait: &str) -> (i32, String) {
    let out = tokio::process::Command::new(crate::scenario::program("resize-guard-controller"))
        .env("KUBECONFIG", &account.kubeconfig)
        .env("POD_NAMESPACE", NS)
        .env("POD_NAME", pod)
        .args(["probe", &format!("--wait={wait}")])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

#[tokio::test]
async fn the_probe_reaches_the_webhook_notices_it_failing_open_and_no_one_else_gets_its_note() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let (port, health) = (free_port().unwrap(), free_port().unwrap());
    install(
        env,
        &Install {
            webhook_url: Some(format!("https://127.0.0.1:{port}")),
            ..Default::default()
        },
    )
    .await;
    let mut webhook = spawn_webhook(env, port, health);
    // The controller probes pod controller-0, which does not exist yet: errors (404), never a
    // bypass, until the webhook is called (the canary) and the pod is there.
    let controller = support::controller(
        env,
        "probe-e2e",
        &[
            "--serving-host=127.0.0.1",
            &format!("--admission-probe-pod={POD}"),
            "--admission-probe-interval=1s",
            "--admission-probe-timeout=10s",
        ],
    )
    .await;
    let cp = controller.health_port;
    resize_guard_harness::install::wait_ready(health, &webhook, T).await;
    support::canary(env).await;
    let node = env.node("probe", "2", "2Gi").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, NS);
    create_running_as_is(&pods, &probed_pod(POD, &node))
        .await
        .unwrap();

    // (1) Reached, every time: never a bypass, /readyz a plain ok.
    let text = wait_metrics(cp, "3 probes reaching the webhook", |t| {
        sample(t, REACHED).is_some_and(|n| n >= 3.0)
    })
    .await;
    assert_eq!(sample(&text, BYPASSED), Some(0.0), "{text}");
    assert_eq!(sample(&text, GAUGE), Some(0.0), "{text}");
    assert_eq!(http_get(cp, "/readyz").await.unwrap(), "ok");

    // (2) Nobody else gets the note. An admin's dry run of the same pod: resize-guard's
    // namespace is never judged and the probe's entry does not call it for them.
    let admin = env.client().await;
    let a = dry_run(&admin, NS, POD).await;
    assert_eq!(classify(&a), Outcome::Bypassed, "{a:?}");
    assert!(a.warnings.is_empty(), "{a:?}");
    // A tenant's own ServiceAccount named like the controller's, in its namespace (the probe
    // entry's condition matches it): judged as any tenant's resize, never answered as a probe.
    let (tenant, _node, _pods) = env.field_test("probe-tenant").await;
    let client = env.client().await;
    let sa = json!({"metadata": {"name": "resize-guard-controller"}});
    create::<ServiceAccount>(&client, &tenant, sa).await;
    let role = json!({"metadata": {"name": "resizer"},
        "rules": [{"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}]});
    create::<Role>(&client, &tenant, role).await;
    let binding = json!({"metadata": {"name": "resizer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "resizer"},
        "subjects": [{"kind": "ServiceAccount", "name": "resize-guard-controller",
            "namespace": tenant}]});
    create::<RoleBinding>(&client, &tenant, binding).await;
    let forger = Account::of(env, &tenant, "resize-guard-controller")
        .await
        .unwrap();
    let forged = dry_run(&client_of(&forger.kubeconfig).await, &tenant, "app").await;
    assert_eq!(forged.code, 200, "{forged:?}");
    assert!(
        forged
            .warnings
            .iter()
            .any(|w| w.starts_with("resize-guard (dry run): mutate decision")),
        "judged by resize-guard: {forged:?}"
    );
    assert!(
        arrival(forged.warnings.iter().map(String::as_str)).is_none(),
        "a tenant got the probe's note: {forged:?}"
    );
    assert_eq!(classify(&forged), Outcome::Bypassed);
    // The controller's grant in its namespace resizes nothing for real.
    let as_controller = env.cp.client_as(Identity::Controller).await.unwrap();
    let real = Api::<Pod>::namespaced(as_controller.clone(), NS)
        .patch_subresource(
            "resize",
            POD,
            &PatchParams::default(),
            &Patch::Strategic(json!({})),
        )
        .await
        .unwrap_err();
    assert!(
        real.to_string()
            .contains("ValidatingAdmissionPolicy resize-guard-admission-probe"),
        "{real}"
    );

    // The post-install check's account probes once, as its Job does.
    let out = env
        .kubectl()
        .run([
            "apply",
            "-k",
            &repo_root()
                .join("deploy/post-install-check")
                .display()
                .to_string(),
            "--server-side",
        ])
        .await
        .unwrap();
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    let check = Account::of(env, NS, "resize-guard-check").await.unwrap();
    let (code, said) = probe_once(&check, POD, "30s").await;
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains(&format!(
            "admission probe reached resize-guard: webhook replica probe-e2e-webhook answered a dry-run resize of pod {NS}/{POD} at /mutate"
        )),
        "{said}"
    );

    // (3) The webhook goes away: the API server fails open, and the controller says so without
    // the API server's metrics.
    let before = fail_open(env).await;
    webhook.kill();
    let text = wait_metrics(cp, "the bypass gauge at 1", |t| {
        sample(t, GAUGE) == Some(1.0)
    })
    .await;
    assert!(sample(&text, BYPASSED).unwrap() >= 1.0, "{text}");
    let readyz = http_get(cp, "/readyz").await.unwrap();
    assert!(
        readyz.starts_with(&format!(
            "ok (degraded: admission probe bypassed the webhook: the API server admitted a dry-run resize of pod {NS}/{POD} without resize-guard's webhook"
        )),
        "{readyz}"
    );
    let events = wait_event_for(env, NS, "AdmissionProbeBypassed", POD).await;
    let note = &events.iter().find(|e| e.0 == POD).unwrap().1;
    assert!(note.contains("kubectl resize-guard check"), "{note}");
    assert!(
        fail_open(env).await > before,
        "the API server counted no fail-open of probe.resize-guard.io"
    );
    let (code, said) = probe_once(&check, POD, "0s").await;
    assert_eq!(code, 3, "{said}");
    assert!(
        said.contains("admission probe bypassed resize-guard"),
        "{said}"
    );

    // (4) Back: reached again, the gauge 0, /readyz plain.
    let mut webhook = spawn_webhook(env, port, health);
    resize_guard_harness::install::wait_ready(health, &webhook, T).await;
    wait_metrics(cp, "the bypass gauge back at 0", |t| {
        sample(t, GAUGE) == Some(0.0)
    })
    .await;
    let deadline = Instant::now() + T;
    while http_get(cp, "/readyz").await.as_deref() != Ok("ok") {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            http_get(cp, "/readyz").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    controller.stop().await;
    webhook.stop(Duration::from_secs(10));
}

/// Creates the `K` that `object` describes in namespace `ns`.
async fn create<K>(client: &kube::Client, ns: &str, object: serde_json::Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}
