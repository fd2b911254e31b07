//! The pure half of leader election: what a replica may do with the record it read, judged from
//! when it observed the record change, and client-go's timing constraints.

use super::*;

fn record(holder: &str, renewed_second: i64, lease_seconds: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: (!holder.is_empty()).then(|| holder.to_owned()),
        lease_duration_seconds: Some(lease_seconds),
        renew_time: Some(MicroTime(Timestamp::from_second(renewed_second).unwrap())),
        ..Default::default()
    }
}

/// Follower `b` still sees `a` holding the lease `held` seconds after `t0`, and takes it `free`
/// seconds after.
fn b_takes_over_between(seen: &Observation, t0: Instant, held: u64, free: u64) {
    let at = |secs| t0 + Duration::from_secs(secs);
    assert_eq!(
        seen.judge("b", at(held)),
        Judgement::HeldBy("a".into()),
        "at +{held}s"
    );
    assert_eq!(seen.judge("b", at(free)), Judgement::Take, "at +{free}s");
}

#[tokio::test(start_paused = true)]
async fn a_follower_takes_over_only_after_the_record_stood_still_for_a_whole_lease() {
    let mut seen = Observation::default();
    let t0 = Instant::now();
    seen.observe(&record("a", 100, 15), t0);
    assert_eq!(seen.judge("b", t0), Judgement::HeldBy("a".into()));
    // The same record read again later does not restart the clock.
    seen.observe(&record("a", 100, 15), t0 + Duration::from_secs(10));
    b_takes_over_between(&seen, t0, 14, 15);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_restarts_the_followers_clock() {
    let mut seen = Observation::default();
    let t0 = Instant::now();
    seen.observe(&record("a", 100, 15), t0);
    seen.observe(&record("a", 102, 15), t0 + Duration::from_secs(12));
    b_takes_over_between(&seen, t0, 20, 27);
}

#[tokio::test(start_paused = true)]
async fn the_holders_wall_clock_does_not_matter() {
    // A holder whose clock runs a day behind (or ahead) is judged by when we saw it renew.
    let t0 = Instant::now();
    for skewed in [0, 100, 4_000_000_000] {
        let mut seen = Observation::default();
        seen.observe(&record("a", skewed, 15), t0);
        b_takes_over_between(&seen, t0, 1, 16);
    }
}

#[tokio::test(start_paused = true)]
async fn the_holder_renews_and_a_released_lease_is_free() {
    let t0 = Instant::now();
    let mut seen = Observation::default();
    assert_eq!(seen.judge("a", t0), Judgement::Take);
    seen.observe(&record("a", 100, 15), t0);
    assert_eq!(
        seen.judge("a", t0 + Duration::from_secs(99)),
        Judgement::Renew
    );
    seen.observe(&record("", 100, 15), t0);
    assert_eq!(seen.judge("b", t0), Judgement::Take);
}

#[test]
fn timing_follows_client_go_constraints() {
    let s = Duration::from_secs;
    assert!(Timing::new(s(15), s(10), s(2)).is_ok());
    assert!(Timing::new(s(10), s(10), s(2)).is_err());
    assert!(Timing::new(s(15), s(2), s(2)).is_err());
    assert!(Timing::new(s(15), Duration::from_millis(2_300), s(2)).is_err());
    assert!(Timing::new(s(15), s(10), Duration::ZERO).is_err());
}

#[test]
fn follower_retries_are_jittered_within_client_gos_range() {
    let t = Timing::new(
        Duration::from_secs(15),
        Duration::from_secs(10),
        Duration::from_secs(2),
    )
    .unwrap();
    let waits: Vec<Duration> = (0..200).map(|_| t.jittered_retry()).collect();
    assert!(waits.iter().all(|w| *w >= Duration::from_secs(2)));
    assert!(waits.iter().all(|w| *w <= Duration::from_millis(4_400)));
    let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
    assert!(
        distinct.len() > 50,
        "retries are not jittered: {distinct:?}"
    );
}
