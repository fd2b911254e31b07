use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kube::core::Status;

use super::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn forbidden() -> watcher::Error {
    watcher::Error::InitialListFailed(kube::Error::Api(Box::new(Status {
        code: 403,
        reason: "Forbidden".into(),
        message: "pods is forbidden: User \"system:serviceaccount:resize-guard:webhook\" cannot list resource \"pods\" in API group \"\" at the cluster scope".into(),
        ..Default::default()
    })))
}

fn err() -> Result<watcher::Event<Pod>, watcher::Error> {
    Err(forbidden())
}

fn ok(ev: watcher::Event<Pod>) -> Result<watcher::Event<Pod>, watcher::Error> {
    Ok(ev)
}

/// A watch listed now, and when.
fn listed() -> (Instant, WatchState) {
    let t0 = Instant::now();
    let mut s = WatchState::default();
    s.on_event(t0, Progress::Listed);
    (t0, s)
}

fn health() -> WatchHealth {
    WatchHealth::new(DEFAULT_UNHEALTHY_AFTER, Arc::new(|_| {}))
}

fn list_all(h: &WatchHealth, at: Instant) {
    list_all_but(h, None, at);
}

/// Every resource listed at `at` but `unlisted`.
fn list_all_but(h: &WatchHealth, unlisted: Option<Watched>, at: Instant) {
    for w in Watched::ALL.into_iter().filter(|w| Some(*w) != unlisted) {
        h.observe_at(w, &ok(watcher::Event::InitDone), at);
    }
}

#[test]
fn nothing_listed_names_every_resource() {
    let h = health();
    assert_eq!(
        h.readiness_at(Instant::now()).unwrap_err(),
        "pods: not listed yet; nodes: not listed yet; poddisruptionbudgets: not listed yet; configmap: not listed yet; configmap-last-good: not listed yet"
    );
}

#[test]
fn a_resource_never_listed_reports_its_last_error_and_when() {
    let t0 = Instant::now();
    let h = health();
    list_all(&h, t0);
    let h2 = health();
    list_all_but(&h2, Some(Watched::Pods), t0);
    h2.observe_at(Watched::Pods, &err(), t0);
    let why = h2.readiness_at(t0 + secs(12)).unwrap_err();
    assert!(
        why.starts_with("pods: not listed yet (last error 12s ago: list failed: 403 Forbidden: pods is forbidden: User"),
        "{why}"
    );
    assert!(!why.contains("nodes"), "{why}");
    assert_eq!(h.readiness_at(t0 + secs(12)), Ok(()));
}

#[test]
fn a_lasting_failure_makes_the_view_unready_after_the_threshold() {
    let t0 = Instant::now();
    let h = health();
    list_all(&h, t0);
    for i in 0..=15 {
        h.observe_at(Watched::Nodes, &err(), t0 + secs(5 * i));
        let now = t0 + secs(5 * i);
        if 5 * i < 60 {
            assert_eq!(h.readiness_at(now), Ok(()), "at {}s", 5 * i);
        }
    }
    let why = h.readiness_at(t0 + secs(75)).unwrap_err();
    assert_eq!(
        why,
        "nodes: watch failing for 75s (16 errors): list failed: 403 Forbidden: pods is forbidden: User \"system:serviceaccount:resize-guard:webhook\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
    );
}

#[test]
fn the_threshold_is_configurable() {
    let t0 = Instant::now();
    let h = WatchHealth::new(secs(10), Arc::new(|_| {}));
    list_all(&h, t0);
    h.observe_at(Watched::ConfigMap, &err(), t0);
    h.observe_at(Watched::ConfigMap, &err(), t0 + secs(8));
    assert_eq!(h.readiness_at(t0 + secs(9)), Ok(()));
    assert!(
        h.readiness_at(t0 + secs(11))
            .unwrap_err()
            .starts_with("configmap: watch failing for 11s (2 errors)")
    );
}

#[test]
fn a_successful_event_ends_the_streak() {
    let (t0, mut s) = listed();
    s.on_error(t0, "boom".into());
    s.on_error(t0 + secs(40), "boom".into());
    s.on_error(t0 + secs(70), "boom".into());
    assert!(s.problem(t0 + secs(70), secs(60)).is_some());
    let r = s.on_event(t0 + secs(71), Progress::Changed).unwrap();
    assert_eq!(
        r,
        Recovery {
            failed_for: secs(71),
            errors: 3
        }
    );
    assert_eq!(s.failing_since, None);
    assert_eq!(s.problem(t0 + secs(71), secs(60)), None);
    assert_eq!(s.errors, 3, "the total is kept");
    assert!(s.last_error.is_some(), "the last error is kept");
    assert_eq!(
        s.on_event(t0 + secs(72), Progress::Changed),
        None,
        "nothing to recover from"
    );
}

#[test]
fn a_single_error_never_makes_the_view_unready() {
    let (t0, mut s) = listed();
    s.on_error(t0, "connection reset".into());
    for at in [1, 30, 44, 45, 61, 200] {
        assert_eq!(s.problem(t0 + secs(at), secs(60)), None, "at {at}s");
        assert_eq!(s.problem(t0 + secs(at), secs(1)), None, "at {at}s");
    }
}

#[test]
fn a_streak_that_goes_quiet_has_ended_and_the_next_error_starts_a_new_one() {
    let (t0, mut s) = listed();
    for i in 0..=7 {
        s.on_error(t0 + secs(10 * i), "timeout".into());
    }
    // Last error at 70s; the watch came back without an event.
    assert!(s.problem(t0 + secs(70 + 45), secs(60)).is_some());
    assert_eq!(s.problem(t0 + secs(70 + 46), secs(60)), None);
    s.on_error(t0 + secs(300), "timeout".into());
    assert_eq!(s.failing_since, Some(t0 + secs(300)));
    assert_eq!(s.streak_errors, 1);
    assert_eq!(s.errors, 9);
    let r = s.on_event(t0 + secs(400), Progress::Changed).unwrap();
    assert_eq!(
        r.failed_for,
        Duration::ZERO,
        "a quiet streak ended at its last error"
    );
}

#[test]
fn a_relist_error_does_not_unlist_a_listed_resource() {
    let (t0, mut s) = listed();
    s.on_event(t0 + secs(1), Progress::Changed);
    s.on_error(t0 + secs(2), "410 Gone".into());
    assert!(s.synced);
}

#[test]
fn errors_are_logged_at_most_every_thirty_seconds_with_the_count_not_logged() {
    let t0 = Instant::now();
    let mut s = WatchState::default();
    let lines: Vec<(u64, ErrorLine)> = (0..65)
        .filter_map(|i| Some((i, s.on_error(t0 + secs(i), "x".into())?)))
        .collect();
    assert_eq!(
        lines,
        vec![
            (
                0,
                ErrorLine {
                    suppressed: 0,
                    failing_for: secs(0)
                }
            ),
            (
                30,
                ErrorLine {
                    suppressed: 29,
                    failing_for: secs(30)
                }
            ),
            (
                60,
                ErrorLine {
                    suppressed: 29,
                    failing_for: secs(60)
                }
            ),
        ]
    );
}

#[test]
fn every_error_is_counted_through_the_hook() {
    let t0 = Instant::now();
    let count = Arc::new(AtomicUsize::new(0));
    let pods = Arc::new(AtomicUsize::new(0));
    let h = {
        let (count, pods) = (count.clone(), pods.clone());
        WatchHealth::new(
            DEFAULT_UNHEALTHY_AFTER,
            Arc::new(move |w| {
                count.fetch_add(1, Ordering::Relaxed);
                if w == Watched::Pods {
                    pods.fetch_add(1, Ordering::Relaxed);
                }
            }),
        )
    };
    for i in 0..5 {
        h.observe_at(Watched::Pods, &err(), t0 + secs(i));
    }
    h.observe_at(Watched::Nodes, &err(), t0);
    h.observe_at(
        Watched::Nodes,
        &ok(watcher::Event::Apply(Pod::default())),
        t0,
    );
    assert_eq!(count.load(Ordering::Relaxed), 6);
    assert_eq!(pods.load(Ordering::Relaxed), 5);
    assert_eq!(h.state(Watched::Pods).unwrap().errors, 5);
    assert_eq!(h.state(Watched::Nodes).unwrap().failing_since, None);
}

#[test]
fn describes_api_statuses_and_watch_errors_briefly() {
    assert_eq!(
        describe(&watcher::Error::WatchError(Box::new(Status {
            code: 410,
            reason: "Expired".into(),
            message: "too old resource version: 1 (2)".into(),
            ..Default::default()
        }))),
        "API server ended the watch: 410 Expired: too old resource version: 1 (2)"
    );
    assert_eq!(
        describe(&watcher::Error::NoResourceVersion),
        "no metadata.resourceVersion in watch result (does resource support watch?)"
    );
}

#[test]
fn the_backoff_starts_at_a_second_and_stays_under_the_quiet_window() {
    use kube::runtime::utils::Backoff;
    let mut b = WatchBackoff::default();
    let waits: Vec<Duration> = (&mut b).take(10).collect();
    assert!(waits[0] >= secs(1) && waits[0] <= Duration::from_millis(1250));
    assert!(waits[1] >= secs(2));
    assert!(waits.iter().all(|w| *w <= Duration::from_millis(12_500)));
    assert!(waits[9] >= secs(10));
    // The longest wait plus a 30 s connect timeout still lands inside the quiet window.
    assert!(Duration::from_millis(12_500) + secs(30) < STREAK_QUIET);
    b.reset();
    assert!(b.next().unwrap() <= Duration::from_millis(1250));
}

#[test]
fn a_cache_is_stale_until_listed_and_after_an_error_until_an_event_or_a_quiet_spell() {
    let t0 = Instant::now();
    let mut w = WatchState::default();
    assert_eq!(w.stale(t0), Some("a cache has not listed yet"));
    w.on_event(t0, Progress::Listed);
    assert_eq!(w.stale(t0), None);
    w.on_error(t0, "connection refused".into());
    assert!(w.stale(t0 + Duration::from_secs(1)).is_some());
    // Resumed silently: current again once no error came for the quiet spell.
    assert_eq!(w.stale(t0 + CURRENT_AFTER_QUIET), None);
    w.on_error(t0 + Duration::from_secs(20), "again".into());
    assert!(w.stale(t0 + Duration::from_secs(21)).is_some());
    w.on_event(t0 + Duration::from_secs(22), Progress::Changed);
    assert_eq!(w.stale(t0 + Duration::from_secs(22)), None);
}

#[test]
fn a_relist_keeps_the_cache_stale_until_its_end_not_its_first_item() {
    let t0 = Instant::now();
    let h = health();
    list_all(&h, t0);
    // The watch fails (410 Gone) and relists: Init, the items, InitDone.
    h.observe_at(Watched::Pods, &err(), t0 + secs(1));
    h.observe_at(Watched::Pods, &ok(watcher::Event::Init), t0 + secs(2));
    let stale = |at: u64| h.state(Watched::Pods).unwrap().stale(t0 + secs(at));
    assert!(stale(2).is_some());
    h.observe_at(
        Watched::Pods,
        &ok(watcher::Event::InitApply(Pod::default())),
        t0 + secs(3),
    );
    assert_eq!(
        stale(3),
        Some("a watch is relisting and its cache still holds the snapshot from before")
    );
    // A relist that takes longer than the quiet spell is still not current.
    h.observe_at(
        Watched::Pods,
        &ok(watcher::Event::InitApply(Pod::default())),
        t0 + secs(30),
    );
    assert!(stale(30).is_some());
    assert!(h.state(Watched::Pods).unwrap().failing_since.is_some());
    h.observe_at(Watched::Pods, &ok(watcher::Event::InitDone), t0 + secs(31));
    assert_eq!(stale(31), None);
    assert_eq!(h.state(Watched::Pods).unwrap().failing_since, None);
}

#[test]
fn a_resumed_watch_is_current_at_its_first_change() {
    let t0 = Instant::now();
    let mut w = WatchState::default();
    w.on_event(t0, Progress::ListStarted);
    w.on_event(t0, Progress::Listed);
    w.on_error(t0 + secs(1), "watch stream failed".into());
    assert!(w.stale(t0 + secs(2)).is_some());
    w.on_event(t0 + secs(2), Progress::Changed);
    assert_eq!(w.stale(t0 + secs(2)), None);
}

#[test]
fn an_advisory_resource_degrades_instead_of_making_the_view_unready() {
    let t0 = Instant::now();
    let h = health().advisory(&[Watched::PodDisruptionBudgets]);
    list_all_but(&h, Some(Watched::PodDisruptionBudgets), t0);
    h.observe_at(Watched::PodDisruptionBudgets, &err(), t0);
    assert_eq!(h.readiness_at(t0 + secs(1)), Ok(()));
    assert!(
        h.degraded_at(t0 + secs(1)).unwrap().starts_with(
            "poddisruptionbudgets: not listed yet (last error 1s ago: list failed: 403"
        )
    );
    h.observe_at(
        Watched::PodDisruptionBudgets,
        &ok(watcher::Event::InitDone),
        t0 + secs(2),
    );
    assert_eq!(h.degraded_at(t0 + secs(2)), None);
    // Not advisory: the same failure makes the view unready and degrades nothing.
    let strict = health();
    strict.observe_at(Watched::PodDisruptionBudgets, &err(), t0);
    assert!(
        strict
            .readiness_at(t0)
            .unwrap_err()
            .contains("poddisruptionbudgets: not listed yet (last error")
    );
    assert_eq!(strict.degraded_at(t0), None);
}
