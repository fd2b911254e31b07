//! The webhook under attack from the machine's own loopback, on the real control plane: for a
//! bounded time, a slowloris (hundreds of TLS connections sending a request head one byte at a
//! time, reconnecting when cut) and a flood of maximum-size bodies (a valid `pods/resize` review
//! padded to `--max-body-bytes`, sent as fast as the connections allow), while real resizes go
//! through kube-apiserver. It holds when:
//! - the webhook process's resident memory stays under the memory limit `deploy/base/webhook.yaml`
//!   gives it (sampled from `/proc/<pid>/status` the whole time);
//! - every real resize is stored, the webhook counted a mutate review for each, and their p99
//!   round trip through the API server stays under the `timeoutSeconds` of
//!   `deploy/base/webhook-configurations.yaml`;
//! - kube-apiserver counted no fail-open call (`apiserver_admission_webhook_fail_open_count`);
//! - the slowloris connections were cut by the webhook within its header deadline.
//!
//! Its own binary: the attack loads the machine for every test sharing it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::admission::{MUTATING_NAME, Webhooks};
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::patch_resize;
use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::client::TlsStream;

/// How long the attack lasts.
const ATTACK: Duration = Duration::from_secs(30);
/// Slowloris connections kept open at once.
const SLOWLORIS: usize = 200;
/// Concurrent senders of maximum-size bodies.
const FLOODERS: usize = 16;
/// The webhook's default `--header-read-timeout` and `--tls-handshake-timeout` (the suite
/// starts it with its defaults), plus scheduling slack on a loaded 2-core machine.
const CUT_WITHIN: Duration = Duration::from_secs(5 + 3);

fn repo_file(rel: &str) -> String {
    let root = resize_guard_harness::install::repo_root();
    std::fs::read_to_string(root.join(rel)).unwrap()
}

fn yaml_docs(rel: &str) -> Vec<Value> {
    let text = repo_file(rel);
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

/// The webhook container's memory limit in `deploy/base/webhook.yaml`, in bytes.
fn memory_limit() -> u64 {
    let docs = yaml_docs("deploy/base/webhook.yaml");
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let limit =
        deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
            .as_str()
            .unwrap();
    let (n, unit) = limit.split_at(limit.find(|c: char| !c.is_ascii_digit()).unwrap());
    let n: u64 = n.parse().unwrap();
    match unit {
        "Mi" => n << 20,
        "Gi" => n << 30,
        other => panic!("unexpected unit {other} in {limit}"),
    }
}

/// The mutating webhook's `timeoutSeconds` in `deploy/`.
fn timeout_seconds() -> Duration {
    let docs = yaml_docs("deploy/base/webhook-configurations.yaml");
    let config = docs
        .iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .unwrap();
    Duration::from_secs(config["webhooks"][0]["timeoutSeconds"].as_u64().unwrap())
}

/// `VmRSS` of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// The sum of a metric's samples whose line contains every one of `labels`.
fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b)
}

async fn apiserver_metrics(client: &kube::Client) -> String {
    client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap()
}

async fn fail_open(client: &kube::Client) -> f64 {
    let text = apiserver_metrics(client).await;
    metric_sum(
        &text,
        "apiserver_admission_webhook_fail_open_count",
        &[&format!("name=\"{MUTATING_NAME}\"")],
    )
}

fn tls_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    resize_guard_harness::tls::client_config(ca_pem, &[]).unwrap()
}

async fn connect(
    port: u16,
    config: &Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tokio_rustls::TlsConnector::from(config.clone())
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
}

/// What one slowloris connection saw.
#[derive(Debug, Default)]
struct Loris {
    /// Lifetimes of connections the webhook cut.
    cut: Vec<Duration>,
    /// Ages of connections still open when the attack ended.
    open_at_end: Vec<Duration>,
    /// Connects or handshakes that failed.
    refused: usize,
}

/// One slowloris slot until `end`: a TLS connection sending a request head one byte every
/// 200 ms, replaced when the webhook cuts it.
async fn slowloris(port: u16, config: Arc<rustls::ClientConfig>, end: Instant) -> Loris {
    let mut seen = Loris::default();
    let head =
        b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: ";
    while Instant::now() < end {
        let opened = Instant::now();
        let Ok(stream) = connect(port, &config).await else {
            seen.refused += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (mut rd, mut wr) = tokio::io::split(stream);
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let mut sent = 0usize;
        let mut buf = [0u8; 512];
        loop {
            tokio::select! {
                r = rd.read(&mut buf) => {
                    // EOF, an error, or any answer: the webhook is done with it.
                    let _ = r;
                    seen.cut.push(opened.elapsed());
                    break;
                }
                _ = tick.tick() => {
                    if Instant::now() >= end {
                        seen.open_at_end.push(opened.elapsed());
                        break;
                    }
                    let byte = head.get(sent).copied().unwrap_or(b'a');
                    sent += 1;
                    if wr.write_all(&[byte]).await.is_err() || wr.flush().await.is_err() {
                        seen.cut.push(opened.elapsed());
                        break;
                    }
                }
            }
        }
    }
    seen
}

/// A valid `pods/resize` review of an unknown pod, padded to exactly `size` bytes.
fn max_size_review(size: usize) -> Vec<u8> {
    let pod = |cpu: &str, pad: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "flood", "namespace": "flood", "uid": "flood-uid", "annotations": {"pad": pad}},
               "spec": {"nodeName": "nowhere", "containers": [{"name": "app", "image": "x",
                 "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}})
    };
    let review = |pad: &str| {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "flood", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "subResource": "resize", "name": "flood", "namespace": "flood",
                        "operation": "UPDATE", "userInfo": {"username": "nobody"},
                        "object": pod("300m", pad), "oldObject": pod("250m", pad)}
        }))
        .unwrap()
    };
    let bare = review("").len();
    let pad = "x".repeat((size - bare) / 2);
    let mut body = review(&pad);
    // Whitespace makes up the odd byte.
    body.resize(size, b' ');
    body
}

/// Sends `body` to `/mutate` over fresh connections until `end`; counts answers by status
/// (0: cut before an answer).
async fn flood(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    body: Arc<Vec<u8>>,
    end: Instant,
) -> BTreeMap<u16, usize> {
    let mut statuses = BTreeMap::new();
    while Instant::now() < end {
        let status = async {
            let mut s = connect(port, &config).await.ok()?;
            let head = format!(
                "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).await.ok()?;
            // The webhook may answer (503) without reading the body and close.
            let _ = s.write_all(&body).await;
            let _ = s.flush().await;
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
            std::str::from_utf8(answer.get(9..12)?).ok()?.parse::<u16>().ok()
        }
        .await
        .unwrap_or(0);
        *statuses.entry(status).or_insert(0) += 1;
    }
    statuses
}

fn p99(latencies: &[Duration]) -> Duration {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let i = (sorted.len() * 99).div_ceil(100).saturating_sub(1);
    sorted[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_a_slowloris_and_a_flood_of_maximum_size_bodies_real_reviews_are_answered_in_time() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let hook = support::start(env, Webhooks::Mutating).await;
    let (limit, deadline) = (memory_limit(), timeout_seconds());
    let client = env.client().await;
    let (ns, _, pods) = support::steady(env, "overload").await;
    let fail_open_before = fail_open(&client).await;
    let reviews = |text: &str| {
        metric_sum(
            text,
            "resize_guard_admission_reviews_total",
            &["webhook=\"mutate\""],
        )
    };
    let reviews_before = reviews(&hook.health("/metrics").await.unwrap());
    let rss_before = rss(hook.process.pid());

    // The attack, bounded in time; the connections are bounded by the tasks.
    let config = tls_config(&hook.bundle.ca_cert_pem);
    let start = Instant::now();
    let end = start + ATTACK;
    let lorises: Vec<_> = (0..SLOWLORIS)
        .map(|_| tokio::spawn(slowloris(hook.port, config.clone(), end)))
        .collect();
    let body = Arc::new(max_size_review(
        resize_guard_webhook::intake::MAX_BODY_BYTES,
    ));
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| tokio::spawn(flood(hook.port, config.clone(), body.clone(), end)))
        .collect();
    let pid = hook.process.pid();
    let sampler = tokio::spawn(async move {
        let mut peak = 0u64;
        while Instant::now() < end + Duration::from_secs(2) {
            peak = peak.max(rss(pid));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peak
    });

    // Real resizes through kube-apiserver, one after another, from 3 s into the attack (the
    // slowloris is then at full strength) to its end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let api: Api<Pod> = pods.clone();
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    let mut i = 0u32;
    while Instant::now() < end {
        let cpu = format!("{}m", 300 + 10 * (i % 20));
        i += 1;
        let patch = json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}});
        let sent = Instant::now();
        match patch_resize(&api, "steady", &patch).await {
            Ok(_) => latencies.push(sent.elapsed()),
            Err(e) => failures.push(format!("{cpu}: {e}")),
        }
    }
    let mut loris = Loris::default();
    for l in lorises {
        let seen = l.await.unwrap();
        loris.cut.extend(seen.cut);
        loris.open_at_end.extend(seen.open_at_end);
        loris.refused += seen.refused;
    }
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for f in flooders {
        for (status, n) in f.await.unwrap() {
            *statuses.entry(status).or_insert(0) += n;
        }
    }
    let peak = sampler.await.unwrap();
    let fail_open_delta = fail_open(&client).await - fail_open_before;
    let webhook_metrics = hook.health("/metrics").await.unwrap();
    let reviewed = reviews(&webhook_metrics) - reviews_before;
    let shed = metric_sum(
        &webhook_metrics,
        "resize_guard_admission_refusals_total",
        &["reason=\"shed\""],
    );
    let worst = latencies.iter().max().copied().unwrap_or_default();
    let longest_loris = loris.cut.iter().max().copied().unwrap_or_default();
    eprintln!(
        "attack {ATTACK:?} in {ns}: {} real resizes, p99 {:?}, max {worst:?} (timeoutSeconds {deadline:?}); \
         webhook RSS {} MiB before, peak {} MiB (limit {} MiB); fail-open +{fail_open_delta}; \
         mutate reviews +{reviewed}; slowloris: {} cut (longest {longest_loris:?}), {} open at the end, {} refused; \
         flood answers by status {statuses:?}; shed {shed}",
        latencies.len(),
        p99(&latencies),
        rss_before >> 20,
        peak >> 20,
        limit >> 20,
        loris.cut.len(),
        loris.open_at_end.len(),
        loris.refused,
    );

    assert!(failures.is_empty(), "resizes failed: {failures:?}");
    assert!(
        latencies.len() >= 20,
        "only {} resizes in {ATTACK:?}",
        latencies.len()
    );
    assert!(
        p99(&latencies) < deadline,
        "p99 {:?} ≥ timeoutSeconds {deadline:?}",
        p99(&latencies)
    );
    assert_eq!(fail_open_delta, 0.0, "kube-apiserver failed open");
    assert!(
        reviewed >= latencies.len() as f64,
        "the webhook reviewed {reviewed} of {} resizes",
        latencies.len()
    );
    assert!(
        peak < limit,
        "peak RSS {} MiB ≥ the {} MiB limit",
        peak >> 20,
        limit >> 20
    );
    assert!(
        loris.cut.len() >= SLOWLORIS,
        "the webhook cut only {} slowloris connections",
        loris.cut.len()
    );
    assert!(
        longest_loris <= CUT_WITHIN,
        "a slowloris connection lived {longest_loris:?}"
    );
    assert!(
        loris.open_at_end.iter().all(|age| *age <= CUT_WITHIN),
        "slowloris connections outlived the header deadline: {:?}",
        loris.open_at_end
    );
    let answered: usize = statuses
        .iter()
        .filter(|(s, _)| **s != 0)
        .map(|(_, n)| n)
        .sum();
    assert!(
        answered >= FLOODERS,
        "the flood got no answers: {statuses:?}"
    );
    drop(hook);
}
