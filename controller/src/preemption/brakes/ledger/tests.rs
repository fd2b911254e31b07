//! The ledger against a fake API server: what a new leader reads (absent, garbage), what the
//! writer sends (through the fence only) and what a plan waits for before its evictions.

use std::time::Instant;

use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::policy::Policy;
use serde_json::{Value, json};

use super::*;
use crate::preemption::brakes::{Held, Limits};
use crate::tests::{Log, Seen, fake_api};

/// A fake API server answering every request with `answer`.
fn fake(answer: impl Fn(&Seen) -> (StatusCode, Value) + Send + 'static) -> (kube::Client, Log) {
    let (service, seen) = fake_api(answer);
    (kube::Client::new(service, "default"), seen)
}

/// Starts the writer with `leadership` and waits until it persists.
async fn start_writer(
    client: kube::Client,
    leadership: Leadership,
    metrics: Arc<Metrics>,
) -> (Arc<Brakes>, tokio::task::JoinHandle<()>) {
    let brakes = Arc::new(Brakes::new());
    let writer = tokio::spawn(keep(
        client,
        "resize-guard".into(),
        brakes.clone(),
        leadership,
        metrics,
    ));
    while !brakes.persisting.load(Ordering::Acquire) {
        tokio::task::yield_now().await;
    }
    (brakes, writer)
}

fn config_map(text: &str) -> (StatusCode, Value) {
    (
        StatusCode::OK,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": CONFIGMAP, "namespace": "resize-guard"},
               "data": {KEY: text}}),
    )
}

fn status(code: u16, reason: &str) -> (StatusCode, Value) {
    (
        StatusCode::from_u16(code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
               "reason": reason, "message": format!("fake: {reason}")}),
    )
}

fn preemptor() -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": "app", "namespace": "prod", "uid": "u-app",
        "generation": 1}}),
    )
    .unwrap()
}

fn limits() -> Limits {
    let mut l = Limits::of(&Policy::default());
    l.per_resize = 2;
    l
}

#[tokio::test]
async fn a_new_leader_reads_garbage_as_empty_buckets_and_an_absent_ledger_as_a_first_start() {
    let (client, _) = fake(|_| config_map("{\"format\": 1, \"cluster\": "));
    let (brakes, metrics) = (Brakes::new(), Metrics::new());
    load(client, "resize-guard", &brakes, &metrics).await;
    assert!(
        metrics
            .render()
            .contains("resize_guard_brakes_state_loads_total{result=\"unreadable\"} 1"),
        "{}",
        metrics.render()
    );
    assert!(matches!(
        brakes.admit(&preemptor(), "n1", 1, true, 1, limits(), Instant::now()),
        Err(Held::Rate { .. })
    ));

    let (client, _) = fake(|_| status(404, "NotFound"));
    let (brakes, metrics) = (Brakes::new(), Metrics::new());
    load(client, "resize-guard", &brakes, &metrics).await;
    assert!(metrics.render().contains("{result=\"absent\"} 1"));
    assert!(
        brakes
            .admit(&preemptor(), "n1", 2, true, 1, limits(), Instant::now())
            .is_ok()
    );
}

#[tokio::test]
async fn a_plan_waits_until_its_counts_are_written_and_they_read_back_whole() {
    let (client, seen) = fake(|s| match s.method.as_str() {
        "PATCH" => config_map(""),
        _ => status(404, "NotFound"),
    });
    let metrics = Arc::new(Metrics::new());
    let (brakes, writer) = start_writer(client, Leadership::forever(), metrics.clone()).await;
    let admitted = brakes
        .admit(&preemptor(), "n1", 2, true, 1, limits(), Instant::now())
        .unwrap();
    admitted.saved().await.unwrap();
    let writes: Vec<Seen> = seen.lock().unwrap().clone();
    assert_eq!(writes.len(), 1, "{writes:?}");
    let Seen { method, path, body } = &writes[0];
    assert_eq!(
        (method.as_str(), path.as_str()),
        (
            "PATCH",
            "/api/v1/namespaces/resize-guard/configmaps/resize-guard-brakes"
        )
    );
    // The plan's two victims are paid for in what was written: a successor's bucket is empty
    // and the resize has spent them.
    let next = Brakes::new();
    let text = body["data"][KEY].as_str().unwrap();
    assert_eq!(
        next.restore(text, super::super::persisted::Now::read()),
        super::super::persisted::Restored::Whole
    );
    assert!(matches!(
        next.admit(&preemptor(), "n1", 1, false, 1, limits(), Instant::now()),
        Err(Held::Spent { spent: 2, more: 1 })
    ));
    drop(admitted);
    writer.abort();
    assert!(metrics.render().contains("{result=\"ok\"} 1"));
}

#[tokio::test]
async fn a_plan_whose_counts_could_not_be_written_is_held_and_nothing_is_sent_unfenced() {
    // Refused (RBAC, say): the plan is held with the reason.
    let (client, _) = fake(|_| status(403, "Forbidden"));
    let metrics = Arc::new(Metrics::new());
    let (brakes, writer) = start_writer(client, Leadership::forever(), metrics.clone()).await;
    let admitted = brakes
        .admit(&preemptor(), "n1", 1, true, 1, limits(), Instant::now())
        .unwrap();
    match admitted.saved().await.unwrap_err() {
        Held::Unsaved { why } => assert!(why.contains("Forbidden"), "{why}"),
        other => panic!("{other:?}"),
    }
    writer.abort();
    assert!(metrics.render().contains("{result=\"error\"} 1"));

    // Not leading: nothing is sent, and the plan is held.
    let (client, seen) = fake(|_| config_map(""));
    let leadership = Leadership::forever();
    let (brakes, writer) = start_writer(client, leadership.clone(), Arc::new(Metrics::new())).await;
    leadership.revoke();
    let admitted = brakes
        .admit(&preemptor(), "n1", 1, true, 1, limits(), Instant::now())
        .unwrap();
    assert!(matches!(admitted.saved().await, Err(Held::Unsaved { .. })));
    assert!(seen.lock().unwrap().is_empty());
    let _ = writer.await;
}

#[tokio::test(start_paused = true)]
async fn a_plan_within_the_saved_reserve_goes_at_once_and_one_beyond_it_is_written_at_once() {
    let (client, seen) = fake(|s| match s.method.as_str() {
        "PATCH" => config_map(""),
        _ => status(404, "NotFound"),
    });
    let (brakes, writer) =
        start_writer(client, Leadership::forever(), Arc::new(Metrics::new())).await;
    let in_ns = |ns: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "app", "namespace": ns,
            "uid": format!("u-{ns}"), "generation": 1}}))
        .unwrap()
    };
    let writes = || seen.lock().unwrap().len();
    let t = Instant::now();
    // The first plan waits for a document counting it, which declares a reserve of one whole
    // plan (2 victims).
    let first = brakes
        .admit(&in_ns("a"), "n1", 1, true, 1, limits(), t)
        .unwrap();
    first.saved().await.unwrap();
    assert_eq!(writes(), 1);
    let body = seen.lock().unwrap()[0].body.clone();
    let doc: Value = serde_json::from_str(body["data"][KEY].as_str().unwrap()).unwrap();
    assert_eq!(doc["reserve"], 2);
    // The next fits in that reserve: it goes with no write of its own.
    let second = brakes
        .admit(&in_ns("b"), "n2", 1, true, 1, limits(), t)
        .unwrap();
    second.saved().await.unwrap();
    assert_eq!(writes(), 1);
    // One beyond it waits for a write, sent at once rather than after the interval.
    let third = brakes
        .admit(
            &in_ns("c"),
            "n3",
            2,
            true,
            1,
            limits(),
            t + std::time::Duration::from_secs(60),
        )
        .unwrap();
    let asked = tokio::time::Instant::now();
    third.saved().await.unwrap();
    assert!(asked.elapsed() < MIN_INTERVAL, "{:?}", asked.elapsed());
    assert_eq!(writes(), 2);
    writer.abort();
}
