//! Property tests: the invariants every plan, repair and classification must keep, on generated
//! nodes and pods.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::fixture::{PodBuilder, container, node};
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::policy::{PdbMode, Policy};
use resize_guard_policy::qos::{QosClass, current_qos_class, spec_qos_class};
use resize_guard_policy::quantity::parse_nanos;
use resize_guard_policy::repair::repair;
use resize_guard_policy::requests::{Accounting, pod_requests};
use resize_guard_policy::victims::{Preemptor, select_victims};
use resize_guard_policy::{Context, Verdict, classify};

#[derive(Debug, Clone)]
struct PodSpecGen {
    priority: i32,
    cpu: u32,
    mem_mi: u32,
    start: i64,
    terminating: bool,
    protected: bool,
    namespace: &'static str,
}

fn pod_gen() -> impl Strategy<Value = PodSpecGen> {
    (
        -3..4i32,
        10..1500u32,
        1..1024u32,
        0..100i64,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::sample::select(vec!["apps", "batch", "kube-system"]),
    )
        .prop_map(
            |(p, cpu, mem_mi, start, terminating, protected, namespace)| PodSpecGen {
                priority: p * 100,
                cpu,
                mem_mi,
                start,
                terminating,
                protected,
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

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        1000..8000u32,
        1024..16384u32,
        -3..4i32,
        10..1000u32,
        10..4000u32,
        64..4096u32,
        prop::collection::vec(pod_gen(), 0..30),
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn victims_are_strictly_lower_priority_and_never_protected(s in scenario()) {
        let (resizer, ledger, policy) = world(&s);
        if let Ok(plan) = select_victims(&preemptor(&resizer), &ledger, &Budgets::default(), &policy) {
            for v in &plan.victims {
                prop_assert!(v.priority < s.preemptor_priority);
                let e = ledger.entry(&v.key.uid).unwrap();
                prop_assert!(!e.terminating);
                prop_assert!(v.key.namespace != "kube-system");
                prop_assert!(!policy.preemption.protected_selector.0.matches(e.labels.as_ref()));
                prop_assert!(v.key.uid != resizer.metadata.uid.clone().unwrap());
            }
        }
    }

    #[test]
    fn removing_the_victims_makes_the_resize_fit(s in scenario()) {
        let (resizer, ledger, policy) = world(&s);
        let p = preemptor(&resizer);
        if let Ok(plan) = select_victims(&p, &ledger, &Budgets::default(), &policy) {
            let remaining: resize_guard_policy::resources::Resources = ledger
                .others(&p.key.uid)
                .filter(|e| !e.terminating && !plan.victims.iter().any(|v| v.key == e.key))
                .map(|e| e.held)
                .sum();
            prop_assert!((p.request + remaining).fits_in(ledger.allocatable));
        }
    }

    #[test]
    fn every_victim_is_necessary(s in scenario()) {
        let (resizer, ledger, policy) = world(&s);
        let p = preemptor(&resizer);
        if let Ok(plan) = select_victims(&p, &ledger, &Budgets::default(), &policy) {
            let remaining: resize_guard_policy::resources::Resources = ledger
                .others(&p.key.uid)
                .filter(|e| !e.terminating && !plan.victims.iter().any(|v| v.key == e.key))
                .map(|e| e.held)
                .sum();
            for v in &plan.victims {
                prop_assert!(!(p.request + remaining + v.held).fits_in(ledger.allocatable),
                    "victim {} was not needed", v.key);
            }
        }
    }

    #[test]
    fn a_plan_exists_whenever_all_candidates_together_would_suffice(s in scenario()) {
        let (resizer, ledger, policy) = world(&s);
        let p = preemptor(&resizer);
        let candidates_free: resize_guard_policy::resources::Resources = ledger
            .others(&p.key.uid)
            .filter(|e| e.terminating || (e.priority < p.priority && e.key.namespace != "kube-system"
                && !policy.preemption.protected_selector.0.matches(e.labels.as_ref())))
            .map(|e| e.held)
            .sum();
        let all_gone = (p.request + ledger.used_by_others(&p.key.uid) - candidates_free)
            .fits_in(ledger.allocatable);
        let result = select_victims(&p, &ledger, &Budgets::default(), &policy);
        prop_assert_eq!(result.is_ok(), all_gone, "{:?}", result);
    }

    #[test]
    fn a_repaired_resize_keeps_the_qos_class(
        cpu in 1..4000u32, mem in 1..4096u32,
        new_req_cpu in prop::option::of(1..4000u32), new_lim_cpu in prop::option::of(1..4000u32),
        new_req_mem in prop::option::of(1..4096u32), new_lim_mem in prop::option::of(1..4096u32),
    ) {
        let old = PodBuilder::new("ns", "p")
            .container(container("c").guaranteed(&format!("{cpu}m"), &format!("{mem}Mi")))
            .build();
        let mut new = old.clone();
        {
            let r = new.spec.as_mut().unwrap().containers[0].resources.as_mut().unwrap();
            let (req, lim) = (r.requests.as_mut().unwrap(), r.limits.as_mut().unwrap());
            if let Some(v) = new_req_cpu { req.insert("cpu".into(), Quantity(format!("{v}m"))); }
            if let Some(v) = new_lim_cpu { lim.insert("cpu".into(), Quantity(format!("{v}m"))); }
            if let Some(v) = new_req_mem { req.insert("memory".into(), Quantity(format!("{v}Mi"))); }
            if let Some(v) = new_lim_mem { lim.insert("memory".into(), Quantity(format!("{v}Mi"))); }
        }
        let (old_spec, new_spec) = (old.spec.as_ref().unwrap(), new.spec.as_ref().unwrap());
        if spec_qos_class(new_spec) != QosClass::Guaranteed {
            let fix = repair(old_spec, QosClass::Guaranteed, new_spec);
            prop_assert!(fix.is_some());
            let mut repaired = new_spec.clone();
            fix.unwrap().apply(&mut repaired);
            prop_assert_eq!(spec_qos_class(&repaired), QosClass::Guaranteed);
        } else {
            prop_assert!(repair(old_spec, QosClass::Guaranteed, new_spec).is_none());
        }
    }

    #[test]
    fn classification_never_panics_on_arbitrary_pods(
        quantities in prop::collection::vec("[0-9a-zA-Z.+-]{0,8}", 8),
        reasons in prop::collection::vec(prop::option::of("Deferred|Infeasible|[a-z]{0,4}"), 0..3),
        s in scenario(),
        json_noise in any::<bool>(),
    ) {
        let (resizer, ledger, policy) = world(&s);
        let mut new = resizer.clone();
        {
            let spec = new.spec.as_mut().unwrap();
            let r = spec.containers[0].resources.as_mut().unwrap();
            r.requests.as_mut().unwrap().insert("cpu".into(), Quantity(quantities[0].clone()));
            r.limits.as_mut().unwrap().insert("memory".into(), Quantity(quantities[1].clone()));
            if json_noise {
                spec.init_containers = Some(vec![container("i")
                    .request("cpu", &quantities[2]).limit("memory", &quantities[3]).build()]);
                let pod_level = spec.resources.get_or_insert_with(Default::default);
                pod_level.requests = Some([("cpu".to_owned(), Quantity(quantities[4].clone()))].into());
                spec.overhead = Some([("memory".to_owned(), Quantity(quantities[5].clone()))].into());
            }
        }
        new.status.as_mut().unwrap().conditions = Some(reasons.iter().map(|r| PodCondition {
            type_: "PodResizePending".into(),
            status: "True".into(),
            reason: r.clone(),
            ..Default::default()
        }).collect());
        new.status.as_mut().unwrap().qos_class = Some(quantities[6].clone());
        let budgets = Budgets::default();
        let ctx = Context { ledger: Some(&ledger), budgets: &budgets, policy: &policy, install_namespace: "resize-guard" };
        let v = classify(&resizer, &new, &ctx);
        let _ = v.message();
        let _ = v.outcome(&policy);
        let _ = current_qos_class(&new);
        let _ = resize_guard_policy::assess(&new, &ctx);
        let _ = pod_requests(&new, Accounting::Scheduler);
        if let Verdict::Denied(_) = v {
            prop_assert!(quantities[..6].iter().any(|q| parse_nanos(q).is_err()));
        }
    }

    #[test]
    fn quantity_parsing_never_panics(s in "\\PC{0,24}") {
        let _ = parse_nanos(&s);
    }

    #[test]
    fn integer_millicores_round_trip(m in 0..10_000_000i64) {
        let q = Quantity(format!("{m}m"));
        prop_assert_eq!(resize_guard_policy::quantity::milli_value(&q).unwrap(), m);
    }
}
