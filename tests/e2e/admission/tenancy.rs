//! The webhook is no oracle across tenants, on a real kube-apiserver v1.37.2, a hollow node whose
//! upstream kubelet serves its API and upstream metrics-server v0.8.0 scraping it:
//! - a review forged by anyone who reaches the webhook's TLS port, naming another namespace's pod
//!   whose usage metrics-server serves, gets an answer with none of that pod's numbers and makes
//!   no `metrics.k8s.io` read (counted in `resize_guard_usage_withheld_total`), while the same
//!   resize sent through kube-apiserver is refused with them (the usage was there to leak);
//! - a tenant allowed only `pods` and `pods/resize` in its own namespace, sending a real
//!   `--dry-run=server` resize that resize-guard would make room for by preempting a pod of
//!   another namespace, is told that one pod of another namespace would go, never which (in
//!   the warning and the audit annotation).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::run_guaranteed;
use crate::scenario::webhook as support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::objects::*;
use resize_guard_harness::text::assert_contains_all;
use resize_guard_policy::usage::PodUsage;
use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn memory_patch(memory: &str) -> String {
    json!({"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"memory": memory}, "limits": {"memory": memory}}}]}})
    .to_string()
}

/// `pod` with its `app` container's memory request and limit at `memory`.
fn with_memory(pod: &Pod, memory: &str) -> Value {
    let mut v = serde_json::to_value(pod).unwrap();
    let resources = &mut v["spec"]["containers"][0]["resources"];
    resources["requests"]["memory"] = json!(memory);
    resources["limits"]["memory"] = json!(memory);
    v
}

/// A `pods/resize` review as kube-apiserver would send it for `old` → `new`, its body written by
/// the caller (nothing here checks what it claims).
fn review(old: &Value, new: &Value) -> Vec<u8> {
    // Sent to pods/resize as such: what was requested is what is reviewed.
    let kind = json!({"group": "", "version": "v1", "kind": "Pod"});
    let resource = json!({"group": "", "version": "v1", "resource": "pods"});
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "forged-review",
            "kind": kind, "resource": resource, "subResource": "resize",
            "requestKind": kind, "requestResource": resource, "requestSubResource": "resize",
            "name": old["metadata"]["name"], "namespace": old["metadata"]["namespace"],
            "operation": "UPDATE",
            "userInfo": {"username": "mallory"},
            "object": new, "oldObject": old, "dryRun": false
        }
    }))
    .unwrap()
}

/// POSTs `body` to the webhook's `/mutate` over TLS, straight from this process (as any pod
/// that reaches the port could): the AdmissionReview it answers.
async fn post_mutate(port: u16, ca_pem: &str, body: &[u8]) -> Value {
    let config: Arc<rustls::ClientConfig> =
        resize_guard_harness::tls::client_config(ca_pem, &[]).unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut s = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    let head = format!(
        "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    s.flush().await.unwrap();
    let mut answer = Vec::new();
    // A peer that closes without close_notify ends the read with an error after the bytes.
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        s.read_to_end(&mut answer),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    let (status, json) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(status.starts_with("HTTP/1.1 200"), "{text}");
    let reviewed: Value = serde_json::from_str(json).unwrap();
    reviewed["response"].clone()
}

/// The sum of the metric lines starting with `prefix` on the webhook's `/metrics`.
async fn metric(hook: &support::Webhook, prefix: &str) -> u64 {
    let text = hook.health("/metrics").await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test]
async fn a_tenant_learns_no_other_namespaces_pods_or_usage_from_the_webhook() {
    let env: &Env = shared(EnvOptions::default());
    let hook = support::start(env, Webhooks::Mutating).await;
    let (node_name, node, mut metrics) = crate::scenario::metered_node(env, "tenancy").await;
    let other = env.namespace("victims").await;
    let tenant = env.namespace("tenant").await;
    let others: Api<Pod> = Api::namespaced(env.client().await, &other);
    let tenants: Api<Pod> = Api::namespaced(env.client().await, &tenant);
    let secret = run_guaranteed(&others, "secret", &node_name, "low", "1800m", "512Mi").await;
    run_guaranteed(&tenants, "app", &node_name, "high", "100m", "128Mi").await;
    node.set_usage(&other, "secret", "app", "333Mi", "10m")
        .unwrap();
    metrics
        .wait_for_pod(&env.cp, &other, "secret", |m| {
            PodUsage::from_pod_metrics(m.to_string().as_bytes(), Timestamp::now())
                .is_ok_and(|u| u.containers.get("app") == Some(&(333 << 20)))
        })
        .await
        .unwrap();
    let kubectl = env.kubectl();

    // The usage is there to leak: through kube-apiserver, the real resize is refused with it.
    let out = kubectl
        .resize_dry_run(&other, "secret", &memory_patch("100Mi"))
        .await
        .unwrap();
    assert!(!out.success, "{}", out.stdout);
    assert!(out.stderr.contains("working set 333Mi"), "{}", out.stderr);
    let reads = metric(&hook, "resize_guard_usage_lookups_total{").await;
    assert_eq!(reads, 1, "the real review read the usage once");

    // Forged straight to the TLS port: the other namespace's pod under a UID the cluster view
    // does not hold. Judged without usage: allowed, said, counted; no read, no numbers.
    let old = serde_json::to_value(&secret).unwrap();
    let mut forged_old = old.clone();
    forged_old["metadata"]["uid"] = json!("guessed-uid");
    let mut forged_new = with_memory(&secret, "100Mi");
    forged_new["metadata"]["uid"] = json!("guessed-uid");
    let ca = hook.bundle.ca_cert_pem.clone();
    let answer = post_mutate(hook.port, &ca, &review(&forged_old, &forged_new)).await;
    let text = answer.to_string();
    assert_eq!(answer["allowed"], true, "{text}");
    assert!(text.contains("usage not read"), "{text}");
    assert!(!text.contains("333"), "{text}");
    assert_eq!(
        metric(&hook, "resize_guard_usage_lookups_total{").await,
        reads,
        "no metrics.k8s.io read for a pod the view does not know"
    );
    assert_eq!(metric(&hook, "resize_guard_usage_withheld_total").await, 1);

    // A tenant who may only patch its own namespace's pods resizes its app on server-side dry
    // run; room needs the other namespace's `secret` preempted.
    kubectl
        .grant(
            &tenant,
            "resizer",
            "get,patch",
            "pods,pods/resize",
            "--user=tenant",
        )
        .await
        .unwrap();
    let out = kubectl
        .run([
            "--as=tenant",
            "patch",
            "pod",
            "app",
            "-n",
            &tenant,
            "--subresource",
            "resize",
            "--dry-run=server",
            "-p",
            &cpu_resize("400m"),
        ])
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    // resize-guard planned to preempt.
    assert_contains_all(
        &out.stderr,
        &[
            "resize-guard (dry run): mutate decision deferred-preemptible",
            "resize-guard will preempt 1 pod in another namespace",
        ],
    );
    assert!(!out.stderr.contains("secret"), "{}", out.stderr);
    assert!(!out.stderr.contains(&other), "{}", out.stderr);
    let audit = support::resize_audit(env, &tenant, "app");
    let victims: Vec<&Value> = audit
        .iter()
        .map(|e| &e["annotations"]["mutate.resize-guard.io/victims"])
        .filter(|v| !v.is_null())
        .collect();
    assert_eq!(
        victims,
        [&json!("1 pod in another namespace")],
        "{audit:#?}"
    );
    drop(node);
}
