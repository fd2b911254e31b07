use super::*;
use crate::policy_source::Origin;

#[test]
fn every_origin_is_a_series_of_the_in_force_gauge() {
    for origin in [Origin::ConfigMap, Origin::LastGood] {
        // Exhaustive: a new origin does not compile here until it is listed above.
        match origin {
            Origin::ConfigMap | Origin::LastGood => {}
        }
        assert!(POLICY_ORIGINS.contains(&origin.as_str()), "{origin:?}");
    }
    assert!(POLICY_ORIGINS.contains(&"none"));
}

/// A view whose API server never answers (nothing listens on the discard port): its own
/// watches keep retrying, so only the test's task can stop.
fn unreachable_view() -> std::sync::Arc<ClusterView> {
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let events = resize_guard_runtime::events::Events::start(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "supervisor-test".into(),
            instance: None,
        },
    );
    ClusterView::start(
        client,
        ViewConfig::new("resize-guard", "resize-guard", events),
    )
}

#[tokio::test]
async fn a_stopped_watch_task_leaves_the_view_unready_and_stale_for_acting_for_good() {
    let view = unreachable_view();
    assert!(view.stale_for_acting().is_some(), "never listed yet");
    view.supervisor()
        .spawn("the pods watch", async { panic!("injected") });
    let exit = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        view.supervisor().exited(),
    )
    .await
    .unwrap();
    assert_eq!(exit.to_string(), "the pods watch panicked: injected");
    let frozen = "the pods watch panicked: injected; the caches may be frozen";
    assert_eq!(view.readiness(), Err(frozen.to_owned()));
    assert!(!view.is_ready());
    assert_eq!(
        view.stale_for_acting(),
        Some("a supervised task stopped; the caches may be frozen")
    );
    // For good: a later graceful end, or another task's failure, changes nothing.
    view.supervisor().spawn("the nodes watch", async { Ok(()) });
    view.supervisor()
        .spawn("the policy watch", async { Err("its stream ended".into()) })
        .await
        .unwrap();
    assert_eq!(view.readiness(), Err(frozen.to_owned()));
    assert_eq!(
        view.stale_for_acting(),
        Some("a supervised task stopped; the caches may be frozen")
    );
}
