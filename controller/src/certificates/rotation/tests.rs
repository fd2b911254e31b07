//! The decision table, case by case, with real certificates issued at chosen times. `World`
//! carries actions out the way the actuator does (generate, write the Secret layout, set the
//! bundle) but in memory, so a sequence of decisions can be followed across time.

use std::net::{IpAddr, Ipv4Addr};

use resize_guard_certs::signed_by;

use super::*;
use crate::certificates::secrets::{
    CA_CERT, CA_KEY, CaContents, NEXT_CA_CERT, NEXT_CA_KEY, PREVIOUS_CA_CERT, ROTATION_SINCE,
    TLS_KEY, ca_secret, rfc3339, serving_secret,
};

const MIN: Duration = Duration::from_secs(60);

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000)
}

fn expected() -> Expected {
    let mut spec = CertSpec::for_service("resize-guard-webhook", "resize-guard");
    spec.ip_addresses = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    spec.ca_validity = 300 * MIN;
    spec.leaf_validity = 60 * MIN;
    Expected {
        spec,
        overlap: 10 * MIN,
    }
}

fn configuration(kind: ConfigurationKind, name: &str, bundle: Option<&[u8]>) -> Configuration {
    Configuration {
        kind,
        webhooks: vec![(name.to_owned(), bundle.map(<[u8]>::to_vec))],
    }
}

/// Both configurations, as shipped: no caBundle.
fn shipped() -> Vec<Configuration> {
    vec![
        configuration(ConfigurationKind::Mutating, "mutate.resize-guard.io", None),
        configuration(
            ConfigurationKind::Validating,
            "validate.resize-guard.io",
            None,
        ),
    ]
}

struct World {
    observed: Observed,
    expected: Expected,
}

impl World {
    fn new(configurations: Vec<Configuration>) -> World {
        World {
            observed: Observed {
                ca: None,
                serving: None,
                configurations,
            },
            expected: expected(),
        }
    }

    fn decide(&self, now: SystemTime) -> Rotation {
        decide(now, &self.observed, &self.expected)
    }

    /// Carries `actions` out at `now`.
    fn apply(&mut self, now: SystemTime, actions: &[CertWrite]) {
        for action in actions {
            match action {
                CertWrite::WriteCa { plan, .. } => {
                    let validity = self.expected.spec.ca_validity;
                    let contents = CaContents::of(plan, validity, now).unwrap();
                    let secret = ca_secret("resize-guard", "resize-guard-ca", &contents, None);
                    self.observed.ca = Some(Stored::from_secret(&secret));
                }
                CertWrite::IssueLeaf { signer, .. } => {
                    let leaf = signer.sign(&self.expected.spec, now).unwrap();
                    let secret = serving_secret(
                        "resize-guard",
                        "resize-guard-webhook-tls",
                        &leaf,
                        signer.cert_pem(),
                        None,
                    );
                    self.observed.serving = Some(Stored::from_secret(&secret));
                }
                CertWrite::SetCaBundle {
                    configuration,
                    bundle,
                    ..
                } => {
                    for c in &mut self.observed.configurations {
                        if c.kind == *configuration {
                            for (_, b) in &mut c.webhooks {
                                *b = Some(bundle.as_bytes().to_vec());
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decides and applies until nothing is left to do; returns every action taken.
    fn converge(&mut self, now: SystemTime) -> Vec<CertWrite> {
        let mut all = Vec::new();
        for _ in 0..6 {
            let d = self.decide(now);
            if d.actions.is_empty() {
                return all;
            }
            self.apply(now, &d.actions);
            all.extend(d.actions);
        }
        panic!("no convergence: {all:#?}");
    }

    fn ca(&self) -> &Stored {
        self.observed.ca.as_ref().unwrap()
    }

    /// The stored CA Secret, to damage it.
    fn ca_mut(&mut self) -> &mut Stored {
        self.observed.ca.as_mut().unwrap()
    }

    fn ca_text(&self, key: &str) -> String {
        self.ca().text(key).unwrap().to_owned()
    }

    fn serving_text(&self, key: &str) -> String {
        self.observed
            .serving
            .as_ref()
            .unwrap()
            .text(key)
            .unwrap()
            .to_owned()
    }

    fn bundles(&self) -> Vec<Vec<u8>> {
        self.observed
            .configurations
            .iter()
            .flat_map(|c| {
                c.webhooks
                    .iter()
                    .map(|(_, b)| b.clone().unwrap_or_default())
            })
            .collect()
    }

    /// A healthy install at t0.
    fn installed() -> World {
        let mut w = World::new(shipped());
        w.converge(t0());
        w
    }

    /// A healthy install converged at t0+201m, in phase 1 of a CA rotation; with that time.
    fn rotating() -> (World, SystemTime) {
        let mut w = World::installed();
        let t2 = t0() + 201 * MIN;
        w.converge(t2);
        (w, t2)
    }
}

/// Damage done to a stored Secret.
type Breakage = Box<dyn Fn(&mut Stored)>;

fn kinds(actions: &[CertWrite]) -> Vec<(Repair, Option<ConfigurationKind>)> {
    actions
        .iter()
        .map(|a| match a {
            CertWrite::SetCaBundle { configuration, .. } => (a.what(), Some(*configuration)),
            _ => (a.what(), None),
        })
        .collect()
}

fn only_leaf_reason(d: &Rotation) -> String {
    match d.actions.as_slice() {
        [CertWrite::IssueLeaf { reason, .. }] => reason.clone(),
        other => panic!("expected one IssueLeaf, got {other:#?}"),
    }
}

fn only_ca_write(d: &Rotation) -> (CaPlan, String) {
    match d.actions.as_slice() {
        [CertWrite::WriteCa { plan, reason }] => (plan.clone(), reason.clone()),
        other => panic!("expected one WriteCa, got {other:#?}"),
    }
}

mod ca;

#[test]
fn a_fresh_install_creates_the_ca_then_the_leaf_and_both_ca_bundles() {
    let mut w = World::new(shipped());
    let first = w.decide(t0());
    let (plan, reason) = only_ca_write(&first);
    assert_eq!(plan.current, Material::Generate);
    assert_eq!(
        (plan.next, plan.previous, plan.rotation_since),
        (None, None, None)
    );
    assert!(reason.contains("the CA Secret does not exist"), "{reason}");
    w.apply(t0(), &first.actions);

    let second = w.decide(t0());
    assert_eq!(
        kinds(&second.actions),
        vec![
            (Repair::CaBundle, Some(ConfigurationKind::Mutating)),
            (Repair::CaBundle, Some(ConfigurationKind::Validating)),
            (Repair::Serving, None),
        ],
        "caBundle first, then the leaf"
    );
    assert!(second.actions[0].reason().contains("has no caBundle"));
    assert!(second.actions[2].reason().contains("does not exist"));
    w.apply(t0(), &second.actions);

    let ca = w.ca_text(CA_CERT);
    assert_eq!(
        w.bundles(),
        vec![ca.clone().into_bytes(); 2],
        "caBundle is ca.crt"
    );
    assert!(signed_by(&w.serving_text(TLS_CERT), &ca).unwrap());
    assert_eq!(w.serving_text(CA_CERT), ca);
    let d = w.decide(t0());
    assert!(d.actions.is_empty(), "{:#?}", d.actions);
    assert_eq!(d.ca_expiry, Some(t0() + 300 * MIN));
    assert_eq!(d.serving_expiry, Some(t0() + 60 * MIN));
}

#[test]
fn a_healthy_install_needs_nothing() {
    let w = World::installed();
    for later in [t0(), t0() + 5 * MIN, t0() + 39 * MIN] {
        assert!(w.decide(later).actions.is_empty(), "at {later:?}");
    }
}

#[test]
fn a_wiped_ca_bundle_is_set_again_on_that_configuration_only() {
    let mut w = World::installed();
    w.observed.configurations[1].webhooks[0].1 = None;
    let d = w.decide(t0());
    assert_eq!(
        kinds(&d.actions),
        vec![(Repair::CaBundle, Some(ConfigurationKind::Validating))]
    );
    let CertWrite::SetCaBundle {
        webhooks,
        bundle,
        reason,
        ..
    } = &d.actions[0]
    else {
        unreachable!()
    };
    assert_eq!(webhooks, &vec!["validate.resize-guard.io".to_owned()]);
    assert_eq!(bundle, &w.ca_text(CA_CERT));
    assert_eq!(reason, "webhook validate.resize-guard.io has no caBundle");
}

#[test]
fn a_garbage_or_foreign_ca_bundle_is_replaced() {
    let mut w = World::installed();
    w.observed.configurations[0].webhooks[0].1 = Some(b"garbage".to_vec());
    let d = w.decide(t0());
    assert_eq!(
        kinds(&d.actions),
        vec![(Repair::CaBundle, Some(ConfigurationKind::Mutating))]
    );
    assert!(
        d.actions[0].reason().contains("not PEM"),
        "{}",
        d.actions[0].reason()
    );

    let other = Authority::issue(MIN * 60, t0()).unwrap();
    w.observed.configurations[0].webhooks[0].1 = Some(other.cert_pem().as_bytes().to_vec());
    let d = w.decide(t0());
    assert!(
        d.actions[0].reason().contains("other certificates"),
        "{}",
        d.actions[0].reason()
    );
}

#[test]
fn every_webhook_of_a_configuration_is_checked() {
    let mut w = World::installed();
    let ca = w.ca_text(CA_CERT);
    w.observed.configurations[1]
        .webhooks
        .push(("second.resize-guard.io".into(), Some(b"stale".to_vec())));
    let d = w.decide(t0());
    let CertWrite::SetCaBundle {
        webhooks, bundle, ..
    } = &d.actions[0]
    else {
        panic!("{:#?}", d.actions)
    };
    assert_eq!(webhooks.len(), 2);
    assert_eq!(bundle, &ca);
}

#[test]
fn a_validating_only_install_has_nothing_to_patch_on_the_mutating_side() {
    let mut w = World::new(vec![configuration(
        ConfigurationKind::Validating,
        "validate.resize-guard.io",
        None,
    )]);
    let all = w.converge(t0());
    assert_eq!(
        kinds(&all),
        vec![
            (Repair::Ca, None),
            (Repair::CaBundle, Some(ConfigurationKind::Validating)),
            (Repair::Serving, None),
        ]
    );
    let mut none = World::new(Vec::new());
    assert_eq!(
        kinds(&none.converge(t0())),
        vec![(Repair::Ca, None), (Repair::Serving, None)]
    );
}

#[test]
fn a_leaf_is_renewed_once_two_thirds_of_its_lifetime_have_passed() {
    let w = World::installed();
    // Issued at t0 for 60 minutes: renewed when 20 minutes are left.
    assert!(
        w.decide(t0() + 40 * MIN - Duration::from_secs(1))
            .actions
            .is_empty()
    );
    let reason = only_leaf_reason(&w.decide(t0() + 40 * MIN));
    assert!(
        reason.contains("less than a third of its lifetime"),
        "{reason}"
    );
    let reason = only_leaf_reason(&w.decide(t0() + 61 * MIN));
    assert!(reason.contains("expired at"), "{reason}");
}

#[test]
fn a_renewed_leaf_keeps_the_ca_and_the_ca_bundle() {
    let mut w = World::installed();
    let (ca, bundles) = (w.ca_text(CA_CERT), w.bundles());
    let old_leaf = w.serving_text(TLS_CERT);
    let all = w.converge(t0() + 45 * MIN);
    assert_eq!(kinds(&all), vec![(Repair::Serving, None)]);
    assert_ne!(w.serving_text(TLS_CERT), old_leaf);
    assert_eq!((w.ca_text(CA_CERT), w.bundles()), (ca, bundles));
}

#[test]
fn a_leaf_with_other_names_is_reissued() {
    let mut w = World::installed();
    w.expected.spec.dns_names.push("hook.example.com".into());
    let reason = only_leaf_reason(&w.decide(t0()));
    assert!(reason.contains("must name exactly"), "{reason}");
    assert!(reason.contains("hook.example.com"), "{reason}");
    w.converge(t0());
    let info = inspect(&w.serving_text(TLS_CERT)).unwrap();
    assert!(info.dns_names.contains(&"hook.example.com".to_owned()));
    // Fewer names, or another IP, are mismatches too.
    w.expected.spec.ip_addresses = vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))];
    assert!(only_leaf_reason(&w.decide(t0())).contains("10.0.0.1"));
}

#[test]
fn a_leaf_signed_by_another_ca_is_reissued_from_the_current_one() {
    let mut w = World::installed();
    let other = Authority::issue(300 * MIN, t0()).unwrap();
    let foreign = other.sign(&w.expected.spec, t0()).unwrap();
    let secret = serving_secret("ns", "tls", &foreign, &w.ca_text(CA_CERT), None);
    w.observed.serving = Some(Stored::from_secret(&secret));
    let reason = only_leaf_reason(&w.decide(t0()));
    assert!(reason.contains("not by the current CA"), "{reason}");
    w.converge(t0());
    assert!(signed_by(&w.serving_text(TLS_CERT), &w.ca_text(CA_CERT)).unwrap());
}

#[test]
fn an_unusable_serving_secret_is_replaced_with_the_reason_named() {
    let cases: Vec<(Breakage, &str)> = vec![
        (
            Box::new(|s| s.type_ = Some("Opaque".into())),
            "has type Opaque",
        ),
        (
            Box::new(|s| {
                s.data.remove(TLS_KEY);
            }),
            "has no tls.key",
        ),
        (
            Box::new(|s| {
                s.data.insert(TLS_CERT.into(), b"garbage".to_vec());
            }),
            "tls.crt: parsing the certificate failed",
        ),
        (
            Box::new(|s| {
                s.data.insert(TLS_KEY.into(), b"garbage".to_vec());
            }),
            "tls.key: parsing the private key failed",
        ),
        (
            Box::new(|s| {
                s.data.insert(CA_CERT.into(), b"stale".to_vec());
            }),
            "ca.crt is not the current CA",
        ),
    ];
    for (break_it, want) in cases {
        let mut w = World::installed();
        break_it(w.observed.serving.as_mut().unwrap());
        let reason = only_leaf_reason(&w.decide(t0()));
        assert!(reason.contains(want), "want {want:?} in {reason:?}");
    }
    let mut w = World::installed();
    let other = World::installed();
    let foreign_key = other.serving_text(TLS_KEY);
    w.observed
        .serving
        .as_mut()
        .unwrap()
        .data
        .insert(TLS_KEY.into(), foreign_key.into_bytes());
    assert!(only_leaf_reason(&w.decide(t0())).contains("is not the key of tls.crt"));
}

#[test]
fn renewal_counts_the_configured_lifetime_not_the_backdated_not_before() {
    // A 30 s leaf is backdated 5 minutes: renewal must still wait ~20 s, not start at once.
    let now = t0();
    let (nb, na) = (now - 5 * MIN, now + Duration::from_secs(30));
    let v = Duration::from_secs(30);
    assert!(!renewal_due(nb, na, v, now));
    assert!(!renewal_due(nb, na, v, now + Duration::from_secs(19)));
    assert!(renewal_due(nb, na, v, now + Duration::from_secs(20)));
}

#[test]
fn durations_read_like_flags() {
    assert_eq!(human(Duration::from_secs(3600)), "1h");
    assert_eq!(human(Duration::from_secs(90)), "1m30s");
    assert_eq!(human(Duration::from_secs(30)), "30s");
    assert_eq!(human(Duration::from_secs(9000)), "2h30m");
}
