//! Property tests: the invariants every plan, repair and classification must keep, on generated
//! nodes and pods.
//!
//! A property that checks only inside a branch (`if let Ok(plan)`, `if let Verdict::Denied`)
//! passes without testing anything when the generator never reaches the branch, so those run
//! through [`check`], which also fails when too few generated cases reached it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::fixture::{INSTALL_NAMESPACE, PodBuilder, container, context, node};
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::pod::Controller;
use resize_guard_policy::policy::{PdbMode, Policy};
use resize_guard_policy::repair::repair;
use resize_guard_policy::resources::Resources;
use resize_guard_policy::upstream::qos::{QosClass, current_qos_class, spec_qos_class};
use resize_guard_policy::upstream::quantity::parse_nanos;
use resize_guard_policy::upstream::requests::{Accounting, pod_requests};
use resize_guard_policy::victims::{Candidates, PreemptionPlan, Preemptor, select_victims};
use resize_guard_policy::{Verdict, classify};

#[derive(Debug, Clone)]
struct PodSpecGen {
    priority: i32,
    cpu: u32,
    mem_mi: u32,
    start: i64,
    terminating: bool,
    protected: bool,
    /// No controlling owner: never a victim under the default policy.
    bare: bool,
    namespace: &'static str,
}

/// Another pod on the node: priority -300 to 300, Guaranteed at `cpu` millicores and `mem_mi` Mi.
fn pod_gen(cpu: Range<u32>, mem_mi: Range<u32>) -> impl Strategy<Value = PodSpecGen> {
    (
        -3..4i32,
        cpu,
        mem_mi,
        0..100i64,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::sample::select(vec!["apps", "batch", "kube-system"]),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(p, cpu, mem_mi, start, terminating, protected, namespace, bare)| PodSpecGen {
                priority: p * 100,
                cpu,
                mem_mi,
                start,
                terminating,
                protected,
                bare,
                namespace,
            },
        )
}

fn build(i: usize, g: &PodSpecGen) -> Pod {
    let mut b = PodBuilder::new(g.namespace, &format!("p{i}"))
        .node("n1")
        .priority(g.priority)
        .container(container("c").guaranteed(&format!("{}m", g.cpu), &format!("{}Mi", g.mem_mi)))
        .running(g.start);
    if g.terminating {
        b = b.terminating();
    }
    if g.protected {
        b = b.label("resize-guard.io/protected", "true");
    }
    if !g.bare {
        b = b.owned_by("ReplicaSet");
    }
    b.build()
}

#[derive(Debug, Clone)]
struct Scenario {
    alloc_cpu: u32,
    alloc_mem_mi: u32,
    preemptor_priority: i32,
    from_cpu: u32,
    to_cpu: u32,
    to_mem_mi: u32,
    others: Vec<PodSpecGen>,
    best_effort_pdb: bool,
}

/// Any node and resize: half the cases from [`anything`], half [`crowded`].
fn scenario() -> impl Strategy<Value = Scenario> {
    prop_oneof![anything(), crowded()]
}

/// Any node, pods and resize: mostly a resize that fits, or one no plan can help (an overfull
/// node); a plan with victims in about one case in sixteen.
fn anything() -> impl Strategy<Value = Scenario> {
    (
        1000..8000u32,
        1024..16384u32,
        -3..4i32,
        10..1000u32,
        10..4000u32,
        64..4096u32,
        prop::collection::vec(pod_gen(10..1500, 1..1024), 0..30),
        any::<bool>(),
    )
        .prop_map(|(ac, am, pp, f, t, tm, others, be)| Scenario {
            alloc_cpu: ac,
            alloc_mem_mi: am,
            preemptor_priority: pp * 100,
            from_cpu: f,
            to_cpu: t,
            to_mem_mi: tm,
            others,
            best_effort_pdb: be,
        })
}

/// A node full but for `slack` and a higher-priority pod growing by more than that, by a share of
/// what the other pods hold: mostly a plan with victims, sometimes none (too much of the room is
/// held at or above its priority, protected or already terminating).
fn crowded() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(pod_gen(10..600, 1..256), 1..15),
        2..5i32,
        10..500u32,
        0..200u32,
        1..60u32,
        any::<bool>(),
    )
        .prop_map(|(others, pp, from, slack, percent, be)| {
            let held: u32 = others.iter().map(|o| o.cpu).sum();
            Scenario {
                alloc_cpu: held + from + slack,
                alloc_mem_mi: 16384,
                preemptor_priority: pp * 100,
                from_cpu: from,
                to_cpu: from + slack + 1 + held * percent / 100,
                to_mem_mi: 64,
                others,
                best_effort_pdb: be,
            }
        })
}

fn world(s: &Scenario) -> (Pod, NodeLedger, Policy) {
    let resizer = PodBuilder::new("apps", "resizer")
        .node("n1")
        .priority(s.preemptor_priority)
        .container(container("c").guaranteed(&format!("{}m", s.from_cpu), "64Mi"))
        .running(0)
        .resize("c", "cpu", &format!("{}m", s.to_cpu))
        .resize("c", "memory", &format!("{}Mi", s.to_mem_mi))
        .build();
    let mut pods = vec![resizer.clone()];
    pods.extend(s.others.iter().enumerate().map(|(i, g)| build(i, g)));
    let n = node(
        "n1",
        &format!("{}m", s.alloc_cpu),
        &format!("{}Mi", s.alloc_mem_mi),
    );
    let mut policy = Policy::default();
    policy.preemption.max_victims_per_resize = 100;
    if s.best_effort_pdb {
        policy.preemption.pdb = PdbMode::BestEffort;
    }
    (resizer.clone(), NodeLedger::new(&n, &pods), policy)
}

fn preemptor(p: &Pod) -> Preemptor {
    Preemptor::new(p, p.spec.as_ref().unwrap(), p.status.as_ref())
}

/// Cases per property.
const CASES: u32 = 512;

/// Runs `property` on [`CASES`] values of `strategy`, like `proptest!`, and then fails unless at
/// least `min_percent` of the cases reached what it checks (`property` returns whether the case
/// did): a check behind a branch the generator rarely reaches tests nothing.
fn check<S: Strategy>(
    strategy: S,
    min_percent: usize,
    property: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) {
    let (cases, reached) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = TestRunner::new(Config {
        source_file: Some(file!()),
        ..Config::with_cases(CASES)
    });
    let result = runner.run(&strategy, |value| {
        cases.fetch_add(1, Ordering::Relaxed);
        if property(value)? {
            reached.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (cases, reached) = (cases.into_inner(), reached.into_inner());
    assert!(
        reached * 100 >= cases * min_percent,
        "only {reached} of {cases} generated cases reached the property's branch (at least \
         {min_percent}% must): the generator no longer exercises it"
    );
}

/// The least share of generated scenarios whose plan must have victims (about a third do; the
/// others have no plan, or need none).
const PLANNED_PERCENT: usize = 20;

/// The scenario's resizing pod, node, policy and plan (if any).
fn planned(s: &Scenario) -> (Preemptor, NodeLedger, Policy, Option<PreemptionPlan>) {
    let (resizer, ledger, policy) = world(s);
    let p = preemptor(&resizer);
    let plan = select_victims(
        &p,
        &ledger,
        &Budgets::default(),
        &policy,
        INSTALL_NAMESPACE,
        Candidates::All,
    )
    .ok();
    (p, ledger, policy, plan)
}

/// What the other pods that stay (not terminating, not victims) hold.
fn remaining(p: &Preemptor, ledger: &NodeLedger, plan: &PreemptionPlan) -> Resources {
    ledger
        .others(&p.key.uid)
        .filter(|e| !e.terminating && !plan.victims.iter().any(|v| v.key == e.key))
        .map(|e| e.held)
        .sum()
}

#[test]
fn victims_are_strictly_lower_priority_and_never_protected() {
    check(scenario(), PLANNED_PERCENT, |s| {
        let (p, ledger, policy, Some(plan)) = planned(&s) else {
            return Ok(false);
        };
        let protected = &policy.preemption.protected_selector.0;
        for v in &plan.victims {
            prop_assert!(v.priority < s.preemptor_priority);
            let e = ledger.entry(&v.key.uid).unwrap();
            prop_assert!(!e.terminating);
            prop_assert!(v.key.namespace != "kube-system");
            prop_assert!(!protected.matches(e.labels.as_deref()));
            prop_assert!(
                e.controller != Controller::None,
                "a bare pod is no victim by default"
            );
            prop_assert!(v.key.uid != p.key.uid);
        }
        Ok(!plan.victims.is_empty())
    });
}

#[test]
fn removing_the_victims_makes_the_resize_fit() {
    check(scenario(), PLANNED_PERCENT, |s| {
        let (p, ledger, _, Some(plan)) = planned(&s) else {
            return Ok(false);
        };
        prop_assert!((p.request + remaining(&p, &ledger, &plan)).fits_in(ledger.allocatable));
        Ok(true)
    });
}

#[test]
fn every_victim_is_necessary() {
    check(scenario(), PLANNED_PERCENT, |s| {
        let (p, ledger, _, Some(plan)) = planned(&s) else {
            return Ok(false);
        };
        let remaining = remaining(&p, &ledger, &plan);
        for v in &plan.victims {
            prop_assert!(
                !(p.request + remaining + v.held).fits_in(ledger.allocatable),
                "victim {} was not needed",
                v.key
            );
        }
        Ok(!plan.victims.is_empty())
    });
}

#[test]
fn a_repaired_resize_keeps_the_qos_class() {
    let cpu = 1..4000u32;
    let mem = 1..4096u32;
    let change = (
        prop::option::of(1..4000u32),
        prop::option::of(1..4000u32),
        prop::option::of(1..4096u32),
        prop::option::of(1..4096u32),
    );
    // Reached: the resize leaves Guaranteed, so there is something to repair (nine cases in ten).
    check((cpu, mem, change), 50, |(cpu, mem, change)| {
        let (new_req_cpu, new_lim_cpu, new_req_mem, new_lim_mem) = change;
        let old = PodBuilder::new("ns", "p")
            .container(container("c").guaranteed(&format!("{cpu}m"), &format!("{mem}Mi")))
            .build();
        let mut new = old.clone();
        {
            let r = new.spec.as_mut().unwrap().containers[0]
                .resources
                .as_mut()
                .unwrap();
            let (req, lim) = (r.requests.as_mut().unwrap(), r.limits.as_mut().unwrap());
            if let Some(v) = new_req_cpu {
                req.insert("cpu".into(), Quantity(format!("{v}m")));
            }
            if let Some(v) = new_lim_cpu {
                lim.insert("cpu".into(), Quantity(format!("{v}m")));
            }
            if let Some(v) = new_req_mem {
                req.insert("memory".into(), Quantity(format!("{v}Mi")));
            }
            if let Some(v) = new_lim_mem {
                lim.insert("memory".into(), Quantity(format!("{v}Mi")));
            }
        }
        let (old_spec, new_spec) = (old.spec.as_ref().unwrap(), new.spec.as_ref().unwrap());
        if spec_qos_class(new_spec) == QosClass::Guaranteed {
            prop_assert!(repair(old_spec, QosClass::Guaranteed, new_spec).is_none());
            return Ok(false);
        }
        let fix = repair(old_spec, QosClass::Guaranteed, new_spec);
        prop_assert!(fix.is_some());
        let mut repaired = new_spec.clone();
        fix.unwrap().apply(&mut repaired);
        prop_assert_eq!(spec_qos_class(&repaired), QosClass::Guaranteed);
        Ok(true)
    });
}

#[test]
fn classification_never_panics_on_arbitrary_pods() {
    let inputs = (
        prop::collection::vec("[0-9a-zA-Z.+-]{0,8}", 8),
        prop::collection::vec(prop::option::of("Deferred|Infeasible|[a-z]{0,4}"), 0..3),
        scenario(),
        any::<bool>(),
    );
    // Reached: the verdict is Denied, whose cause (an invalid quantity) is checked (nearly every
    // case: few generated quantities are valid).
    check(inputs, 20, |(quantities, reasons, s, json_noise)| {
        let (resizer, ledger, policy) = world(&s);
        let mut new = resizer.clone();
        {
            let spec = new.spec.as_mut().unwrap();
            let r = spec.containers[0].resources.as_mut().unwrap();
            r.requests
                .as_mut()
                .unwrap()
                .insert("cpu".into(), Quantity(quantities[0].clone()));
            r.limits
                .as_mut()
                .unwrap()
                .insert("memory".into(), Quantity(quantities[1].clone()));
            if json_noise {
                spec.init_containers = Some(vec![
                    container("i")
                        .request("cpu", &quantities[2])
                        .limit("memory", &quantities[3])
                        .build(),
                ]);
                let pod_level = spec.resources.get_or_insert_with(Default::default);
                pod_level.requests =
                    Some([("cpu".to_owned(), Quantity(quantities[4].clone()))].into());
                spec.overhead =
                    Some([("memory".to_owned(), Quantity(quantities[5].clone()))].into());
            }
        }
        new.status.as_mut().unwrap().conditions = Some(
            reasons
                .iter()
                .map(|r| PodCondition {
                    type_: "PodResizePending".into(),
                    status: "True".into(),
                    reason: r.clone(),
                    ..Default::default()
                })
                .collect(),
        );
        new.status.as_mut().unwrap().qos_class = Some(quantities[6].clone());
        let budgets = Budgets::default();
        let ctx = context(Some(&ledger), &budgets, &policy);
        let v = classify(&resizer, &new, &ctx);
        let _ = v.message();
        let _ = v.outcome(&policy);
        let _ = current_qos_class(&new);
        let _ = resize_guard_policy::assess(&new, &ctx);
        let _ = pod_requests(&new, Accounting::Scheduler);
        let Verdict::Denied(_) = v else {
            return Ok(false);
        };
        prop_assert!(quantities[..6].iter().any(|q| parse_nanos(q).is_err()));
        Ok(true)
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_plan_exists_whenever_all_candidates_together_would_suffice(s in scenario()) {
        let (resizer, ledger, policy) = world(&s);
        let p = preemptor(&resizer);
        let candidates_free: Resources = ledger
            .others(&p.key.uid)
            .filter(|e| e.terminating || (e.priority < p.priority && e.key.namespace != "kube-system"
                && !policy.preemption.protected_selector.0.matches(e.labels.as_deref())
                && e.controller != Controller::None))
            .map(|e| e.held)
            .sum();
        let all_gone = (p.request + ledger.used_by_others(&p.key.uid) - candidates_free)
            .fits_in(ledger.allocatable);
        let result = select_victims(&p, &ledger, &Budgets::default(), &policy, INSTALL_NAMESPACE, Candidates::All);
        prop_assert_eq!(result.is_ok(), all_gone, "{:?}", result);
    }

    #[test]
    fn quantity_parsing_never_panics(s in "\\PC{0,24}") {
        let _ = parse_nanos(&s);
    }

    #[test]
    fn integer_millicores_round_trip(m in 0..10_000_000i64) {
        let q = Quantity(format!("{m}m"));
        prop_assert_eq!(resize_guard_policy::upstream::quantity::milli_value(&q).unwrap(), m);
    }
}
