//! The webhook under attack from the machine's own loopback, on the real control plane. The
//! attackers connect from other loopback addresses (127.0.0.2 and up: other pods) to the
//! webhook on 127.0.0.1, where kube-apiserver's own calls come from 127.0.0.1. Three attacks,
//! each bounded in connections and seconds, each while real resizes go through kube-apiserver:
//!
//! 1. a slowloris (hundreds of TLS connections sending a request head one byte at a time,
//!    reconnecting when cut) and a flood of maximum-size bodies (a valid `pods/resize` review
//!    padded to `--max-body-bytes`, sent as fast as the connections allow);
//! 2. trickled *small* declared bodies (the regular lane's size, one byte every 100 ms), which
//!    held every regular permit for the whole body deadline before the deadline followed the
//!    declared size and each source got a share of the permits;
//! 3. more idle HTTP/2 connections than `--max-connections` (each sends one request, then only
//!    answers pings), while kube-apiserver is made to open a new connection (the webhook
//!    configuration's caBundle changes, so it builds a new transport): before the idle timer and
//!    the reserve for light sources, it was refused and failed open.
//!
//! Each holds when:
//! - the webhook process's resident memory stays under the memory limit `deploy/base/webhook.yaml`
//!   gives it (sampled from `/proc/<pid>/status` the whole time);
//! - every real resize is stored, the webhook counted a mutate review for each, and their p99
//!   round trip through the API server stays under the `timeoutSeconds` of
//!   `deploy/base/webhook-configurations.yaml`;
//! - kube-apiserver counted no fail-open call (`apiserver_admission_webhook_fail_open_count`);
//! - (1) the slowloris connections were cut by the webhook within its header deadline;
//! - (2) every trickled body was answered 408 or 503 well before the 3 s `--body-read-timeout`;
//! - (3) every idle HTTP/2 connection the webhook accepted was shut down (GOAWAY or close)
//!   within its idle timeout after its one request, and the refused ones were counted.
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
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::objects::patch_resize;
use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::client::TlsStream;

/// One attack at a time: each starts its own webhook and registers it (the configuration has
/// one name), and each loads the machine.
static ONE_ATTACK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long the attack lasts.
const ATTACK: Duration = Duration::from_secs(30);
/// Slowloris connections kept open at once (over [`SLOWLORIS_SOURCES`] addresses, each under
/// the default `--max-connections-per-source` of 64).
const SLOWLORIS: usize = 200;
const SLOWLORIS_SOURCES: [u8; 4] = [2, 3, 4, 5];
/// Concurrent senders of maximum-size bodies.
const FLOODERS: usize = 16;
const FLOOD_SOURCES: [u8; 2] = [6, 7];
/// Senders trickling small declared bodies, over [`TRICKLE_SOURCES`]: three times the regular
/// lane's 32 permits.
const TRICKLERS: usize = 96;
const TRICKLE_SOURCES: [u8; 3] = [2, 3, 4];
/// A small declared body: a real review's size, the regular lane.
const TRICKLED_BYTES: usize = 4096;
/// The default `--body-read-timeout`: what a trickled body held a permit for before.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(3);
/// The defaults `--max-connections` and `--max-connections-per-source`.
const MAX_CONNECTIONS: usize = 512;
const PER_SOURCE: usize = 64;
/// Idle HTTP/2 connections attempted: 9 addresses × 64, more than `--max-connections`.
const IDLE_SOURCES: std::ops::RangeInclusive<u8> = 2..=10;
/// The default `--connection-idle-timeout`.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the idle attack lasts: past the idle timeout of the connections opened first.
const IDLE_ATTACK: Duration = Duration::from_secs(45);
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

/// The loopback address 127.0.0.`last`, an attacker's source.
fn source(last: u8) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 0, 0, last)
}

/// A TLS connection to the webhook on 127.0.0.1 from `from`.
async fn connect(
    from: std::net::Ipv4Addr,
    port: u16,
    config: &Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<tokio::net::TcpStream>> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind((from, 0).into())?;
    let tcp = socket
        .connect((std::net::Ipv4Addr::LOCALHOST, port).into())
        .await?;
    tcp.set_nodelay(true)?;
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
async fn slowloris(
    from: std::net::Ipv4Addr,
    port: u16,
    config: Arc<rustls::ClientConfig>,
    end: Instant,
) -> Loris {
    let mut seen = Loris::default();
    let head =
        b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: ";
    while Instant::now() < end {
        let opened = Instant::now();
        let Ok(stream) = connect(from, port, &config).await else {
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
    from: std::net::Ipv4Addr,
    port: u16,
    config: Arc<rustls::ClientConfig>,
    body: Arc<Vec<u8>>,
    end: Instant,
) -> BTreeMap<u16, usize> {
    let mut statuses = BTreeMap::new();
    while Instant::now() < end {
        let status = async {
            let mut s = connect(from, port, &config).await.ok()?;
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

/// Real resizes of pod `steady` through kube-apiserver, one after another, until `end`: the
/// round trip of each stored one, and the errors.
async fn resizes(pods: &Api<Pod>, end: Instant) -> (Vec<Duration>, Vec<String>) {
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    let mut i = 0u32;
    while Instant::now() < end {
        let cpu = format!("{}m", 300 + 10 * (i % 20));
        i += 1;
        let patch = json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}});
        let sent = Instant::now();
        match patch_resize(pods, "steady", &patch).await {
            Ok(_) => latencies.push(sent.elapsed()),
            Err(e) => failures.push(format!("{cpu}: {e}")),
        }
    }
    (latencies, failures)
}

/// The mutate reviews the webhook counted.
fn reviews(text: &str) -> f64 {
    metric_sum(
        text,
        "resize_guard_admission_reviews_total",
        &["webhook=\"mutate\""],
    )
}

/// One attack at a time, on a webhook of its own with the steady pod beside it, and the counters
/// read before it starts (the control plane's logs are printed if the test fails).
struct Attack {
    env: &'static Env,
    hook: support::Webhook,
    client: kube::Client,
    ns: String,
    pods: Api<Pod>,
    /// The webhook configuration's `timeoutSeconds`.
    deadline: Duration,
    fail_open_before: f64,
    reviews_before: f64,
    // Dropped last (fields drop in order): the webhook stops before the next attack starts.
    _logs: LogGuard<'static>,
    _one: tokio::sync::MutexGuard<'static, ()>,
}

impl Attack {
    async fn start(prefix: &str) -> Attack {
        let env = shared(EnvOptions::default());
        let logs = env.guard();
        let one = ONE_ATTACK.lock().await;
        let hook = support::start(env, Webhooks::Mutating).await;
        let client = env.client().await;
        let (ns, _, pods) = support::steady(env, prefix).await;
        let fail_open_before = fail_open(&client).await;
        let reviews_before = reviews(&hook.health("/metrics").await.unwrap());
        Attack {
            env,
            hook,
            client,
            ns,
            pods,
            deadline: timeout_seconds(),
            fail_open_before,
            reviews_before,
            _logs: logs,
            _one: one,
        }
    }

    /// Real resizes of the steady pod through kube-apiserver until `end` ([`resizes`]).
    async fn resizes(&self, end: Instant) -> (Vec<Duration>, Vec<String>) {
        resizes(&self.pods, end).await
    }

    /// What the webhook and kube-apiserver counted since [`Attack::start`], for the real resizes.
    async fn served(&self, (latencies, failures): (Vec<Duration>, Vec<String>)) -> Served {
        let fail_open_delta = fail_open(&self.client).await - self.fail_open_before;
        let metrics = self.hook.health("/metrics").await.unwrap();
        Served {
            reviewed: reviews(&metrics) - self.reviews_before,
            metrics,
            latencies,
            failures,
            fail_open_delta,
            deadline: self.deadline,
        }
    }
}

/// The real resizes made during an attack, and what was counted meanwhile.
struct Served {
    latencies: Vec<Duration>,
    failures: Vec<String>,
    /// The webhook's `/metrics` after the attack.
    metrics: String,
    /// Mutate reviews the webhook counted during the attack.
    reviewed: f64,
    /// Fail-open calls kube-apiserver counted during the attack.
    fail_open_delta: f64,
    deadline: Duration,
}

impl std::fmt::Display for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} real resizes, p99 {:?}, max {:?} (timeoutSeconds {:?}); fail-open +{}; \
             mutate reviews +{}",
            self.latencies.len(),
            p99(&self.latencies),
            self.latencies.iter().max().copied().unwrap_or_default(),
            self.deadline,
            self.fail_open_delta,
            self.reviewed
        )
    }
}

impl Served {
    /// What every attack asserts about the real resizes made during it.
    fn assert(&self) {
        let latencies = &self.latencies;
        assert!(
            self.failures.is_empty(),
            "resizes failed: {:?}",
            self.failures
        );
        assert!(
            latencies.len() >= 20,
            "only {} resizes during the attack",
            latencies.len()
        );
        assert!(
            p99(latencies) < self.deadline,
            "p99 {:?} ≥ timeoutSeconds {:?}",
            p99(latencies),
            self.deadline
        );
        assert_eq!(self.fail_open_delta, 0.0, "kube-apiserver failed open");
        assert!(
            self.reviewed >= latencies.len() as f64,
            "the webhook reviewed {} of {} resizes",
            self.reviewed,
            latencies.len()
        );
    }
}

fn p99(latencies: &[Duration]) -> Duration {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let i = (sorted.len() * 99).div_ceil(100).saturating_sub(1);
    sorted[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_a_slowloris_and_a_flood_of_maximum_size_bodies_real_reviews_are_answered_in_time() {
    let a = Attack::start("overload").await;
    let (hook, limit) = (&a.hook, memory_limit());
    let rss_before = rss(hook.process.pid());

    // The attack, bounded in time; the connections are bounded by the tasks.
    let config = tls_config(&hook.bundle.ca_cert_pem);
    let start = Instant::now();
    let end = start + ATTACK;
    let lorises: Vec<_> = (0..SLOWLORIS)
        .map(|i| {
            let from = source(SLOWLORIS_SOURCES[i % SLOWLORIS_SOURCES.len()]);
            tokio::spawn(slowloris(from, hook.port, config.clone(), end))
        })
        .collect();
    let body = Arc::new(max_size_review(
        resize_guard_webhook::intake::MAX_BODY_BYTES,
    ));
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|i| {
            let from = source(FLOOD_SOURCES[i % FLOOD_SOURCES.len()]);
            tokio::spawn(flood(from, hook.port, config.clone(), body.clone(), end))
        })
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
    let real = a.resizes(end).await;
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
    let served = a.served(real).await;
    let shed = metric_sum(
        &served.metrics,
        "resize_guard_admission_refusals_total",
        &["reason=\"shed\""],
    );
    let longest_loris = loris.cut.iter().max().copied().unwrap_or_default();
    eprintln!(
        "attack {ATTACK:?} in {}: {served}; webhook RSS {} MiB before, peak {} MiB (limit {} MiB); \
         slowloris: {} cut (longest {longest_loris:?}), {} open at the end, {} refused; \
         flood answers by status {statuses:?}; shed {shed}",
        a.ns,
        rss_before >> 20,
        peak >> 20,
        limit >> 20,
        loris.cut.len(),
        loris.open_at_end.len(),
        loris.refused,
    );

    served.assert();
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
    drop(a);
}

/// What one trickling sender saw: per connection, the status it was answered with (0: cut
/// with no answer) and how long after its head that came.
#[derive(Debug, Default)]
struct Trickled {
    answers: Vec<(u16, Duration)>,
    refused: usize,
}

/// One trickling sender until `end`: a small declared body, one byte every 100 ms, over a
/// fresh connection each time the webhook answers or cuts it.
async fn trickle(
    from: std::net::Ipv4Addr,
    port: u16,
    config: Arc<rustls::ClientConfig>,
    end: Instant,
) -> Trickled {
    let mut seen = Trickled::default();
    let head = format!(
        "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {TRICKLED_BYTES}\r\n\r\n"
    );
    while Instant::now() < end {
        let Ok(stream) = connect(from, port, &config).await else {
            seen.refused += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (mut rd, mut wr) = tokio::io::split(stream);
        if wr.write_all(head.as_bytes()).await.is_err() || wr.flush().await.is_err() {
            seen.refused += 1;
            continue;
        }
        let sent = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut answer = [0u8; 12];
        let mut got = 0usize;
        loop {
            tokio::select! {
                r = rd.read(&mut answer[got..]) => {
                    match r {
                        Ok(n) if n > 0 && got + n < answer.len() => { got += n; continue; }
                        Ok(n) if n > 0 => got += n,
                        _ => {}
                    }
                    let status = std::str::from_utf8(&answer[9..got.max(9)])
                        .ok()
                        .and_then(|s| s.parse::<u16>().ok())
                        .unwrap_or(0);
                    seen.answers.push((status, sent.elapsed()));
                    break;
                }
                _ = tick.tick() => {
                    // Bounded: no connection outlives the attack by more than a tick.
                    if Instant::now() >= end {
                        break;
                    }
                    if wr.write_all(b" ").await.is_err() || wr.flush().await.is_err() {
                        seen.answers.push((0, sent.elapsed()));
                        break;
                    }
                }
            }
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trickled_small_bodies_do_not_hold_the_regular_lane_from_real_reviews() {
    let a = Attack::start("trickle").await;
    let hook = &a.hook;

    let config = tls_config(&hook.bundle.ca_cert_pem);
    let end = Instant::now() + ATTACK;
    let tricklers: Vec<_> = (0..TRICKLERS)
        .map(|i| {
            let from = source(TRICKLE_SOURCES[i % TRICKLE_SOURCES.len()]);
            tokio::spawn(trickle(from, hook.port, config.clone(), end))
        })
        .collect();
    // From 3 s in (every trickler has its first body going) to the end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let real = a.resizes(end).await;
    let mut seen = Trickled::default();
    for t in tricklers {
        let t = t.await.unwrap();
        seen.answers.extend(t.answers);
        seen.refused += t.refused;
    }
    let served = a.served(real).await;
    let refusals = |reason: &str| {
        metric_sum(
            &served.metrics,
            "resize_guard_admission_refusals_total",
            &[&format!("reason=\"{reason}\"")],
        )
    };
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    for (status, _) in &seen.answers {
        *by_status.entry(*status).or_insert(0) += 1;
    }
    let held_longest = seen
        .answers
        .iter()
        .filter(|(status, _)| *status == 408)
        .map(|(_, held)| *held)
        .max()
        .unwrap_or_default();
    eprintln!(
        "trickle {ATTACK:?} in {}: {served}; {TRICKLERS} tricklers from {} addresses: \
         answers by status {by_status:?}, longest 408 after {held_longest:?}, {} not connected; \
         refusals body-timeout {}, source-shed {}, shed {}",
        a.ns,
        TRICKLE_SOURCES.len(),
        seen.refused,
        refusals("body-timeout"),
        refusals("source-shed"),
        refusals("shed"),
    );

    served.assert();
    assert!(
        by_status.get(&408).copied().unwrap_or(0) >= TRICKLERS,
        "the trickled bodies were not timed out: {by_status:?}"
    );
    // The deadline follows the declared size (500 ms + 4 KiB at 1 MiB/s), not the 3 s read
    // timeout a trickled body held its permit for before. Measured from the head, so a wait of
    // up to the 1 s queue timeout for its source's permit comes first: at most ~1.5 s, against
    // at least 3 s before (4.0 s measured on c50689f).
    assert!(
        held_longest < BODY_READ_TIMEOUT,
        "a trickled body was answered {held_longest:?} after its head"
    );
    drop(a);
}

/// What one idle HTTP/2 connection saw.
#[derive(Debug, Default)]
struct Idle {
    /// Refused (closed before or during the handshake, or no answer to its request).
    refused: bool,
    /// From its answered request to the webhook's GOAWAY or close, if it came before `end`.
    ended_after: Option<Duration>,
}

/// An HTTP/2 frame header: length, type, flags, stream.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// One HTTP/2 connection from `from` that sends one request (`GET /`, answered 404), then
/// stays idle, acknowledging SETTINGS and answering PINGs as a live client does, until the
/// webhook ends it or `end` comes.
async fn idle_h2(
    from: std::net::Ipv4Addr,
    port: u16,
    config: Arc<rustls::ClientConfig>,
    end: Instant,
) -> Idle {
    let Ok(stream) = connect(from, port, &config).await else {
        return Idle {
            refused: true,
            ..Idle::default()
        };
    };
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut rd, mut wr) = tokio::io::split(stream);
    // HPACK: :method GET, :scheme https, :path / (static table), :authority 127.0.0.1.
    let mut headers = vec![0x82, 0x87, 0x84, 0x01, 9];
    headers.extend_from_slice(b"127.0.0.1");
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(0x4, 0, 0, &[]));
    hello.extend(frame(0x1, 0x5, 1, &headers));
    if wr.write_all(&hello).await.is_err() {
        return Idle {
            refused: true,
            ..Idle::default()
        };
    }
    let mut answered: Option<Instant> = None;
    let read_frames = async {
        loop {
            let mut head = [0u8; 9];
            if rd.read_exact(&mut head).await.is_err() {
                return;
            }
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            if rd.read_exact(&mut payload).await.is_err() {
                return;
            }
            let (kind, flags) = (head[3], head[4]);
            let reply = match (kind, flags & 0x1) {
                (0x4, 0) => Some(frame(0x4, 0x1, 0, &[])),
                (0x6, 0) => Some(frame(0x6, 0x1, 0, &payload)),
                (0x7, _) if answered.is_some() => return,
                (0x1, _) => {
                    answered.get_or_insert_with(Instant::now);
                    None
                }
                _ => None,
            };
            if let Some(reply) = reply
                && wr.write_all(&reply).await.is_err()
            {
                return;
            }
        }
    };
    let ended = tokio::time::timeout(end.saturating_duration_since(Instant::now()), read_frames)
        .await
        .is_ok();
    match answered {
        None => Idle {
            refused: true,
            ..Idle::default()
        },
        Some(at) => Idle {
            refused: false,
            ended_after: ended.then(|| at.elapsed()),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn more_idle_http2_connections_than_the_limit_leave_kube_apiserver_room_to_reconnect() {
    let a = Attack::start("idle").await;
    let hook = &a.hook;

    // The crowd: 64 connections from each of 9 addresses, 576 > --max-connections.
    let config =
        resize_guard_harness::tls::client_config(&hook.bundle.ca_cert_pem, &[b"h2"]).unwrap();
    let end = Instant::now() + IDLE_ATTACK;
    let crowd: Vec<_> = IDLE_SOURCES
        .flat_map(|last| std::iter::repeat_n(source(last), PER_SOURCE))
        .map(|from| tokio::spawn(idle_h2(from, hook.port, config.clone(), end)))
        .collect();
    let attempted = crowd.len();
    assert!(attempted > MAX_CONNECTIONS);
    // Every connection of the crowd is open (or refused) before kube-apiserver must reconnect.
    resize_guard_harness::admission::wait_active(Duration::from_secs(20), || async {
        let text = hook.health("/metrics").await.unwrap_or_default();
        let open = metric_sum(&text, "resize_guard_connections_open", &[]);
        let refused = metric_sum(&text, "resize_guard_connections_refused_total", &[]);
        open + refused >= attempted as f64
    })
    .await
    .unwrap();
    // The same CA twice: kube-apiserver trusts the same certificate, but a new caBundle is a
    // new client transport (`staging/src/k8s.io/apiserver/pkg/util/webhook/client.go`,
    // `HookClient`), so its next review needs a new connection while the crowd holds the port.
    let doubled = format!("{0}{0}", hook.bundle.ca_cert_pem);
    let doubled = serde_json::to_value(k8s_openapi::ByteString(doubled.into_bytes())).unwrap();
    resize_guard_harness::admission::register(
        a.env,
        &format!("https://127.0.0.1:{}", hook.port),
        doubled.as_str().unwrap(),
        Webhooks::Mutating,
    )
    .await
    .unwrap();
    let real = a.resizes(end).await;
    let mut seen = Vec::new();
    for c in crowd {
        seen.push(c.await.unwrap());
    }
    let served = a.served(real).await;
    let accepted: Vec<&Idle> = seen.iter().filter(|i| !i.refused).collect();
    let still_open = accepted.iter().filter(|i| i.ended_after.is_none()).count();
    let longest = accepted
        .iter()
        .filter_map(|i| i.ended_after)
        .max()
        .unwrap_or_default();
    let count = |name: &str, reason: &str| {
        metric_sum(&served.metrics, name, &[&format!("reason=\"{reason}\"")])
    };
    eprintln!(
        "idle HTTP/2 {IDLE_ATTACK:?} in {}: {served}; crowd of {attempted}: {} accepted, {} refused, \
         {still_open} still open at the end, longest idle before GOAWAY {longest:?}; \
         refused limit {} source-limit {}, closed idle {} max-age {}",
        a.ns,
        accepted.len(),
        attempted - accepted.len(),
        count("resize_guard_connections_refused_total", "limit"),
        count("resize_guard_connections_refused_total", "source-limit"),
        count("resize_guard_connections_closed_total", "idle"),
        count("resize_guard_connections_closed_total", "max-age"),
    );

    served.assert();
    assert!(
        accepted.len() < attempted,
        "the crowd was not limited: {} of {attempted} accepted",
        accepted.len()
    );
    assert!(
        count("resize_guard_connections_refused_total", "limit") > 0.0,
        "no connection was refused at the limit"
    );
    // Each idle connection ends within the idle timeout (a second of timer slack and 4 of a
    // loaded machine) after its one request.
    assert_eq!(still_open, 0, "idle connections outlived the attack");
    assert!(
        longest <= IDLE_TIMEOUT + Duration::from_secs(5),
        "an idle connection stayed {longest:?}"
    );
    drop(a);
}
