//! The post-install check as both installs ship it — the chart's `helm test` hooks
//! (`templates/tests/post-install-check.yaml`) and the kustomize Job (`deploy/post-install-check/`)
//! — rendered: the same pod (its ServiceAccount, its one grant, the certificate check then the
//! admission probe, from the controller image), passing Pod Security restricted on server dry run
//! in the install namespace, which enforces it. Running them needs a kubelet that runs containers:
//! `real_node::post_install_check`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::{Value, json};

use resize_guard_harness::env::alone;

use super::{
    CHART, CLUSTER, NAMESPACE, apply_chart_namespace, dry_run, find, helm, kubectl, objects, path,
};

const SHOW: &str = "templates/tests/post-install-check.yaml";

/// The chart's check (its test hooks) rendered with `set`.
async fn check_pod(chart: &str, set: &[&str]) -> String {
    let mut args = vec!["template", "resize-guard", chart, "--namespace", NAMESPACE];
    args.extend(["--show-only", SHOW]);
    args.extend_from_slice(set);
    helm().ok(&args).await.stdout
}

/// The pod spec's fields the two installs must agree on.
fn essentials(spec: &Value) -> Value {
    json!({
        "serviceAccountName": spec["serviceAccountName"],
        "restartPolicy": spec["restartPolicy"],
        "securityContext": spec["securityContext"],
        "initContainers": spec["initContainers"],
        "containers": spec["containers"],
        "volumes": spec["volumes"],
    })
}

#[tokio::test]
async fn the_check_is_one_restricted_pod_with_one_grant_in_both_installs() {
    let (env, _alone) = alone(&CLUSTER).await;
    let helm = helm();
    let chart = path(CHART);
    let rendered = check_pod(&chart, &[]).await;
    let objs = objects(&rendered);
    assert_eq!(
        objs.keys().map(|k| k.0.as_str()).collect::<Vec<_>>(),
        ["Pod", "Role", "RoleBinding", "ServiceAccount"],
        "{rendered}"
    );
    // Every object is a test hook; the grant exists only while the test runs, the pod stays for
    // `helm test --logs`.
    for (key, v) in &objs {
        let a = &v["metadata"]["annotations"];
        assert_eq!(a["helm.sh/hook"], "test", "{key:?}");
        let policy = if key.0 == "Pod" {
            "before-hook-creation"
        } else {
            "before-hook-creation,hook-succeeded"
        };
        assert_eq!(a["helm.sh/hook-delete-policy"], policy, "{key:?}");
    }
    let role = find(&objs, "Role", "resize-guard-check");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}]),
        "one grant: the probe's dry-run resize"
    );
    let binding = find(&objs, "RoleBinding", "resize-guard-check");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "resize-guard-check", "namespace": NAMESPACE}])
    );
    let pod = find(&objs, "Pod", "resize-guard-check");
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "resize-guard-check");
    let image = "registry.invalid/resize-guard/resize-guard-controller:0.2.0";
    let certificate = &spec["initContainers"][0];
    assert_eq!(certificate["image"], image);
    assert_eq!(
        certificate["command"],
        json!(["/usr/local/bin/resize-guard-certs"])
    );
    assert_eq!(
        certificate["args"],
        json!(["check", "--out-dir=/certificate", "--within=168h"]),
        "the certificate alert's threshold (prometheusRule.certificateExpiryDays)"
    );
    let probe = &spec["containers"][0];
    assert_eq!(probe["image"], image);
    assert!(probe["command"].is_null(), "the image's entrypoint");
    assert_eq!(
        probe["args"],
        json!(["--log-format=json", "probe", "--wait=2m"])
    );
    assert_eq!(
        spec["volumes"],
        json!([{"name": "serving-certificate", "secret": {"secretName": "resize-guard-webhook-tls",
            "items": [{"key": "tls.crt", "path": "tls.crt"}]}}]),
        "the certificate only, never its key"
    );

    // Values reach it: the alert's threshold, a pinned image.
    let digest = format!("sha256:{}", "a".repeat(64));
    let pinned = format!("image.controller.digest={digest}");
    let values = ["prometheusRule.certificateExpiryDays=30", pinned.as_str()];
    let set = check_pod(&chart, &["--set", values[0], "--set", values[1]]).await;
    let set_pod = objects(&set);
    let set_spec = &find(&set_pod, "Pod", "resize-guard-check")["spec"];
    assert_eq!(set_spec["initContainers"][0]["args"][2], "--within=720h");
    assert_eq!(
        set_spec["containers"][0]["image"],
        format!("registry.invalid/resize-guard/resize-guard-controller@{digest}")
    );

    // The kustomize Job runs the same pod, once.
    let kustomized = kubectl(env, &["kustomize", &path("deploy/post-install-check")]).await;
    let k = objects(&kustomized);
    assert_eq!(
        k.keys().map(|k| k.0.as_str()).collect::<Vec<_>>(),
        ["Job", "Role", "RoleBinding", "ServiceAccount"],
        "{kustomized}"
    );
    assert_eq!(
        find(&k, "Role", "resize-guard-check")["rules"],
        role["rules"]
    );
    assert_eq!(
        find(&k, "RoleBinding", "resize-guard-check")["subjects"],
        binding["subjects"]
    );
    let job = find(&k, "Job", "resize-guard-check");
    assert_eq!(job["spec"]["backoffLimit"], 0, "one try");
    assert_eq!(
        essentials(&job["spec"]["template"]["spec"]),
        essentials(spec),
        "the Job's pod is the chart's test pod"
    );

    // Both pass Pod Security restricted where the install namespace enforces it (created as the
    // chart renders it, labels checked by every_render_applies_on_server_dry_run).
    apply_chart_namespace(env, helm, &chart).await;
    let out = dry_run(env, "helm test hooks", &rendered, &[]).await;
    assert!(out.contains("pod/resize-guard-check"), "{out}");
    let out = dry_run(env, "deploy/post-install-check", &kustomized, &[]).await;
    assert!(out.contains("job.batch/resize-guard-check"), "{out}");
}
