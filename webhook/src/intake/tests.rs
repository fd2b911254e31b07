//! Unit tests of the intake, and the measurement the body limit is sized from.

use super::*;
use resize_guard_policy::admission::Stage;
use serde_json::{Value, json};

fn headers(length: Option<usize>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some(n) = length {
        h.insert(header::CONTENT_LENGTH, n.into());
    }
    h
}

fn limits(queue_ms: u64) -> Limits {
    Limits {
        max_body_bytes: 1000,
        large_body_bytes: 100,
        body_read_timeout: Duration::from_millis(200),
        body_grace: Duration::from_millis(200),
        body_min_rate: 0,
        queue_timeout: Duration::from_millis(queue_ms),
        max_reviews: 2,
        max_large_reviews: 1,
        max_reviews_per_source: 2,
        max_large_reviews_per_source: 1,
    }
}

fn ip(last: u8) -> Option<std::net::IpAddr> {
    Some(std::net::IpAddr::from([10, 0, 0, last]))
}

/// Admits a review of `length` declared bytes from address `source`; it must be refused.
async fn refused(intake: &Intake, length: Option<usize>, source: u8) -> Refusal {
    intake
        .admit_from(&headers(length), ip(source))
        .await
        .unwrap_err()
}

/// Admits a review of `length` declared bytes from address `source`; it must get a lane.
async fn admitted(intake: &Intake, length: Option<usize>, source: u8) -> Lane {
    intake
        .admit_from(&headers(length), ip(source))
        .await
        .unwrap()
        .lane
}

/// A refusal's reason and lane, to compare in one assertion.
fn shed(e: &Refusal) -> (&'static str, Option<Lane>) {
    (e.reason(), e.lane())
}

#[test]
fn a_declared_body_gets_a_deadline_from_its_size_and_an_undeclared_one_the_read_timeout() {
    let l = Limits::with_max_body(MAX_BODY_BYTES);
    // A review of a few KiB: the grace and a few milliseconds, far from the 3 s read timeout.
    let small = l.body_deadline(Some(4096));
    assert!(
        small >= BODY_GRACE && small < Duration::from_millis(510),
        "{small:?}"
    );
    assert_eq!(
        l.body_deadline(Some(LARGE_BODY_BYTES)),
        Duration::from_millis(750)
    );
    assert_eq!(
        l.body_deadline(Some(MAX_BODY_BYTES)),
        Duration::from_secs(2)
    );
    assert_eq!(l.body_deadline(None), Duration::from_secs(3));
    // Never past the read timeout; a rate of 0 turns the rate off.
    let slow = Limits {
        body_min_rate: 1,
        ..l.clone()
    };
    assert_eq!(slow.body_deadline(Some(4096)), Duration::from_secs(3));
    let off = Limits {
        body_min_rate: 0,
        ..l
    };
    assert_eq!(off.body_deadline(Some(4096)), Duration::from_secs(3));
}

#[tokio::test]
async fn a_trickled_small_body_loses_its_permit_after_the_grace_not_the_read_timeout() {
    let intake = Intake::new(Limits {
        body_read_timeout: Duration::from_secs(3),
        body_grace: Duration::from_millis(100),
        body_min_rate: 1024 * 1024,
        ..limits(10)
    });
    let ticket = intake.admit(&headers(Some(50))).await.unwrap();
    assert_eq!(ticket.lane, Lane::Regular);
    // One byte, then nothing: a sender trickling a small declared body.
    let trickle = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{"))])
        .chain(futures::stream::pending());
    let started = std::time::Instant::now();
    let e = intake
        .read(&ticket, Body::from_stream(trickle))
        .await
        .unwrap_err();
    let held = started.elapsed();
    assert!(matches!(e, Refusal::BodyTimeout(_)), "{e:?}");
    assert!(
        held >= Duration::from_millis(100) && held < Duration::from_secs(1),
        "the permit was held {held:?}"
    );
}

#[tokio::test]
async fn one_source_holds_at_most_its_share_of_a_lane_and_others_still_get_in() {
    let intake = Intake::new(Limits {
        max_reviews: 4,
        max_reviews_per_source: 2,
        ..limits(50)
    });
    let a1 = intake.admit_from(&headers(Some(10)), ip(1)).await.unwrap();
    let a2 = intake.admit_from(&headers(Some(10)), ip(1)).await.unwrap();
    // The source's share is taken: its next request waits the queue timeout, then is shed…
    let started = std::time::Instant::now();
    let e = refused(&intake, Some(10), 1).await;
    assert_eq!(shed(&e), ("source-shed", Some(Lane::Regular)), "{e:?}");
    assert_eq!(
        (e.reason(), e.status()),
        ("source-shed", StatusCode::SERVICE_UNAVAILABLE)
    );
    assert!(started.elapsed() >= Duration::from_millis(50));
    // …while another source gets the lane's other permits at once.
    let b1 = intake.admit_from(&headers(Some(10)), ip(2)).await.unwrap();
    let _b2 = intake.admit_from(&headers(Some(10)), ip(2)).await.unwrap();
    // The lane is full now: a third source is shed by the lane, not by its share.
    let e = refused(&intake, Some(10), 3).await;
    assert!(matches!(e, Refusal::Shed { .. }), "{e:?}");
    // A source's waiting request gets its own released permit.
    let waiter = {
        let intake = Intake {
            limits: Limits {
                queue_timeout: Duration::from_secs(2),
                ..intake.limits.clone()
            },
            ..intake.clone()
        };
        tokio::spawn(async move {
            intake
                .admit_from(&headers(Some(10)), ip(1))
                .await
                .map(|t| t.lane)
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(a1);
    assert_eq!(waiter.await.unwrap().unwrap(), Lane::Regular);
    // Sources are forgotten once nothing of theirs is held or waited for.
    drop((a2, b1, _b2));
    assert_eq!(intake.sources.len(), 0);
}

#[tokio::test]
async fn a_source_shares_the_large_lane_too() {
    let intake = Intake::new(Limits {
        max_large_reviews: 2,
        ..limits(20)
    });
    let _a = intake.admit_from(&headers(None), ip(1)).await.unwrap();
    let e = refused(&intake, Some(500), 1).await;
    assert_eq!(shed(&e), ("source-shed", Some(Lane::Large)), "{e:?}");
    assert_eq!(admitted(&intake, Some(500), 2).await, Lane::Large);
}

#[tokio::test]
async fn a_declared_oversize_body_is_refused_before_any_permit() {
    let intake = Intake::new(limits(10));
    let e = intake.admit(&headers(Some(1001))).await.unwrap_err();
    assert!(matches!(e, Refusal::TooLarge { limit: 1000 }), "{e:?}");
    assert_eq!(e.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let mut bad = HeaderMap::new();
    bad.insert(header::CONTENT_LENGTH, "ten".parse().unwrap());
    assert_eq!(intake.admit(&bad).await.unwrap_err().reason(), "bad-length");
}

#[tokio::test]
async fn large_and_undeclared_bodies_queue_in_their_own_lane_and_are_shed_when_it_is_full() {
    let intake = Intake::new(limits(50));
    let large = intake.admit(&headers(Some(500))).await.unwrap();
    assert_eq!(large.lane, Lane::Large);
    // The large lane is full: the next large or undeclared body is shed after the queue wait…
    let started = std::time::Instant::now();
    let e = intake.admit(&headers(None)).await.unwrap_err();
    assert_eq!(shed(&e), ("shed", Some(Lane::Large)), "{e:?}");
    assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() >= Duration::from_millis(50));
    // …while regular reviews still get in at once.
    let a = intake.admit(&headers(Some(100))).await.unwrap();
    let b = intake.admit(&headers(Some(10))).await.unwrap();
    assert_eq!((a.lane, b.lane), (Lane::Regular, Lane::Regular));
    assert!(matches!(
        intake.admit(&headers(Some(10))).await.unwrap_err(),
        Refusal::Shed {
            lane: Lane::Regular,
            ..
        }
    ));
    // A released permit lets the next one in.
    drop(a);
    assert!(intake.admit(&headers(Some(10))).await.is_ok());
}

#[tokio::test]
async fn a_full_regular_lane_sheds_with_503_while_the_large_lane_still_serves() {
    let intake = Intake::new(Limits {
        max_reviews_per_source: 1,
        ..limits(50)
    });
    // Two sources take the regular lane's two permits, one each (their share).
    let a = intake.admit_from(&headers(Some(10)), ip(1)).await.unwrap();
    let b = intake.admit_from(&headers(Some(10)), ip(2)).await.unwrap();
    assert_eq!((a.lane, b.lane), (Lane::Regular, Lane::Regular));
    // A source over its share is shed by its share…
    let e = refused(&intake, Some(10), 1).await;
    assert_eq!(shed(&e), ("source-shed", Some(Lane::Regular)), "{e:?}");
    // …and a fresh source by the full lane, after the queue wait, with 503 `shed`.
    let started = std::time::Instant::now();
    let e = refused(&intake, Some(10), 3).await;
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(shed(&e), ("shed", Some(Lane::Regular)), "{e:?}");
    assert_eq!(
        (e.reason(), e.status()),
        ("shed", StatusCode::SERVICE_UNAVAILABLE)
    );
    // The large lane still serves at once, a large declared body and an undeclared one alike.
    let started = std::time::Instant::now();
    let large = intake.admit_from(&headers(Some(500)), ip(3)).await.unwrap();
    assert_eq!(large.lane, Lane::Large);
    assert!(started.elapsed() < Duration::from_millis(50));
    drop(large);
    assert_eq!(
        intake.admit_from(&headers(None), ip(4)).await.unwrap().lane,
        Lane::Large
    );
    // A released regular permit lets the next regular review in.
    drop(a);
    assert_eq!(admitted(&intake, Some(10), 3).await, Lane::Regular);
}

#[tokio::test]
async fn with_the_shipped_flags_an_address_holds_8_of_the_32_regular_slots() {
    use clap::Parser;
    let shipped = crate::args::Args::try_parse_from(["resize-guard-webhook"])
        .unwrap()
        .limits();
    let intake = Intake::new(Limits {
        queue_timeout: Duration::from_millis(20),
        ..shipped
    });
    let mut held = Vec::new();
    for source in 1..=4 {
        for _ in 0..8 {
            held.push(
                intake
                    .admit_from(&headers(Some(4096)), ip(source))
                    .await
                    .unwrap(),
            );
        }
        // The source's ninth review is shed by its share: 503 `source-shed`.
        let e = refused(&intake, Some(4096), source).await;
        assert_eq!(
            (e.reason(), e.status()),
            ("source-shed", StatusCode::SERVICE_UNAVAILABLE),
            "source {source}"
        );
    }
    assert!(held.iter().all(|t| t.lane == Lane::Regular));
    // Four addresses fill the 32 slots: a fifth is shed by the lane; large reviews still get in.
    let e = refused(&intake, Some(4096), 5).await;
    assert_eq!(e.reason(), "shed");
    assert_eq!(
        admitted(&intake, Some(LARGE_BODY_BYTES + 1), 5).await,
        Lane::Large
    );
}

#[tokio::test]
async fn a_waiting_request_gets_a_permit_released_within_the_queue_timeout() {
    let intake = Intake::new(limits(2_000));
    let held = intake.admit(&headers(Some(500))).await.unwrap();
    let waiter = {
        let intake = intake.clone();
        tokio::spawn(async move { intake.admit(&headers(Some(500))).await.map(|t| t.lane) })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(held);
    assert_eq!(waiter.await.unwrap().unwrap(), Lane::Large);
}

#[tokio::test]
async fn a_trickled_body_times_out_and_an_undeclared_one_is_cut_at_the_limit() {
    let intake = Intake::new(limits(10));
    let ticket = intake.admit(&headers(Some(50))).await.unwrap();
    let never = futures::stream::pending::<Result<Bytes, std::io::Error>>();
    let e = intake
        .read(&ticket, Body::from_stream(never))
        .await
        .unwrap_err();
    assert!(matches!(e, Refusal::BodyTimeout(_)), "{e:?}");
    assert_eq!(e.status(), StatusCode::REQUEST_TIMEOUT);

    let chunks = futures::stream::iter(
        (0..20).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 100]))),
    );
    let e = intake
        .read(&ticket, Body::from_stream(chunks))
        .await
        .unwrap_err();
    assert!(matches!(e, Refusal::TooLarge { .. }), "{e:?}");
    let ok = intake
        .read(&ticket, Body::from(vec![b'x'; 1000]))
        .await
        .unwrap();
    assert_eq!(ok.len(), 1000);
}

fn container(prefix: &str, i: usize, envs: usize) -> Value {
    let env: Vec<Value> = (0..envs)
        .map(|e| json!({"name": format!("{prefix}_SETTING_NUMBER_{i}_{e}"), "value": format!("https://service-{e}.example.internal:8443/some/longer/path?option={e}")}))
        .collect();
    let mounts: Vec<Value> = (0..12)
        .map(|m| json!({"name": format!("volume-{m}"), "mountPath": format!("/var/lib/app/data-{m}"), "readOnly": m % 2 == 0}))
        .collect();
    let probe = json!({"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3});
    json!({
        "name": format!("{prefix}-{i}"),
        "image": format!("registry.example.com/team/{prefix}-{i}@sha256:{}", "a".repeat(64)),
        "command": ["/bin/app", "--config=/etc/app/config.yaml", "--log-level=info"],
        "args": ["--listen=:8080", "--metrics=:9090"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "env": env,
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "250m", "memory": "256Mi"}},
        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}, {"resourceName": "memory", "restartPolicy": "NotRequired"}],
        "volumeMounts": mounts,
        "livenessProbe": probe, "readinessProbe": probe, "startupProbe": probe,
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
    })
}

/// A managedFields entry lists every field path a manager owns (FieldsV1): roughly the shape of
/// the spec with `f:` keys.
fn fields_v1(spec: &Value) -> Value {
    match spec {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (format!("f:{k}"), fields_v1(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Object(
            a.iter()
                .enumerate()
                .map(|(i, v)| (format!("k:{{\"name\":\"item-{i}\"}}"), fields_v1(v)))
                .collect(),
        ),
        _ => json!({}),
    }
}

/// The largest realistic pod measured for the body limit ([`MAX_BODY_BYTES`]).
fn large_pod(cpu: &str) -> Value {
    pod(cpu, 12, 2, 60)
}

/// A pod with `n` containers, `init` init containers, `envs` variables each, 12 mounts, three
/// probes, 30 volumes, 20 labels, a `last-applied-configuration` annotation, managedFields and a
/// full status.
fn pod(cpu: &str, n: usize, init: usize, envs: usize) -> Value {
    let containers: Vec<Value> = (0..n).map(|i| container("app", i, envs)).collect();
    let init: Vec<Value> = (0..init).map(|i| container("init", i, envs)).collect();
    let volumes: Vec<Value> = (0..30)
        .map(|v| json!({"name": format!("volume-{v}"), "configMap": {"name": format!("app-config-{v}"), "defaultMode": 420}}))
        .collect();
    let mut spec = json!({
        "containers": containers, "initContainers": init, "volumes": volumes,
        "nodeName": "n1", "serviceAccountName": "app", "priority": 1000,
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler", "enableServiceLinks": true,
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    });
    spec["containers"][0]["resources"] = json!({"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": {"cpu": cpu, "memory": "256Mi"}});
    let labels: serde_json::Map<String, Value> = (0..20)
        .map(|l| {
            (
                format!("team.example.com/label-{l}"),
                json!(format!("value-{l}")),
            )
        })
        .collect();
    // The pod's author (kubectl apply) owns the spec; the kubelet owns the status.
    let managed = json!([
        {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": fields_v1(&spec)}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {"f:containerStatuses": {}, "f:conditions": {}, "f:phase": {}, "f:podIP": {}}}}
    ]);
    let statuses: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("app-{i}"), "ready": true, "restartCount": 0, "started": true, "image": "registry.example.com/app", "imageID": format!("registry.example.com/app@sha256:{}", "b".repeat(64)), "containerID": format!("containerd://{}", "c".repeat(64)), "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}, "allocatedResources": {"cpu": "250m", "memory": "256Mi"}, "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "250m", "memory": "256Mi"}}}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "big", "namespace": "prod", "uid": "prod-big", "resourceVersion": "123456",
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": serde_json::to_string(&spec).unwrap()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "big-7d9f8", "uid": "owner-uid", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": managed
        },
        "spec": spec,
        "status": {"phase": "Running", "qosClass": "Guaranteed", "containerStatuses": statuses,
                   "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}
    })
}

fn review_of(old: &Value, new: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "resize",
            "name": "big", "namespace": "prod", "operation": "UPDATE",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": new, "oldObject": old, "dryRun": false
        }
    }))
    .unwrap()
}

#[test]
fn the_largest_realistic_resize_review_fits_and_a_typical_one_takes_the_regular_lane() {
    let annotations_cap = 256 * 1024;
    let largest = large_pod("250m");
    for part in ["spec", "status"] {
        eprintln!(
            "  {part}: {} bytes",
            serde_json::to_vec(&largest[part]).unwrap().len()
        );
    }
    let annotations = serde_json::to_vec(&largest["metadata"]["annotations"])
        .unwrap()
        .len();
    eprintln!(
        "  managedFields: {} bytes, annotations: {annotations} bytes",
        serde_json::to_vec(&largest["metadata"]["managedFields"])
            .unwrap()
            .len()
    );
    let body = review_of(&largest, &large_pod("300m"));
    eprintln!(
        "largest realistic pods/resize review: {} bytes ({} KiB)",
        body.len(),
        body.len() / 1024
    );
    assert!(body.len() > 512 * 1024, "the measured pod is not large");
    assert!(
        body.len() + 2 * (annotations_cap - annotations) < MAX_BODY_BYTES,
        "both copies with annotations at the cap must fit"
    );
    let typical = review_of(&pod("250m", 3, 1, 15), &pod("300m", 3, 1, 15));
    eprintln!("typical pods/resize review: {} KiB", typical.len() / 1024);
    assert!(
        typical.len() * 2 < LARGE_BODY_BYTES,
        "a typical review is in the regular lane with room to spare"
    );
    // Both decode and are judged (the pod is unknown to this empty cluster: no Event).
    let cluster =
        resize_guard_cluster::FixedCluster::new(Default::default(), vec![], vec![], vec![]);
    for body in [&body, &typical] {
        let reviewed = crate::review::review(Stage::Mutate, body, &cluster).unwrap();
        assert!(reviewed.event.is_none());
    }
}

/// The time one maximum-size body takes to decode and judge on one core: what a large-lane
/// review costs an async worker if run inline.
#[test]
fn a_maximum_size_review_is_judged_in_milliseconds() {
    let mut old = large_pod("250m");
    let pad = (MAX_BODY_BYTES - review_of(&old, &large_pod("300m")).len()) / 2 - 512;
    old["metadata"]["annotations"]["pad"] = json!("x".repeat(pad));
    let mut new = large_pod("300m");
    new["metadata"]["annotations"]["pad"] = json!("x".repeat(pad));
    let body = review_of(&old, &new);
    assert!(body.len() <= MAX_BODY_BYTES && body.len() > MAX_BODY_BYTES - 4096);
    let cluster =
        resize_guard_cluster::FixedCluster::new(Default::default(), vec![], vec![], vec![]);
    let runs = 20;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(crate::review::review(Stage::Mutate, &body, &cluster).unwrap());
    }
    let each = started.elapsed() / runs;
    eprintln!("maximum-size review ({} bytes): {each:?} each", body.len());
}
