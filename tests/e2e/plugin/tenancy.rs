//! `kubectl resize-guard what-if` by a tenant, through the real `kubectl` v1.37.2 against a real
//! kube-apiserver with resize-guard installed from `deploy/`: a ServiceAccount allowed only to
//! read its namespace's pods and resize them asks what a resize would do when resize-guard would
//! make room by preempting a pod of another namespace. It gets the API server's dry-run answer
//! with resize-guard's warning, which counts that pod and names neither it nor its namespace,
//! and a plan section saying it could not read the node with its own credentials (before, the
//! command failed on that read). An administrator's `what-if`, reading the node's pods itself,
//! names the victim.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::run_guaranteed;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::account::Account;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::hollow_node::HollowNodeConfig;
use resize_guard_harness::installed::Installed;
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::text::assert_contains_all;

#[tokio::test]
async fn a_tenants_what_if_counts_a_victim_of_another_namespace_and_names_none() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let (_installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
    let node = env.unique("tenancy");
    env.add_node(HollowNodeConfig::new(&node, 2, "4Gi")).await;
    let other = env.namespace("victims").await;
    let tenant = env.namespace("tenant").await;
    let client = env.client().await;
    let (others, tenants) = (
        Api::<Pod>::namespaced(client.clone(), &other),
        Api::<Pod>::namespaced(client, &tenant),
    );
    run_guaranteed(&others, "secret", &node, "low", "1800m", "256Mi").await;
    run_guaranteed(&tenants, "app", &node, "high", "100m", "128Mi").await;
    let admin = env.kubectl();
    let out = admin
        .run(["create", "serviceaccount", "dev", "-n", &tenant])
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    let dev_sa = format!("--serviceaccount={tenant}:dev");
    admin
        .grant(
            &tenant,
            "resizer",
            "get,list,patch",
            "pods,pods/resize",
            &dev_sa,
        )
        .await
        .unwrap();
    let dev = Account::of(env, &tenant, "dev").await.unwrap();
    let as_dev = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: dev.kubeconfig.clone(),
    };
    let plugin = PathBuf::from(crate::scenario::program("kubectl-resize_guard"))
        .parent()
        .unwrap()
        .to_path_buf();
    let what_if = [
        "resize-guard",
        "what-if",
        "app",
        "-n",
        &tenant,
        "--cpu",
        "400m",
    ];

    let out = as_dev.plugin(&plugin, what_if).await.unwrap();
    let text = format!("{}{}", out.stdout, out.stderr);
    println!("{text}");
    assert!(out.success, "{text}");
    // resize-guard planned to preempt.
    assert_contains_all(
        &text,
        &[
            "resize-guard's mutate webhook decided: deferred-preemptible",
            "resize-guard will preempt 1 pod in another namespace",
            "Plan: unread",
        ],
    );
    assert!(!text.contains("secret") && !text.contains(&other), "{text}");

    // An administrator's what-if reads the node's pods itself and names the victim.
    let out = admin.plugin(&plugin, what_if).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("{other}/secret")),
        "{}",
        out.stdout
    );
}
