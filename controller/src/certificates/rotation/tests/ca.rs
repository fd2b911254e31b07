//! The CA side of the decision: unusable CA data, expiry, and rotation in three phases across
//! time, with the rotation state read back from the Secret at every step.

use super::*;

#[test]
fn unreadable_ca_secret_data_means_a_new_ca_with_the_problem_logged() {
    let cases: Vec<(Breakage, &str)> = vec![
        (
            Box::new(|s| {
                s.data.insert(CA_CERT.into(), b"garbage".to_vec());
            }),
            "ca.crt/ca.key hold no usable CA: parsing the CA certificate failed",
        ),
        (
            Box::new(|s| {
                s.data.remove(CA_KEY);
            }),
            "the CA Secret has no ca.key",
        ),
        (
            Box::new(|s| {
                s.data.insert(CA_KEY.into(), vec![0xff]);
            }),
            "ca.key is not text",
        ),
    ];
    for (break_it, want) in cases {
        let mut w = World::installed();
        break_it(w.ca_mut());
        let (plan, reason) = only_ca_write(&w.decide(t0()));
        assert_eq!(plan.current, Material::Generate);
        assert!(
            reason.contains(want) && reason.ends_with("generating a new CA"),
            "{reason}"
        );
        // The new CA then replaces caBundle and the leaf.
        let all = w.converge(t0());
        assert_eq!(all.len(), 4, "{all:#?}");
        let ca = w.ca_text(CA_CERT);
        assert_eq!(w.bundles(), vec![ca.clone().into_bytes(); 2]);
        assert!(signed_by(&w.serving_text(TLS_CERT), &ca).unwrap());
    }
}

#[test]
fn a_leaf_posing_as_the_ca_is_not_a_ca() {
    let mut w = World::installed();
    let (cert, key) = (w.serving_text(TLS_CERT), w.serving_text(TLS_KEY));
    w.ca_mut().data.insert(CA_CERT.into(), cert.into_bytes());
    w.ca_mut().data.insert(CA_KEY.into(), key.into_bytes());
    let (_, reason) = only_ca_write(&w.decide(t0()));
    assert!(reason.contains("is not a CA certificate"), "{reason}");
}

#[test]
fn an_expired_ca_is_replaced() {
    let mut w = World::installed();
    // Without checks for five hours, the CA expires (rotation was never given a chance).
    let late = t0() + 300 * MIN;
    let (plan, reason) = only_ca_write(&w.decide(late));
    assert_eq!(plan.current, Material::Generate);
    assert!(reason.contains("expired at"), "{reason}");
    w.converge(late);
    assert!(w.decide(late).actions.is_empty());
}

/// What a CA write brings about: the CA Secret, then the caBundle of both configurations.
const NEW_CA_IN_BOTH_BUNDLES: &[(Repair, Option<ConfigurationKind>)] = &[
    (Repair::Ca, None),
    (Repair::CaBundle, Some(ConfigurationKind::Mutating)),
    (Repair::CaBundle, Some(ConfigurationKind::Validating)),
];

/// The next phase of a rotation begins one overlap (10 minutes) after `since` and not a second
/// before (the previous phase still holds then): its time, and the CA write decided then.
fn next_phase(w: &World, since: SystemTime) -> (SystemTime, CaPlan, String) {
    let at = since + 10 * MIN;
    let before = w.decide(at - Duration::from_secs(1));
    assert!(before.actions.is_empty(), "a second early: {before:#?}");
    let (plan, reason) = only_ca_write(&w.decide(at));
    (at, plan, reason)
}

/// Phase 1 at 2/3 of the CA's life, phase 2 `overlap` later, phase 3 `overlap` after that;
/// every step is decided from what is stored, so a restarted or new leader continues it.
#[test]
fn a_ca_rotates_in_three_phases_without_a_moment_of_distrust() {
    let mut w = World::installed();
    let old_ca = w.ca_text(CA_CERT);
    // The CA lives 300 minutes from t0: its successor is due once 100 minutes are left.
    let t1 = t0() + 199 * MIN;
    let renewals = w.converge(t1);
    assert_eq!(
        kinds(&renewals),
        vec![(Repair::Serving, None)],
        "only the leaf so far"
    );

    // Phase 1: a new CA, trusted next to the old one; the old one still signs.
    let t2 = t0() + 201 * MIN;
    let (plan, reason) = only_ca_write(&w.decide(t2));
    assert_eq!(
        plan.current,
        Material::Keep(Authority::from_pem(&old_ca, &w.ca_text(CA_KEY)).unwrap())
    );
    assert_eq!(plan.next, Some(Material::Generate));
    assert_eq!(plan.rotation_since, Some(t2));
    assert!(reason.contains("past 2/3 of its lifetime"), "{reason}");
    let leaf_before = w.serving_text(TLS_CERT);
    let all = w.converge(t2);
    assert_eq!(kinds(&all), NEW_CA_IN_BOTH_BUNDLES);
    let new_ca = w.ca_text(NEXT_CA_CERT);
    let both = format!("{old_ca}{new_ca}");
    assert_eq!(
        w.bundles(),
        vec![both.clone().into_bytes(); 2],
        "old first, then new"
    );
    assert_eq!(
        w.serving_text(TLS_CERT),
        leaf_before,
        "the leaf is not touched in phase 1"
    );
    assert_eq!(w.ca().annotations[ROTATION_SINCE], rfc3339(t2));

    // Phase 2: the new CA signs; the old one stays trusted; the leaf is re-issued.
    let (t3, plan, reason) = next_phase(&w, t2);
    assert_eq!(plan.previous.as_deref(), Some(old_ca.as_str()));
    assert_eq!(plan.next, None);
    assert!(reason.contains("it signs from now on"), "{reason}");
    let all = w.converge(t3);
    assert_eq!(
        kinds(&all),
        vec![(Repair::Ca, None), (Repair::Serving, None)],
        "caBundle unchanged"
    );
    assert_eq!(w.ca_text(CA_CERT), new_ca);
    assert_eq!(w.ca_text(PREVIOUS_CA_CERT), old_ca);
    assert_eq!(w.bundles(), vec![both.into_bytes(); 2]);
    assert!(signed_by(&w.serving_text(TLS_CERT), &new_ca).unwrap());

    // Phase 3: the old CA leaves the bundle another overlap later.
    let (t4, plan, reason) = next_phase(&w, t3);
    assert_eq!((plan.previous, plan.rotation_since), (None, None));
    assert!(reason.contains("removing it"), "{reason}");
    let all = w.converge(t4);
    assert_eq!(kinds(&all), NEW_CA_IN_BOTH_BUNDLES);
    assert_eq!(w.bundles(), vec![new_ca.clone().into_bytes(); 2]);
    assert!(!w.ca().has(PREVIOUS_CA_CERT) && !w.ca().annotations.contains_key(ROTATION_SINCE));
    assert!(w.decide(t4).actions.is_empty());
}

#[test]
fn a_rotation_without_its_timestamp_restarts_the_overlap() {
    let (mut w, t2) = World::rotating();
    w.ca_mut().annotations.remove(ROTATION_SINCE);
    let later = t2 + 30 * MIN;
    let (plan, reason) = only_ca_write(&w.decide(later));
    assert!(
        matches!(plan.next, Some(Material::Keep(_))),
        "the next CA is kept"
    );
    assert_eq!(plan.rotation_since, Some(later));
    assert!(reason.contains("restarting the overlap"), "{reason}");

    w.ca_mut()
        .annotations
        .insert(ROTATION_SINCE.into(), "garbage".into());
    let (plan, _) = only_ca_write(&w.decide(later));
    assert_eq!(plan.rotation_since, Some(later));
}

#[test]
fn an_unreadable_next_ca_is_dropped_and_the_rotation_starts_over() {
    let (mut w, t2) = World::rotating();
    w.ca_mut()
        .data
        .insert(NEXT_CA_KEY.into(), b"garbage".to_vec());
    let t = t2 + MIN;
    let (plan, reason) = only_ca_write(&w.decide(t));
    assert_eq!(plan.next, None);
    assert!(reason.contains("dropping the next CA"), "{reason}");
    let all = w.converge(t);
    assert!(w.ca().has(NEXT_CA_CERT), "a new successor: {all:#?}");
    assert_eq!(w.ca().annotations[ROTATION_SINCE], rfc3339(t));
}

#[test]
fn an_unusable_current_ca_with_a_usable_successor_promotes_it_at_once() {
    let (mut w, t2) = World::rotating();
    let next = w.ca_text(NEXT_CA_CERT);
    w.ca_mut().data.insert(CA_CERT.into(), b"garbage".to_vec());
    let (plan, reason) = only_ca_write(&w.decide(t2));
    assert!(matches!(&plan.current, Material::Keep(a) if a.cert_pem() == next));
    assert!(reason.ends_with("promoting the next CA now"), "{reason}");
}

#[test]
fn a_garbage_previous_ca_is_dropped() {
    let (mut w, t2) = World::rotating();
    w.converge(t2 + 10 * MIN);
    w.ca_mut()
        .data
        .insert(PREVIOUS_CA_CERT.into(), b"garbage".to_vec());
    let (plan, reason) = only_ca_write(&w.decide(t2 + 11 * MIN));
    assert_eq!((plan.previous, plan.rotation_since), (None, None));
    assert!(reason.contains("dropping the previous CA"), "{reason}");
}

#[test]
fn a_leaf_capped_at_its_cas_end_is_not_renewed_in_vain() {
    let mut w = World::installed();
    // A 600-minute leaf issued at t0+100m is capped at the CA's end (t0+300m); at t0+250m it
    // has less than a third of its 205 minutes left, but a new one would end at t0+300m too.
    w.expected.spec.leaf_validity = 600 * MIN;
    let ca = Authority::from_pem(&w.ca_text(CA_CERT), &w.ca_text(CA_KEY)).unwrap();
    let leaf = ca.sign(&w.expected.spec, t0() + 100 * MIN).unwrap();
    let secret = serving_secret("ns", "tls", &leaf, ca.cert_pem(), None);
    w.observed.serving = Some(Stored::from_secret(&secret));
    assert_eq!(inspect(&leaf.cert_pem).unwrap().not_after, ca.not_after());
    let late = t0() + 250 * MIN;
    // The CA itself is due for rotation, which is what happens; the leaf is left alone.
    let d = w.decide(late);
    assert_eq!(kinds(&d.actions), vec![(Repair::Ca, None)]);
    w.apply(late, &d.actions);
    let d = w.decide(late);
    assert_eq!(
        kinds(&d.actions),
        vec![
            (Repair::CaBundle, Some(ConfigurationKind::Mutating)),
            (Repair::CaBundle, Some(ConfigurationKind::Validating)),
        ],
        "no leaf renewal while capped"
    );
}
