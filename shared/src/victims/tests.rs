//! Victim selection: upstream DefaultPreemption cases on one node, the KEP-5836 over-preemption
//! example, and resize-guard's own rules (policy protection, PDB respect, terminating pods).

use super::*;
use crate::fixture::{
    self, INSTALL_NAMESPACE, PodBuilder, container, node, replica_pod, scheduler_ledger,
};
use crate::policy::PdbMode;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

/// A pod something would recreate (a ReplicaSet owns it), so only the rules under test decide
/// whether it may be a victim.
fn pod(name: &str, priority: i32, cpu: &str, start: i64) -> PodBuilder {
    replica_pod("ns", name, cpu, "64Mi", start).priority(priority)
}

/// The resizing pod: 250m growing to `to`, priority 1000.
fn resizer(to: &str) -> Pod {
    pod("hi", 1000, "250m", 0).resize("c", "cpu", to).build()
}

fn preemptor(p: &Pod) -> Preemptor {
    Preemptor::new(p, p.spec.as_ref().unwrap(), p.status.as_ref())
}

fn plan(alloc_cpu: &str, pods: &[Pod], policy: &Policy) -> Result<PreemptionPlan, NoPlan> {
    plan_with(alloc_cpu, pods, &Budgets::default(), policy)
}

fn plan_with(
    alloc_cpu: &str,
    pods: &[Pod],
    budgets: &Budgets,
    policy: &Policy,
) -> Result<PreemptionPlan, NoPlan> {
    let ledger = NodeLedger::new(&node("n1", alloc_cpu, "64Gi"), pods);
    let p = preemptor(&pods[0]);
    select_victims(
        &p,
        &ledger,
        budgets,
        policy,
        INSTALL_NAMESPACE,
        Candidates::All,
    )
}

/// The plan for `resizing` among `candidates` under the default policy, with resize-guard
/// installed in its usual namespace.
fn plan_on(
    resizing: &Pod,
    ledger: &NodeLedger,
    candidates: Candidates<'_>,
) -> Result<PreemptionPlan, NoPlan> {
    let (p, budgets, policy) = (preemptor(resizing), Budgets::default(), Policy::default());
    select_victims(&p, ledger, &budgets, &policy, INSTALL_NAMESPACE, candidates)
}

fn names(p: &PreemptionPlan) -> Vec<&str> {
    p.victims.iter().map(|v| v.key.name.as_str()).collect()
}

/// The victims' names under the default policy, on a node of `alloc_cpu` (there must be a plan).
fn chosen(alloc_cpu: &str, pods: &[Pod]) -> Vec<String> {
    let p = plan(alloc_cpu, pods, &Policy::default()).unwrap();
    names(&p).into_iter().map(str::to_owned).collect()
}

/// A candidate: `(name, priority, cpu, start)`.
type Candidate = (&'static str, i32, &'static str, i64);

/// The resizer growing to `to`, then one [`pod`] per `(name, priority, cpu, start)`.
fn node_pods(to: &str, others: &[Candidate]) -> Vec<Pod> {
    let mut pods = vec![resizer(to)];
    pods.extend(
        others
            .iter()
            .map(|&(name, priority, cpu, start)| pod(name, priority, cpu, start).build()),
    );
    pods
}

/// The plan, under the default policy on a node of `alloc_cpu`, for the resizer growing to `to`
/// among one [`pod`] per `(name, priority, cpu, start)`.
fn plan_among(alloc_cpu: &str, to: &str, others: &[Candidate]) -> Result<PreemptionPlan, NoPlan> {
    plan(alloc_cpu, &node_pods(to, others), &Policy::default())
}

/// A pod of `namespace` on `n1` that nothing owns: one Guaranteed 500m container, Running.
fn unowned(namespace: &str, name: &str) -> Pod {
    PodBuilder::new(namespace, name)
        .node("n1")
        .container(container("c").guaranteed("500m", "64Mi"))
        .running(10)
        .build()
}

/// The field test on one node of 1930m: `preemptor` (at 250m) growing to 550m beside the
/// 1500m `filler` of priority 0.
fn beside_the_filler(preemptor: PodBuilder, policy: &Policy) -> Result<PreemptionPlan, NoPlan> {
    let pods = [
        preemptor.resize("c", "cpu", "550m").build(),
        pod("filler", 0, "1500m", 10).build(),
    ];
    plan("1930m", &pods, policy)
}

#[test]
fn field_test_preempts_the_low_priority_filler() {
    let p = beside_the_filler(pod("hi", 1000, "250m", 0), &Policy::default()).unwrap();
    assert_eq!(names(&p), ["filler"]);
    assert_eq!(p.shortfall.cpu, 120);
}

#[test]
fn never_preempts_equal_or_higher_priority() {
    let others = [("same", 1000, "800m", 10), ("higher", 2000, "800m", 10)];
    let e = plan_among("1930m", "550m", &others).unwrap_err();
    assert!(matches!(e, NoPlan::NoCandidates { excluded, .. } if excluded.not_lower_priority == 2));
}

#[test]
fn preemptor_with_never_policy_gets_no_plan() {
    let never = pod("hi", 1000, "250m", 0).never_preempt();
    let e = beside_the_filler(never, &Policy::default());
    assert_eq!(e, Err(NoPlan::PreemptorNeverPreempts));
}

#[test]
fn critical_preemptor_is_left_to_the_kubelet() {
    let critical = pod("hi", 2_000_000_000, "250m", 0);
    let e = beside_the_filler(critical, &Policy::default());
    assert_eq!(e, Err(NoPlan::CriticalPreemptor));
}

#[test]
fn disabled_policy_and_opted_out_nodes_get_no_plan() {
    let pods = node_pods("550m", &[("filler", 0, "1500m", 10)]);
    let mut off = Policy::default();
    off.preemption.enabled = false;
    assert_eq!(plan("1930m", &pods, &off), Err(NoPlan::Disabled));
    let mut n = node("n1", "1930m", "64Gi");
    n.metadata.labels = Some([("resize-guard.io/preemption".into(), "disabled".into())].into());
    let ledger = NodeLedger::new(&n, &pods);
    let e = plan_on(&pods[0], &ledger, Candidates::All);
    assert!(matches!(e, Err(NoPlan::NodeOptedOut(_))));
}

/// What the case shows, `to`, `alloc`, the victims, the candidates.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [Candidate],
);

/// Upstream DefaultPreemption's choice on one node (`default_preemption_test.go` is a table of
/// such cases too): the resizer growing to `to` on a node of `alloc` cpu, the victims, most
/// important first, among candidates `(name, priority, cpu, start)`. One test a case.
#[rustfmt::skip]
const UPSTREAM_CASES: [Case; 5] = [
    // Any one of the three frees enough; the lowest priority one goes.
    ("reprieves higher priority victims first", "550m", "1930m", &["p100"],
        &[("p500", 500, "500m", 10), ("p100", 100, "500m", 10), ("p300", 300, "500m", 10)]),
    ("among equal priority the youngest is preempted", "550m", "1930m", &["young"],
        &[("old", 0, "500m", 10), ("young", 0, "500m", 99), ("mid", 0, "500m", 50)]),
    // Upstream reprieve: the big important pod is reprieved only if it fits back; here the
    // small one is not enough alone, so both priorities are tried in order. Need 1250 + 1300 =
    // 2550 in 2000: remove all -> 1250 fits; reprieve big (2250) no -> victim; reprieve small
    // (1550) yes.
    ("keeps a more important victim if a less important one suffices", "1250m", "2000m", &["big"],
        &[("big", 200, "1000m", 10), ("small", 100, "300m", 10)]),
    // 1250 + 1200 = 2450 in 1700: need 750 -> two victims, the two youngest.
    ("several victims when one is not enough", "1250m", "1700m", &["b", "c"],
        &[("a", 0, "400m", 10), ("b", 0, "400m", 20), ("c", 0, "400m", 30)]),
    ("victims are listed most important first", "1850m", "2000m", &["a", "c", "b"],
        &[("a", 5, "500m", 10), ("b", 1, "500m", 10), ("c", 3, "500m", 10)]),
];

/// Plays `UPSTREAM_CASES[i]`.
fn upstream_case(i: usize) {
    let (what, to, alloc, victims, others) = UPSTREAM_CASES[i];
    assert_eq!(chosen(alloc, &node_pods(to, others)), victims, "{what}");
}

#[test]
fn reprieves_higher_priority_victims_first() {
    upstream_case(0);
}

#[test]
fn among_equal_priority_the_youngest_is_preempted() {
    upstream_case(1);
}

#[test]
fn keeps_a_more_important_victim_if_a_less_important_one_suffices() {
    upstream_case(2);
}

#[test]
fn several_victims_when_one_is_not_enough() {
    upstream_case(3);
}

#[test]
fn victims_are_listed_most_important_first() {
    upstream_case(4);
}

#[test]
fn a_pod_that_has_not_started_counts_as_youngest() {
    let unstarted = PodBuilder::new("ns", "unstarted")
        .node("n1")
        .owned_by("ReplicaSet")
        .container(container("c").guaranteed("500m", "64Mi"))
        .build();
    let pods = [
        resizer("550m"),
        pod("old", 0, "500m", 10).build(),
        unstarted,
    ];
    assert_eq!(chosen("1500m", &pods), ["unstarted"]);
}

#[test]
fn no_plan_when_even_all_victims_are_not_enough() {
    let others = [("low", 0, "100m", 10), ("high", 5000, "1000m", 10)];
    let e = plan_among("2000m", "1500m", &others).unwrap_err();
    match e {
        NoPlan::NotEnough {
            candidates,
            missing,
            ..
        } => {
            assert_eq!(candidates, 1);
            assert_eq!(missing.cpu, 500);
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("cpu 500m"), "{e}");
}

#[test]
fn too_many_victims_is_refused_with_the_count() {
    let mut pods = vec![resizer("1250m")];
    pods.extend((0..4).map(|i| pod(&format!("v{i}"), 0, "250m", i).build()));
    let mut policy = Policy::default();
    policy.preemption.max_victims_per_resize = 3;
    // 1250 + 1000 = 2250 in 1250 -> all four needed.
    assert_eq!(
        plan("1250m", &pods, &policy),
        Err(NoPlan::TooManyVictims { needed: 4, max: 3 })
    );
}

/// The resizer growing to `to`, `leaving` (priority 0, `leaving_cpu`) terminating, then one
/// [`pod`] per `(name, priority, cpu, start)`.
fn with_leaving(to: &str, leaving_cpu: &str, others: &[Candidate]) -> Vec<Pod> {
    let mut pods = node_pods(to, others);
    pods.insert(1, pod("leaving", 0, leaving_cpu, 10).terminating().build());
    pods
}

#[test]
fn terminating_pods_count_as_space_being_freed() {
    let pods = with_leaving("550m", "500m", &[("filler", 0, "1000m", 10)]);
    let p = plan("1930m", &pods, &Policy::default()).unwrap();
    assert!(
        p.victims.is_empty(),
        "no double preemption while a victim terminates"
    );
    assert_eq!(p.awaiting.len(), 1);
    assert_eq!(p.awaiting[0].name, "leaving");
    assert_eq!(p.shortfall.cpu, 120);
}

#[test]
fn terminating_pods_that_are_not_enough_reduce_the_victims_needed() {
    let others = [("small", 0, "200m", 10), ("big", 0, "600m", 20)];
    let pods = with_leaving("1050m", "300m", &others);
    // 1050 + 1100 = 2150 in 1930: short 220; leaving frees 300 -> nothing more needed.
    assert!(
        plan("1930m", &pods, &Policy::default())
            .unwrap()
            .victims
            .is_empty()
    );
    // In 1700: short 450; leaving frees 300 -> 150 more: youngest-first reprieve keeps `small`
    // only if `big` goes... reprieve order is importance: small (older) first: 1050+0+200 fits,
    // then big: 1050+200+600=1850 > 1700 -> big is the victim.
    assert_eq!(chosen("1700m", &pods), ["big"]);
}

#[test]
fn daemon_set_and_bare_pods_are_victims_only_when_policy_allows() {
    // One 500m candidate is enough; which one may go is the policy's say.
    let ds = pod("agent", 0, "500m", 10).owned_by("DaemonSet").build();
    let rs = pod("web", 0, "500m", 20).build();
    let bare = pod("bare", 0, "500m", 30).bare().build();
    let mut policy = Policy::default();
    let only = |p: &Pod, policy: &Policy| plan("1000m", &[resizer("750m"), p.clone()], policy);
    match only(&ds, &policy).unwrap_err() {
        NoPlan::NoCandidates { excluded, .. } => assert_eq!(excluded.daemon_set, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(names(&only(&rs, &policy).unwrap()), ["web"]);
    match only(&bare, &policy).unwrap_err() {
        NoPlan::NoCandidates { excluded, .. } => assert_eq!(excluded.bare, 1),
        other => panic!("{other:?}"),
    }
    // The reason a plan names, for the ResizePreemptionFailed Event.
    let e = only(&bare, &policy).unwrap_err().to_string();
    assert!(
        e.contains("1 without a controlling owner (preemption.allowBarePodVictims)"),
        "{e}"
    );
    policy.preemption.allow_daemon_set_victims = true;
    policy.preemption.allow_bare_pod_victims = true;
    assert_eq!(names(&only(&ds, &policy).unwrap()), ["agent"]);
    assert_eq!(names(&only(&bare, &policy).unwrap()), ["bare"]);
}

#[test]
fn the_install_namespace_is_protected_whatever_the_list_says() {
    let ours = unowned(INSTALL_NAMESPACE, "webhook");
    let mut policy = Policy::default();
    policy.preemption.protected_namespaces = vec!["databases".into()];
    match plan("1000m", &[resizer("750m"), ours], &policy).unwrap_err() {
        NoPlan::NoCandidates { excluded, .. } => assert_eq!(excluded.protected_namespace, 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_pod_in_an_excluded_namespace_is_never_a_victim_and_the_reason_says_so() {
    let payments = replica_pod("payments", "ledger", "500m", "64Mi", 10)
        .priority(0)
        .build();
    let pods = [resizer("1000m"), payments];
    let mut policy = Policy::default();
    policy.namespaces.exclude = vec!["kube-system".into(), "payments".into()];
    let e = plan("1250m", &pods, &policy).unwrap_err();
    match &e {
        NoPlan::NoCandidates { excluded, .. } => assert_eq!(excluded.excluded_namespace, 1),
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string()
            .contains("1 in a namespace resize-guard leaves alone (namespaces.exclude)"),
        "{e}"
    );
    assert_eq!(
        exclusion(
            &ledger_entry(&pods, "ledger"),
            1000,
            &policy,
            INSTALL_NAMESPACE
        ),
        Some(Exclusion::ExcludedNamespace)
    );
    // Not excluded: the same pod is the victim.
    policy.namespaces.exclude = vec!["kube-system".into()];
    assert_eq!(names(&plan("1250m", &pods, &policy).unwrap()), ["ledger"]);
}

/// The ledger entry of the pod named `name` among `pods`, on a roomy node.
fn ledger_entry(pods: &[Pod], name: &str) -> crate::ledger::LedgerEntry {
    let ledger = NodeLedger::new(&node("n1", "64", "64Gi"), pods);
    ledger
        .pods
        .iter()
        .find(|e| e.key.name == name)
        .cloned()
        .unwrap()
}

#[test]
fn protected_namespaces_selectors_critical_and_mirror_pods_are_never_victims() {
    let sys = unowned("kube-system", "dns");
    let labelled = pod("db", 0, "500m", 10)
        .label("resize-guard.io/protected", "true")
        .build();
    let mirror = pod("static", 0, "500m", 10)
        .annotation("kubernetes.io/config.mirror", "abc")
        .build();
    let pods = [resizer("1250m"), sys, labelled, mirror];
    let e = plan("2000m", &pods, &Policy::default()).unwrap_err();
    match e {
        NoPlan::NoCandidates { excluded, .. } => {
            assert_eq!(excluded.protected_namespace, 1);
            assert_eq!(excluded.protected_selector, 1);
            assert_eq!(excluded.critical, 1);
        }
        other => panic!("{other:?}"),
    }
}

/// The budget `ns/<app>-pdb` over the pods labelled `app=<app>`.
fn pdb(app: &str, allowed: i32) -> PodDisruptionBudget {
    fixture::pdb("ns", &format!("{app}-pdb"), ("app", app), allowed)
}

/// A candidate the `db-pdb` budget covers (labelled `app=db`).
fn db(name: &str, priority: i32, cpu: &str, start: i64) -> PodBuilder {
    pod(name, priority, cpu, start).label("app", "db")
}

/// The plan for the resizer growing to 550m beside `others` on a node of `alloc` cpu, with the
/// `db-pdb` budget allowing `allowed` disruptions and any more `budgets`, PDBs taken as `mode`.
fn under_db_budget(
    alloc: &str,
    others: impl IntoIterator<Item = PodBuilder>,
    (allowed, budgets): (i32, &[PodDisruptionBudget]),
    mode: PdbMode,
) -> Result<PreemptionPlan, NoPlan> {
    let mut pods = vec![resizer("550m")];
    pods.extend(others.into_iter().map(PodBuilder::build));
    let mut all = vec![pdb("db", allowed)];
    all.extend_from_slice(budgets);
    let mut policy = Policy::default();
    policy.preemption.pdb = mode;
    plan_with(alloc, &pods, &Budgets::new(&all), &policy)
}

/// The victim under each PDB mode, a row a case: what it shows, the node's cpu, the disruptions
/// `db-pdb` allows, the mode, the one victim and whether it breaks the budget, then the
/// candidates beside the resizer growing to 550m.
#[test]
fn each_pdb_mode_chooses_its_victim() {
    use PdbMode::{BestEffort, Respect};
    #[rustfmt::skip]
    let cases = [
        ("respect skips a protected pod for another victim", "1200m", 0, Respect, "other", false,
            vec![db("guarded", 0, "500m", 99), pod("other", 10, "500m", 10)]),
        ("respect spends the budget on the least important", "1200m", 1, Respect, "young", false,
            vec![db("old", 0, "500m", 10), db("young", 0, "500m", 90)]),
        // Upstream reprieves PDB-violating pods first, so a non-violating pod of *higher*
        // priority is chosen over a violating one when either suffices.
        ("best effort prefers non-violating victims", "1200m", 0, BestEffort, "free", false,
            vec![db("guarded", 0, "500m", 10), pod("free", 10, "500m", 10)]),
        ("best effort violates when there is no other way", "1930m", 0, BestEffort, "guarded", true,
            vec![db("guarded", 0, "1500m", 10)]),
    ];
    for (what, alloc, allowed, mode, victim, violates, others) in cases {
        let p = under_db_budget(alloc, others, (allowed, &[]), mode).unwrap();
        assert_eq!(names(&p), [victim], "{what}");
        assert_eq!(p.victims[0].violates_pdb, violates, "{what}");
    }
}

#[test]
fn pdb_respect_explains_when_only_protected_pods_could_help() {
    let guarded = [db("guarded", 0, "1500m", 99)];
    let e = under_db_budget("1930m", guarded, (0, &[]), PdbMode::Respect).unwrap_err();
    assert!(matches!(&e, NoPlan::NoCandidates { excluded, .. } if excluded.pdb == 1));
    assert!(e.to_string().contains("PodDisruptionBudget"), "{e}");
}

#[test]
fn pdb_respect_never_plans_a_pod_two_budgets_cover() {
    // Both budgets allow a disruption, but the Eviction API refuses a pod more than one covers.
    let doubly = db("doubly", 0, "500m", 90).label("tier", "data");
    let others = || [doubly.clone(), pod("other", 10, "500m", 10)];
    let by_tier = [fixture::pdb("ns", "tier-pdb", ("tier", "data"), 1)];
    let p = under_db_budget("1200m", others(), (1, &by_tier), PdbMode::Respect).unwrap();
    assert_eq!(names(&p), ["other"]);
    // Deleting (bestEffort) knows no such limit: the younger, less important pod goes.
    let p = under_db_budget("1200m", others(), (1, &by_tier), PdbMode::BestEffort).unwrap();
    assert_eq!(names(&p), ["doubly"]);
}

/// KEP-5836 "Risk of Additional Preemption": node 4 CPU; H (priority 1000) grows 1000m→2000m;
/// M (priority 500) is itself Deferred 1000m→2000m; three low pods of 500m. The kubelet needs one
/// low pod gone. The v1.37 scheduler counts M at its desired 2000m and preempts all three.
#[test]
fn kep_5836_example_one_victim_where_upstream_takes_three() {
    let h = pod("h", 1000, "1000m", 0)
        .resize("c", "cpu", "2000m")
        .build();
    let m = pod("m", 500, "1000m", 1)
        .resize("c", "cpu", "2000m")
        .build();
    let lows: Vec<Pod> = (0..3)
        .map(|i| pod(&format!("l{i}"), 0, "500m", 10 + i).build())
        .collect();
    let mut pods = vec![h, m];
    pods.extend(lows);
    let ours = plan("4", &pods, &Policy::default()).unwrap();
    assert_eq!(names(&ours), ["l2"]);

    // The same algorithm on the scheduler's accounting (every pod at max(desired, …)).
    let ledger = scheduler_ledger(&node("n1", "4", "64Gi"), &pods);
    let upstream = plan_on(&pods[0], &ledger, Candidates::All).unwrap();
    assert_eq!(upstream.victims.len(), 3);
}

#[test]
fn no_shortfall_means_an_empty_plan() {
    let p = plan_among("1930m", "550m", &[("small", 0, "100m", 10)]).unwrap();
    assert!(p.victims.is_empty() && p.awaiting.is_empty() && p.shortfall.is_zero());
}

#[test]
fn memory_shortfall_is_planned_like_cpu() {
    let h = replica_pod("ns", "hi", "100m", "1Gi", 0)
        .priority(10)
        .resize("c", "memory", "3Gi")
        .build();
    let low = replica_pod("ns", "low", "100m", "2Gi", 5).build();
    let ledger = NodeLedger::new(&node("n1", "4", "4Gi"), &[h.clone(), low]);
    let p = plan_on(&h, &ledger, Candidates::All).unwrap();
    assert_eq!(names(&p), ["low"]);
    assert_eq!(p.shortfall.memory, 1 << 30);
}

#[test]
fn names_are_truncated_for_messages() {
    let keys: Vec<PodKey> = (0..7)
        .map(|i| PodKey {
            namespace: "ns".into(),
            name: format!("p{i}"),
            uid: String::new(),
        })
        .collect();
    assert_eq!(name_list(keys.iter(), 2), "ns/p0, ns/p1 and 5 more");
}

#[test]
fn victims_are_listed_with_their_priority() {
    let victim = |name: &str, priority| Victim {
        key: PodKey {
            namespace: "batch".into(),
            name: name.into(),
            uid: String::new(),
        },
        priority,
        held: Resources::ZERO,
        violates_pdb: false,
    };
    let victims = [victim("a", 10), victim("b", -5)];
    assert_eq!(
        name_list(victims.iter(), 5),
        "batch/a (priority 10), batch/b (priority -5)"
    );
}

/// The pending-growth race end to end: on the kubelet's accounting alone the plan is low3, low4,
/// low5; while they go, mid0's pending growth fits before high's and takes the room.
fn racing_node() -> Vec<Pod> {
    let mut pods = vec![
        pod("high", 1_000_000, "300m", 0)
            .resize("c", "cpu", "1530m")
            .build(),
    ];
    for (i, (from, to)) in [("440m", "1160m"), ("540m", "1310m")].iter().enumerate() {
        pods.push(
            pod(&format!("mid{i}"), 10_000, from, 5 + i as i64)
                .never_preempt()
                .resize("c", "cpu", to)
                .resize_pending("Deferred", "Node didn't have enough resource: cpu")
                .build(),
        );
    }
    for (i, cpu) in ["510m", "420m", "390m", "230m", "310m", "420m"]
        .iter()
        .enumerate()
    {
        pods.push(pod(&format!("low{i}"), 100, cpu, 10 + i as i64).build());
    }
    pods
}

#[test]
fn pending_growth_that_could_take_the_room_first_is_planned_for() {
    let pods = racing_node();
    let blind: Vec<Pod> = pods
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.status.as_mut().unwrap().conditions = None;
            p
        })
        .collect();
    let naive = plan("3930m", &blind, &Policy::default()).unwrap();
    assert_eq!(names(&naive), ["low3", "low4", "low5"]);

    // Preempting both growing pods takes fewer victims than making room for their growth
    // (upstream's alpha took low2, low4, low5 and mid1).
    let p = plan("3930m", &pods, &Policy::default()).unwrap();
    assert_eq!(names(&p), ["mid0", "mid1"]);
    assert!(p.racing.is_empty());
}

#[test]
fn growth_that_can_only_fit_after_the_preemptor_is_not_planned_for() {
    // One victim: there is no state between "nothing removed" (mid is Deferred) and "all
    // removed" (the preemptor is retried first), so mid's growth cannot win the room.
    let pods = [
        resizer("1250m"),
        deferred(pod("mid", 500, "500m", 1), "900m"),
        pod("low", 0, "1000m", 2).build(),
    ];
    assert_eq!(chosen("2", &pods), ["low"]);
}

/// `p` with its cpu resized to `to` and Deferred by the kubelet.
fn deferred(p: PodBuilder, to: &str) -> Pod {
    p.resize("c", "cpu", to)
        .resize_pending("Deferred", "full")
        .build()
}

/// The resizer growing to 1250m; `peer`, of the same priority, Deferred growing 250m -> `to`;
/// two 500m candidates `a` and `b`.
fn with_peer(to: &str) -> [Pod; 4] {
    [
        resizer("1250m"),
        deferred(pod("peer", 1000, "250m", 1), to),
        pod("a", 0, "500m", 2).build(),
        pod("b", 0, "500m", 3).build(),
    ]
}

#[test]
fn a_resize_the_kubelet_may_retry_first_gets_its_room_counted() {
    // Same priority and QoS, neither with a PodResizePending time: the queue may hold the
    // other pod first, so its growth is reserved and a second victim goes.
    assert_eq!(chosen("2", &with_peer("500m")), ["a", "b"]);
}

#[test]
fn growth_of_pods_that_may_not_be_preempted_leaves_a_plan_that_may_race() {
    // The kubelet may retry the peer first, and its growth fits once b is gone; even with every
    // candidate gone the node cannot hold both resizes, so no plan wins in every order: the
    // kubelet-accounting plan stands and names the racer.
    let p = plan("2", &with_peer("1000m"), &Policy::default()).unwrap();
    assert_eq!(names(&p), ["b"]);
    assert_eq!(
        p.racing.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        ["peer"]
    );
}

#[test]
fn a_resumed_plan_takes_only_the_recorded_victims_a_fresh_reprieve_still_needs() {
    // 250m growing to 1000m on 2000m beside three 500m pods: one of them must go.
    let pods = node_pods(
        "1000m",
        &[
            ("a", 0, "500m", 10),
            ("b", 0, "500m", 20),
            ("d", 0, "500m", 30),
        ],
    );
    let key = |name: &str| {
        PodKey::of(
            pods.iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .unwrap(),
        )
    };
    let ledger = NodeLedger::new(&node("n1", "2000m", "64Gi"), &pods);
    let among = |recorded: &[PodKey], ledger: &NodeLedger| {
        plan_on(&pods[0], ledger, Candidates::Recorded(recorded))
    };
    // A fresh plan takes the least important pod, d.
    assert_eq!(chosen("2000m", &pods), ["d"]);
    // The record named a, b and d (when more room was needed): one of them is enough now, and
    // the reprieve keeps the more important ones.
    let all = [key("a"), key("b"), key("d")];
    assert_eq!(names(&among(&all, &ledger).unwrap()), ["d"]);
    // The record named a and b only: one of those, never d, which it does not name.
    let ab = [key("a"), key("b")];
    assert_eq!(names(&among(&ab, &ledger).unwrap()), ["b"]);
    // d went on its own meanwhile: the resize fits, the record's pods are all spared.
    let without_d: Vec<Pod> = pods[..3].to_vec();
    let roomy = NodeLedger::new(&node("n1", "2000m", "64Gi"), &without_d);
    assert!(among(&ab, &roomy).unwrap().victims.is_empty());
    // The recorded pods alone cannot make room (one 500m pod for a 1000m shortfall): no resume.
    let tight = NodeLedger::new(&node("n1", "1500m", "64Gi"), &pods);
    assert!(among(&[key("a")], &tight).is_err());
}

#[test]
fn the_victim_cap_allows_up_to_max_victims_per_resize() {
    let mut rules = Policy::default().preemption;
    rules.max_victims_per_resize = 2;
    assert_eq!(victim_cap(0, &rules), Ok(()));
    assert_eq!(victim_cap(2, &rules), Ok(()));
    assert_eq!(victim_cap(3, &rules), Err(OverCap { victims: 3, max: 2 }));
}
