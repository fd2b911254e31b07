//! Supervision (ARCHITECTURE.md, "runtime/") on the real control plane with hollow nodes: a leader
//! whose reconcile loop or pod watch task panics (injected with the test-only `--inject-panic`,
//! feature `testing`) steps down — every write stops, the Lease is released, the process exits
//! non-zero — and the follower leads within the lease duration and preempts for the field test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use resize_guard_harness::env::{Env, alone};
use resize_guard_harness::install::{apply_rbac, wait_ready};
use resize_guard_harness::objects::*;

const T: Duration = Duration::from_secs(30);
/// The replicas' `--lease-duration` (as `support::start_unready` gives them).
const LEASE: Duration = Duration::from_secs(4);

/// These tests start replicas that share one Lease: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Starts replica `identity` with `--inject-panic=<inject>` and JSON logs (for the panic's
/// timestamp), and waits until it is ready.
async fn start_injected(env: &Env, identity: &str, inject: &str) -> support::Controller {
    apply_rbac(env).await;
    let c = support::start_unready_with(
        env,
        identity,
        &[
            "--log-format=json".into(),
            format!("--inject-panic={inject}"),
        ],
    );
    wait_ready(c.health_port, &c.process, T).await;
    c
}

/// A leader `panicky-<name>` with `--inject-panic=<inject>` ([`start_injected`]) and, started
/// once it leads, a follower `steady-<name>`.
async fn leader_and_follower(
    env: &Env,
    name: &str,
    inject: &str,
) -> (support::Controller, support::Controller) {
    let (leader, follower) = (format!("panicky-{name}"), format!("steady-{name}"));
    let a = start_injected(env, &leader, inject).await;
    a.wait_leading().await;
    let b = support::start(env, &follower).await;
    assert!(!b.is_leader().await, "{follower} leads beside {leader}");
    (a, b)
}

/// When the supervisor recorded the injected panic (from `c`'s JSON log), once it has: the
/// positive marker that the panic happened, and the start of the takeover clock.
async fn wait_panic(c: &support::Controller, task: &str) -> Timestamp {
    let deadline = Instant::now() + T;
    loop {
        let log = std::fs::read_to_string(c.process.log_path()).unwrap_or_default();
        for line in log.lines() {
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let fields = &entry["fields"];
            if fields["task"] == task
                && fields["how"]
                    .as_str()
                    .is_some_and(|h| h.starts_with("panicked: injected panic"))
            {
                return entry["timestamp"].as_str().unwrap().parse().unwrap();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no injected panic of {task} recorded by {}:\n{}",
            c.identity,
            c.process.log_tail(4000)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the Lease names `identity`; returns when it acquired it.
async fn wait_lease_holder(env: &Env, identity: &str) -> Timestamp {
    let api: Api<Lease> = Api::namespaced(env.client().await, "resize-guard");
    let deadline = Instant::now() + T;
    loop {
        if let Some(spec) = api
            .get_opt("resize-guard-controller")
            .await
            .unwrap()
            .and_then(|l| l.spec)
            && spec.holder_identity.as_deref() == Some(identity)
        {
            return spec.acquire_time.unwrap().0;
        }
        assert!(Instant::now() < deadline, "{identity} never held the Lease");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a stepping-down replica's health port last answered before the process ended.
#[derive(Debug, Default)]
struct LastWords {
    /// Every `/livez` answer that was not 200 (status line and body).
    livez: Vec<String>,
    /// Every `/readyz` answer that was not 200.
    readyz: Vec<String>,
    /// The last `/metrics` scrape that succeeded.
    metrics: String,
}

/// Polls `/livez`, `/readyz` and `/metrics` on `c`'s health port back to back from before the
/// panic until the process has exited (no pause: the window is one Lease release long), and
/// returns what they answered and how it ended. The replica fails `/livez` before it releases
/// the Lease and exits, so the polls see the window in between (the positive marker that they
/// did, asserted by [`assert_stepped_down`]: a 503 body naming the task).
async fn watch_step_down(c: &mut support::Controller) -> (LastWords, std::process::ExitStatus) {
    use resize_guard_harness::install::http_get;
    let mut words = LastWords::default();
    let deadline = Instant::now() + T;
    loop {
        if let Some(status) = c.process.exit_status() {
            return (words, status);
        }
        assert!(Instant::now() < deadline, "{} still runs", c.identity);
        let (live, ready, metrics) = tokio::join!(
            http_get(c.health_port, "/livez"),
            http_get(c.health_port, "/readyz"),
            http_get(c.health_port, "/metrics"),
        );
        // A refused connection (the process is gone) is not an answer.
        for (answer, into) in [(live, &mut words.livez), (ready, &mut words.readyz)] {
            if let Err(text) = answer
                && text.starts_with("HTTP/")
            {
                into.push(text);
            }
        }
        if let Ok(m) = metrics {
            words.metrics = m;
        }
    }
}

/// Waits until `task` panicked in the leader `a` and the follower `b` holds the Lease; asserts
/// `b` took it within one lease duration of the panic and `a` stepped down
/// ([`assert_stepped_down`]). Returns when `a`'s task panicked.
async fn assert_taken_over(
    env: &Env,
    a: &support::Controller,
    b: &support::Controller,
    task: &str,
    words: &LastWords,
    status: std::process::ExitStatus,
) -> Timestamp {
    let panicked = wait_panic(a, task).await;
    let acquired = wait_lease_holder(env, &b.identity).await;
    let takeover = panicked.duration_until(acquired).as_secs_f64();
    eprintln!(
        "supervision: {} took the Lease {takeover:.2} s after {task} panicked (lease duration \
         {LEASE:?})",
        b.identity
    );
    assert!(takeover < LEASE.as_secs_f64(), "{takeover} s");
    assert_stepped_down(a, task, words, status);
    panicked
}

/// The stepped-down replica is gone, having said why on `/livez` and `/readyz` (503 naming
/// `task`), counted the exit on `/metrics`, released the Lease and exited with status 1.
fn assert_stepped_down(
    c: &support::Controller,
    task: &str,
    words: &LastWords,
    status: std::process::ExitStatus,
) {
    let log = c.process.log_tail(20_000);
    let why = format!("{task} panicked: injected panic");
    eprintln!(
        "supervision: {} /livez and {} /readyz failures seen before {} exited",
        words.livez.len(),
        words.readyz.len(),
        c.identity
    );
    for (answers, state) in [(&words.livez, "dead"), (&words.readyz, "not ready")] {
        let says = format!("{state}: {why}");
        assert!(
            answers
                .iter()
                .any(|a| a.contains(" 503 ") && a.contains(&says)),
            "no 503 saying {says:?}: {words:?}\n{log}"
        );
    }
    let counted = format!("resize_guard_task_exits_total{{task=\"{task}\"}} 1");
    assert!(
        words.metrics.lines().any(|l| l.trim() == counted),
        "no `{counted}` in the last scrape:\n{}",
        words.metrics
    );
    assert_eq!(status.code(), Some(1), "{status:?}\n{log}");
    assert!(
        log.contains("stepped down: every write stopped and the lease released"),
        "{log}"
    );
    assert!(log.contains(&why), "{log}");
}

/// The field test's resize on the follower: Deferred, the filler preempted by `follower` alone,
/// the resize admitted. Returns how long after `since` the preemption began.
async fn follower_preempts(env: &Env, prefix: &str, follower: &str, since: Timestamp) -> f64 {
    let (ns, _node, pods) = env.field_test(prefix).await;
    support::resize_pending_on(env, &pods, &ns, "app", "550m").await;
    support::wait_app_done(&pods, "550m", T).await;
    let acted = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(acted.iter().all(|e| e.2 == follower), "{acted:?}");
    assert_eq!(
        support::preempted(&pods, &["filler", "app"]).await,
        ["filler"]
    );
    since.duration_until(Timestamp::now()).as_secs_f64()
}

#[tokio::test]
async fn a_panicking_reconcile_steps_the_leader_down_and_the_follower_leads_and_preempts() {
    let (env, _alone) = alone(&SERIAL).await;
    let (mut a, b) = leader_and_follower(env, "reconcile", "reconcile=app").await;

    // The Deferred resize reaches the leader's reconcile, which panics on `app`.
    let (ns, _node, pods) = env.field_test("reconcile-panic").await;
    let (words, status) = {
        let watching = watch_step_down(&mut a);
        let resizing = support::resize_pending_on(env, &pods, &ns, "app", "550m");
        tokio::join!(watching, resizing).0
    };
    let panicked = assert_taken_over(env, &a, &b, "the reconcile loop", &words, status).await;

    // The same resize is seen through by the follower.
    support::wait_app_done(&pods, "550m", T).await;
    let acted = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(acted.iter().all(|e| e.2 == b.identity), "{acted:?}");
    let preempting = panicked.duration_until(Timestamp::now()).as_secs_f64();
    eprintln!("supervision: the follower saw the resize through {preempting:.2} s after the panic");
    // And keeps preempting for new resizes.
    follower_preempts(env, "reconcile-after", &b.identity, panicked).await;
}

#[tokio::test]
async fn a_panicking_watch_task_steps_the_leader_down_and_the_follower_leads_and_preempts() {
    let (env, _alone) = alone(&SERIAL).await;
    let (mut a, b) = leader_and_follower(env, "watch", "watch-pods=watch-trigger").await;

    // Any pod named `watch-trigger` panics the leader's pod watch task when it arrives.
    let ns = env.namespace("watch-panic").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let (words, status) = {
        let watching = watch_step_down(&mut a);
        let creating = async {
            pods.create(
                &PostParams::default(),
                &guaranteed_pod("watch-trigger", "nowhere", "low", "10m", "16Mi"),
            )
            .await
            .unwrap();
        };
        tokio::join!(watching, creating).0
    };
    let panicked = assert_taken_over(env, &a, &b, "the pods watch", &words, status).await;

    let preempting = follower_preempts(env, "watch-after", &b.identity, panicked).await;
    eprintln!(
        "supervision: the follower preempted for a new resize {preempting:.2} s after the panic"
    );
}
