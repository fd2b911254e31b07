//! Smoke tests of the VPA bench ([`resize_guard_harness::vpa`]): VPA v1.6.0's admission controller
//! and updater, unpatched, start against a real kube-apiserver v1.37.2 and do their own
//! bookkeeping — the CRDs are Established, the webhook registers itself by URL with our CA and is
//! really called, its status Lease is renewed, a VerticalPodAutoscaler takes a recommendation
//! written in the recommender's place, and the updater runs its loop. The recommender runs as its
//! own ServiceAccount with either preset, lists a VPA, reports that `metrics.k8s.io` is missing,
//! and once metrics-server serves a hollow node's usage writes the recommendation itself.
//!
//! Needs `RESIZE_GUARD_K8S_BIN_DIR` (third_party/control-plane/build.sh), `RESIZE_GUARD_VPA_DIR`
//! (third_party/vpa/build.sh) and `RESIZE_GUARD_METRICS_SERVER_BIN`
//! (third_party/metrics-server/build.sh), or their stamp caches.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use resize_guard_harness::control_plane::ControlPlane;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::metrics_server::MetricsServer;
use resize_guard_harness::vpa::*;

/// Prints the control plane's log tails when the test panics.
struct DumpOnPanic<'a>(&'a ControlPlane);

impl Drop for DumpOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("==== control-plane logs ====\n{}", self.0.dump_logs());
        }
    }
}

#[tokio::test]
async fn vpa_admission_controller_and_updater_run_against_the_real_apiserver() {
    let t0 = Instant::now();
    let cp = ControlPlane::start(&Default::default()).unwrap();
    let _cp_logs = DumpOnPanic(&cp);
    let vpa = Vpa::start(&cp, VpaOptions::default()).await.unwrap();
    let _vpa_logs = vpa.guard();
    eprintln!(
        "VPA ready {:?} after start\nvpa-admission-controller {}\nvpa-updater {}",
        t0.elapsed(),
        vpa.admission_args().join(" "),
        vpa.updater_args().join(" ")
    );
    let client = cp.client().await.unwrap();

    // VPA's own CRD, with a status subresource on the served v1.
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(VPA_CRD)
        .await
        .unwrap();
    let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True"),
        "{conditions:?}"
    );
    let v1 = crd.spec.versions.iter().find(|v| v.name == "v1").unwrap();
    assert!(v1.served && v1.storage);
    assert!(
        v1.subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );

    // The admission controller registered itself by URL, trusting the CA that signed its cert.
    let config = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(WEBHOOK_CONFIG_NAME)
        .await
        .unwrap();
    let hooks = config.webhooks.unwrap_or_default();
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    assert_eq!(hook.name, "vpa.k8s.io");
    assert_eq!(hook.client_config.url.as_deref(), Some(vpa.webhook_url()));
    assert!(hook.client_config.service.is_none());
    let ca = hook.client_config.ca_bundle.as_ref().map(|b| b.0.clone());
    assert!(ca.as_ref().is_some_and(|b| !b.is_empty()));
    assert_eq!(ca.unwrap(), vpa.ca_pem().as_bytes());
    assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));

    // Its status Lease is renewed every 10 s.
    let leases: Api<Lease> = Api::namespaced(client.clone(), STATUS_NAMESPACE);
    let renew = |l: Lease| l.spec.and_then(|s| s.renew_time).map(|t| t.0);
    let first = renew(leases.get(STATUS_LEASE).await.unwrap()).expect("renewTime");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = renew(leases.get(STATUS_LEASE).await.unwrap()).expect("renewTime");
        if now > first {
            break;
        }
        assert!(Instant::now() < deadline, "renewTime stuck at {first}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The updater loops; with no VerticalPodAutoscaler there is nothing to process.
    vpa.wait_updater_log("No VPA objects to process", Duration::from_secs(30))
        .await
        .unwrap();

    // A VerticalPodAutoscaler passes VPA's own validation (the webhook is really called over
    // TLS: it logs the object) and takes a recommendation through the status subresource.
    let ns = "vpa-smoke";
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    create_vpa(
        &client,
        ns,
        &vpa_object("smoke", "app", "InPlaceOrRecreate", Some("RequestsOnly")),
    )
    .await
    .unwrap();
    vpa.wait_admission_log("Processing vpa", Duration::from_secs(10))
        .await
        .unwrap();
    write_recommendation(
        &client,
        ns,
        "smoke",
        &[Recommendation {
            container: "app".to_owned(),
            target: ("250m".to_owned(), "256Mi".to_owned()),
            lower_bound: ("200m".to_owned(), "200Mi".to_owned()),
            upper_bound: ("400m".to_owned(), "512Mi".to_owned()),
        }],
    )
    .await
    .unwrap();
    let got = api(&client, ns).get("smoke").await.unwrap();
    assert_eq!(
        got.data["spec"]["updatePolicy"]["updateMode"],
        "InPlaceOrRecreate"
    );
    let rec = &got.data["status"]["recommendation"]["containerRecommendations"][0];
    assert_eq!(rec["containerName"], "app");
    assert_eq!(rec["target"]["cpu"], "250m");
    assert_eq!(rec["target"]["memory"], "256Mi");
    assert_eq!(rec["lowerBound"]["cpu"], "200m");
    assert_eq!(rec["upperBound"]["memory"], "512Mi");
    assert_eq!(
        got.data["status"]["conditions"][0]["type"],
        "RecommendationProvided"
    );

    // The updater sees it and skips it: Deployment `app` does not exist.
    vpa.wait_updater_log(
        &format!("Skipping VPA object because we cannot fetch selector\" vpa=\"{ns}/smoke\""),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    eprintln!("smoke test done in {:?}", t0.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vpa_recommender_runs_as_its_own_service_account_and_recommends_from_metrics_server() {
    let t0 = Instant::now();
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    env.cp.start_workload_controllers().unwrap();

    // The defaults, written out.
    let defaults = Recommender::start(&env.cp, VpaIntervals::Defaults, &[])
        .await
        .unwrap();
    for flag in [
        "--recommender-interval=60s",
        "--memory-aggregation-interval=86400s",
    ] {
        assert!(defaults.args().iter().any(|a| a == flag), "{flag}");
    }
    drop(defaults);

    // The shortest preset, before metrics.k8s.io exists: it lists the VPA and says it has no
    // metrics.
    let rec = Recommender::start(&env.cp, VpaIntervals::Shortest, &[])
        .await
        .unwrap();
    let _rg = RecommenderLogs(&rec);
    let web = usage_loop::Workload::start(env, "web", 1, "100m", "128Mi")
        .await
        .unwrap();
    let pods = web.live_pods().await.unwrap();
    web.set_usage(&pods, "100Mi", "50m").unwrap();
    web.create_vpa(None).await.unwrap();
    rec.wait_log(
        &format!("\"{RECOMMENDER_LISTED_VPAS_LOG}\" count=1"),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    rec.wait_log(RECOMMENDER_NO_METRICS_LOG, Duration::from_secs(60))
        .await
        .unwrap();
    // With no sample it still recommends: the preset's per-pod minimum
    // (`--pod-recommendation-min-cpu-millicores` / `-memory-mb`), which an updater with the
    // lifetime rule off would apply at once.
    let floor = wait_recommendation(&web, |r| r.is_some()).await;
    assert_eq!(
        floor.target,
        ("10m".to_owned(), "10Mi".to_owned()),
        "{floor:?}"
    );

    // With metrics-server: the recommender reads the node's usage and writes the recommendation
    // through the status subresource itself.
    let _metrics = MetricsServer::start(&env.cp).await.unwrap();
    let started = Instant::now();
    let recommended = wait_recommendation(&web, |r| {
        r.and_then(usage_loop::Recommended::target_memory)
            .is_some_and(|m| m >= 100 << 20)
    })
    .await;
    eprintln!(
        "recommendation {recommended:?} {:?} after metrics-server was up ({:?} in all)",
        started.elapsed(),
        t0.elapsed()
    );
    assert_eq!(recommended.status_writers, ["vpa-recommender"]);
    let vpa = api(&env.client().await, &web.namespace)
        .get(&web.name)
        .await
        .unwrap();
    let conditions = vpa.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "RecommendationProvided" && c["status"] == "True"),
        "{conditions:?}"
    );
}

/// Prints the recommender's log tail when the test panics.
struct RecommenderLogs<'a>(&'a Recommender);

impl Drop for RecommenderLogs<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.0.dump_log());
        }
    }
}

/// Polls the VPA's recommendation (every 500 ms, up to 90 s) until `accept` holds.
async fn wait_recommendation(
    web: &usage_loop::Workload,
    accept: impl Fn(Option<&usage_loop::Recommended>) -> bool,
) -> usage_loop::Recommended {
    let started = Instant::now();
    loop {
        let r = web.recommendation().await.unwrap();
        if accept(r.as_ref()) {
            return r.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "recommendation not as expected after 90 s: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
