//! Unit tests of the connection caps and the idle and age timers.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum_server::accept::DefaultAcceptor;

/// A stream from a given address (nothing is read or written).
struct From(Option<IpAddr>);

impl PeerAddr for From {
    fn peer_ip(&self) -> Option<IpAddr> {
        self.0
    }
}

fn ip(last: u8) -> Option<IpAddr> {
    Some(IpAddr::from([10, 0, 0, last]))
}

const LONG: Timers = Timers {
    idle: Duration::from_secs(600),
    max_age: Duration::from_secs(600),
    grace: Duration::from_secs(600),
};

/// Timers with this idle timeout and maximum age, and a short grace.
fn timers_of(idle_ms: u64, max_age_ms: u64) -> Timers {
    Timers {
        idle: Duration::from_millis(idle_ms),
        max_age: Duration::from_millis(max_age_ms),
        grace: Duration::from_millis(100),
    }
}

fn limit(
    max: usize,
    reserved: usize,
    per_source: usize,
) -> (ConnectionLimit<DefaultAcceptor>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let caps = Caps {
        max,
        reserved,
        per_source,
    };
    (
        ConnectionLimit::new(DefaultAcceptor::new(), caps, LONG, metrics.clone()),
        metrics,
    )
}

/// `n` connections from `source`, each accepted, open until the result is dropped.
async fn hold(limit: &ConnectionLimit<DefaultAcceptor>, source: u8, n: usize) -> Vec<impl Sized> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(limit.accept(From(ip(source)), ()).await.unwrap());
    }
    held
}

/// A connection from `source` is refused by a cap, counted once under `reason`.
async fn refused_by(
    limit: &ConnectionLimit<DefaultAcceptor>,
    source: u8,
    metrics: &Metrics,
    reason: &str,
) {
    let e = limit.accept(From(ip(source)), ()).await.err().unwrap();
    assert!(is_limit(&e), "{e}");
    let text = metrics.render();
    let counted = format!("resize_guard_connections_refused_total{{reason=\"{reason}\"}} 1");
    assert!(text.contains(&counted), "{text}");
}

#[tokio::test]
async fn one_connection_over_the_limit_is_refused_and_a_closed_one_frees_its_slot() {
    let (limit, metrics) = limit(2, 0, 10);
    let (a, _) = limit.accept(From(ip(1)), ()).await.unwrap();
    let (_b, _) = limit.accept(From(ip(2)), ()).await.unwrap();
    refused_by(&limit, 3, &metrics, "limit").await;
    let text = metrics.render();
    assert!(text.contains("resize_guard_connections_open 2"), "{text}");
    drop(a);
    assert!(limit.accept(From(ip(3)), ()).await.is_ok());
}

#[tokio::test]
async fn one_source_holds_at_most_its_cap_and_others_still_connect() {
    let (limit, metrics) = limit(100, 0, 3);
    let mut held = hold(&limit, 1, 3).await;
    refused_by(&limit, 1, &metrics, "source-limit").await;
    assert!(limit.accept(From(ip(2)), ()).await.is_ok());
    // One closed, that source may connect again.
    held.pop();
    assert!(limit.accept(From(ip(1)), ()).await.is_ok());
}

#[tokio::test]
async fn the_reserved_slots_stay_free_for_a_source_holding_few_connections() {
    // 10 slots, the last 4 for light sources; heavy sources may hold 8 each.
    let (limit, _) = limit(10, 4, 8);
    let _crowd = hold(&limit, 1, 6).await;
    // The shared slots are taken: the crowd's source gets no more, though under its own cap…
    assert!(limit.accept(From(ip(1)), ()).await.is_err());
    // …while a source with no connection (kube-apiserver reconnecting) gets a reserved one, up
    // to LIGHT_SOURCE of them.
    let light = hold(&limit, 9, LIGHT_SOURCE).await;
    assert!(limit.accept(From(ip(9)), ()).await.is_err());
    // Every slot is taken now; an unknown address never takes a reserved one.
    assert!(limit.accept(From(ip(8)), ()).await.is_err());
    drop(light);
    assert!(limit.accept(From(None), ()).await.is_err());
    assert!(limit.accept(From(ip(8)), ()).await.is_ok());
}

fn gone() -> (watch::Sender<()>, watch::Receiver<()>) {
    watch::channel(())
}

/// Counts the graceful closes asked for; aborts are counted from 100 on.
fn closing(activity: &Activity) -> Arc<AtomicUsize> {
    let closed = Arc::new(AtomicUsize::new(0));
    let c = closed.clone();
    activity.set_closer(move |how| {
        let n = match how {
            Close::Graceful => 1,
            Close::Abort => 100,
        };
        c.fetch_add(n, Ordering::SeqCst);
    });
    closed
}

/// A connection whose peer ends it (drops its stream) once a graceful close is asked for: its
/// activity, the closes asked ([`closing`]), and the receiver its timers watch.
fn cooperative() -> (Arc<Activity>, Arc<AtomicUsize>, watch::Receiver<()>) {
    let activity = Arc::new(Activity::new());
    let closed = closing(&activity);
    let (tx, rx) = gone();
    let asked = closed.clone();
    tokio::spawn(async move {
        while asked.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(tx);
    });
    (activity, closed, rx)
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let (activity, closed, rx) = cooperative();
    drop(activity.begin());
    let started = std::time::Instant::now();
    let ended = timers(activity, timers_of(150, 60_000), rx).await;
    assert_eq!(
        ended,
        Some(Ended {
            why: Closed::Idle,
            forced: false
        })
    );
    assert_eq!(
        closed.load(Ordering::SeqCst),
        1,
        "closed gracefully, not aborted"
    );
    let after = started.elapsed();
    assert!(
        after >= Duration::from_millis(150) && after < Duration::from_secs(2),
        "{after:?}"
    );
}

#[tokio::test]
async fn a_request_in_flight_keeps_the_connection_and_its_end_restarts_the_idle_timer() {
    let (activity, closed, rx) = cooperative();
    let request = activity.begin();
    let watching = tokio::spawn(timers(activity.clone(), timers_of(100, 60_000), rx));
    // Three idle periods with the request in flight: still open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(closed.load(Ordering::SeqCst), 0);
    assert!(!watching.is_finished());
    let ended = std::time::Instant::now();
    drop(request);
    assert_eq!(watching.await.unwrap().map(|e| e.why), Some(Closed::Idle));
    assert!(ended.elapsed() >= Duration::from_millis(100));
}

#[tokio::test]
async fn a_busy_connection_is_closed_gracefully_at_its_maximum_age() {
    let (activity, closed, rx) = cooperative();
    let _request = activity.begin();
    let started = std::time::Instant::now();
    let ended = timers(activity, timers_of(50, 200), rx).await;
    assert_eq!(
        ended.map(|e| (e.why, e.forced)),
        Some((Closed::MaxAge, false))
    );
    assert_eq!(closed.load(Ordering::SeqCst), 1);
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn a_connection_still_open_a_grace_after_its_graceful_close_is_closed_outright() {
    // A peer that never lets its answered stream finish (an HTTP/2 window left at 0): the
    // graceful close does not end the connection, so the grace does.
    let activity = Arc::new(Activity::new());
    let closed = closing(&activity);
    drop(activity.begin());
    let (_tx, rx) = gone();
    let started = std::time::Instant::now();
    let ended = timers(activity, timers_of(50, 60_000), rx).await;
    assert_eq!(ended.map(|e| (e.why, e.forced)), Some((Closed::Idle, true)));
    assert_eq!(closed.load(Ordering::SeqCst), 101, "graceful, then aborted");
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn the_timers_end_with_the_connection_and_wait_for_a_first_request_to_close() {
    // No request yet: nothing to close gracefully with, so the timers do not end it…
    let activity = Arc::new(Activity::new());
    let (tx, rx) = gone();
    let watching = tokio::spawn(timers(activity, timers_of(20, 40), rx));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!watching.is_finished());
    // …and they stop when the connection is gone.
    drop(tx);
    assert_eq!(watching.await.unwrap(), None);
}

#[tokio::test]
async fn the_accepted_connection_counts_its_timers_close_and_requests_learn_their_peer() {
    let metrics = Arc::new(Metrics::new());
    let caps = Caps {
        max: 4,
        reserved: 0,
        per_source: 4,
    };
    let limit = ConnectionLimit::new(
        DefaultAcceptor::new(),
        caps,
        timers_of(50, 60_000),
        metrics.clone(),
    );
    let seen = Arc::new(Mutex::new(None));
    let service = {
        let seen = seen.clone();
        tower::service_fn(move |r: http::Request<()>| {
            *seen.lock().unwrap() = r.extensions().get::<Peer>().copied();
            std::future::ready(Ok::<_, std::convert::Infallible>(()))
        })
    };
    let (_stream, mut service) = limit.accept(From(ip(7)), service).await.unwrap();
    tower::ServiceExt::ready(&mut service).await.unwrap();
    let closed = closing(&service.activity);
    tower_service::Service::call(&mut service, http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), ip(7).map(Peer));
    // The stream is kept: the graceful close does not end it, so the grace closes it outright.
    let counted = "resize_guard_connections_closed_total{reason=\"forced\"} 1";
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !metrics.render().contains(counted) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(closed.load(Ordering::SeqCst), 101);
    let text = metrics.render();
    assert!(text.contains(counted), "{text}");
    assert!(
        text.contains("resize_guard_connections_closed_total{reason=\"idle\"} 1"),
        "{text}"
    );
}
