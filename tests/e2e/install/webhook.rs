//! The default install end to end, with no certificate step: `deploy/` applied with
//! `kubectl apply -k` (only `clientConfig` pointed at the local webhook and the Deployments
//! scaled to zero), the webhook binary as its ServiceAccount with no certificate material, and
//! the controller (in process, as its ServiceAccount, `--certificates=self`). Then:
//! (a) the controller creates the CA and serving Secrets and injects caBundle, the webhook picks
//! up its Secret and a resize is judged; (b) a re-apply of `deploy/` and a garbled caBundle are
//! repaired within 10 s; (c) a 30 s serving certificate rotates twice under a steady stream of
//! resizes with no failed and no fail-open review (kube-apiserver's own admission metrics).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use resize_guard_harness::control_plane::Identity;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::install::{Install, http_get, install, spawn_as_service_account};
use resize_guard_harness::objects::cpu_resize;
use resize_guard_harness::process::free_port;
use serde_json::json;

const T: Duration = Duration::from_secs(30);
const NS: &str = "resize-guard";

/// The sum of a kube-apiserver counter over resize-guard's webhooks (`*.resize-guard.io`).
async fn apiserver_counter(env: &Env, metric: &str) -> f64 {
    let out = env
        .kubectl()
        .run(["get", "--raw", "/metrics"])
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    out.stdout
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains("resize-guard.io\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The caBundle of the webhook of the MutatingWebhookConfiguration `deploy/` installs.
async fn ca_bundle(env: &Env) -> Vec<u8> {
    Api::<MutatingWebhookConfiguration>::all(env.client().await)
        .get("resize-guard")
        .await
        .unwrap()
        .webhooks
        .and_then(|w| w.into_iter().next())
        .and_then(|w| w.client_config.ca_bundle)
        .map(|b| b.0)
        .unwrap_or_default()
}

/// `ca.crt` of the CA Secret, which caBundle holds (a CA rotation would add the previous CA;
/// none happens here).
async fn ca_secret(env: &Env) -> Vec<u8> {
    let secrets: Api<Secret> = Api::namespaced(env.client().await, NS);
    let s = secrets.get("resize-guard-ca").await.unwrap();
    s.data.unwrap()["ca.crt"].0.clone()
}

async fn serving_cert(env: &Env) -> Vec<u8> {
    let secrets: Api<Secret> = Api::namespaced(env.client().await, NS);
    secrets
        .get_opt("resize-guard-webhook-tls")
        .await
        .unwrap()
        .and_then(|s| s.data)
        .and_then(|d| d.get("tls.crt").map(|b| b.0.clone()))
        .unwrap_or_default()
}

/// Waits until the caBundle equals the CA Secret's; returns how long it took.
async fn wait_bundle_repaired(env: &Env) -> Duration {
    let start = Instant::now();
    let want = ca_secret(env).await;
    loop {
        if ca_bundle(env).await == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "caBundle not repaired within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn installs_with_no_certificate_step_repairs_ca_bundle_and_rotates_without_a_failed_review() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let (port, health) = (free_port().unwrap(), free_port().unwrap());
    let how = Install {
        webhook_url: Some(format!("https://127.0.0.1:{port}")),
        validating_only: false,
        ..Default::default()
    };
    install(env, &how).await;
    let webhook = spawn_as_service_account(
        env,
        Identity::Webhook,
        &crate::scenario::program("resize-guard-webhook"),
        "webhook-install",
        &[
            format!("--tls-addr=127.0.0.1:{port}"),
            format!("--health-addr=127.0.0.1:{health}"),
            format!("--namespace={NS}"),
            "--instance=install-e2e".into(),
        ],
    );
    // Before anyone made a certificate, the webhook says why it is not ready.
    let deadline = Instant::now() + T;
    loop {
        match http_get(health, "/readyz").await {
            // (caches may still be syncing first)
            Err(text) if text.contains("503") && text.contains("certificate") => break,
            Ok(body) => panic!("ready without a certificate: {body}"),
            Err(_) => {}
        }
        assert!(Instant::now() < deadline, "{}", webhook.log_tail(4000));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The controller, as its own ServiceAccount.
    let controller = support::controller(
        env,
        "install-e2e",
        &[
            "--serving-host=127.0.0.1",
            "--leaf-validity=30s",
            "--cert-check-interval=1s",
        ],
    )
    .await;

    // (a) Secrets, caBundle, a ready webhook and a judged resize.
    resize_guard_harness::install::wait_ready(health, &webhook, T).await;
    assert_eq!(ca_bundle(env).await, ca_secret(env).await);
    let (ns, _node, pods) = env.field_test("install").await;
    let deadline = Instant::now() + T;
    loop {
        let out = env
            .kubectl()
            .resize_dry_run(&ns, "app", &cpu_resize("550m"))
            .await
            .unwrap();
        if out.stderr.contains("resize-guard will preempt") {
            break;
        }
        assert!(Instant::now() < deadline, "never judged: {}", out.stderr);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // (b) A re-apply of deploy/ leaves caBundle alone (the manifests do not own it); a garbled
    // one is taken back.
    install(env, &how).await;
    let after_reapply = wait_bundle_repaired(env).await;
    let hooks: Api<MutatingWebhookConfiguration> = Api::all(env.client().await);
    hooks
        .patch(
            "resize-guard",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{
                    "op": "replace",
                    "path": "/webhooks/0/clientConfig/caBundle",
                    "value": "Z2FyYmFnZQ==",
                }]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    let repaired = wait_bundle_repaired(env).await;
    eprintln!(
        "caBundle after a re-apply: {after_reapply:?}; garbled caBundle repaired in {repaired:?}"
    );

    // (c) Resizes stream while the 30 s leaf renews (at 2/3 of its life) twice.
    let fail_open_before =
        apiserver_counter(env, "apiserver_admission_webhook_fail_open_count").await;
    let rejected_before =
        apiserver_counter(env, "apiserver_admission_webhook_rejection_count").await;
    let first = serving_cert(env).await;
    let mut seen = vec![first];
    let (mut sent, mut failed) = (0u32, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(90);
    let dry_run = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    while seen.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "the serving certificate was not renewed twice within 90 s"
        );
        sent += 1;
        let cpu = format!("{}m", 251 + sent % 50);
        let patch: serde_json::Value = serde_json::from_str(&cpu_resize(&cpu)).unwrap();
        if let Err(e) = pods
            .patch_subresource("resize", "app", &dry_run, &Patch::Strategic(&patch))
            .await
        {
            failed.push(e.to_string());
        }
        let current = serving_cert(env).await;
        if seen.last() != Some(&current) {
            seen.push(current);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let a few more through on the newest certificate.
    for i in 0..20u32 {
        let patch: serde_json::Value =
            serde_json::from_str(&cpu_resize(&format!("{}m", 300 + i))).unwrap();
        sent += 1;
        if let Err(e) = pods
            .patch_subresource("resize", "app", &dry_run, &Patch::Strategic(&patch))
            .await
        {
            failed.push(e.to_string());
        }
    }
    let fail_open = apiserver_counter(env, "apiserver_admission_webhook_fail_open_count").await
        - fail_open_before;
    let rejected = apiserver_counter(env, "apiserver_admission_webhook_rejection_count").await
        - rejected_before;
    eprintln!(
        "rotation: {sent} resizes across {} serving certificates; failed {}, fail-open {fail_open}, webhook rejections {rejected}",
        seen.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(fail_open, 0.0, "no review failed open");
    assert_eq!(rejected, 0.0, "no review failed to reach the webhook");

    controller.stop().await;
}
