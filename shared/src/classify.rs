//! The one entry point both programs use: what is this resize?
//!
//! [`classify`] judges a `pods/resize` request (old stored pod, new pod as the mutating webhook
//! receives it) in the order the API server and the kubelet would: first the object is made what
//! the resize strategy will make of it ([`crate::upstream::strategy::prepare_resize`]); then
//! nothing to do (no cpu or memory value changes and built-in validation lets it through) → refused
//! by built-in validation for anything but QoS ([`crate::upstream::validation`]: resize-guard steps
//! aside so the user sees upstream's message; a resize that changes no cpu or memory value too) →
//! QoS class change (resize-guard explains or repairs it) → refused by
//! `NodeDeclaredFeatureValidator` ([`crate::upstream::node_features`]: step aside) → Infeasible
//! (memory checked first) → fits now or Deferred, with a preemption plan for the Deferred case.
//! [`assess`] is the same judgement for a pod whose resize is already stored (the controller's view
//! of a Deferred pod).

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};

use crate::budget::Budgets;
use crate::ledger::NodeLedger;
use crate::pod::{self, PodKey};
use crate::policy::Policy;
use crate::repair::{QosRepair, Target, culprits, repair, targets};
use crate::resources::{ResourceList, Resources};
use crate::upstream::capacity;
use crate::upstream::node_features;
use crate::upstream::qos::{current_qos_class, spec_qos_class_on};
use crate::upstream::quantity::ResourceName;
use crate::upstream::requests::{Accounting, spec_requests};
use crate::upstream::strategy::prepare_resize_on;
use crate::upstream::validation::validate_resize_on;
use crate::verdict::{Deferral, Denial, Fit, Infeasibility, QosChange, Verdict};
use crate::victims::{Candidates, Preemptor, select_victims};

/// Everything besides the pod that a decision reads.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The node the pod is bound to, with its pods; `None` if unbound or not (yet) known.
    pub ledger: Option<&'a NodeLedger>,
    /// PodDisruptionBudgets.
    pub budgets: &'a Budgets,
    /// The policy in force.
    pub policy: &'a Policy,
    /// resize-guard's own namespace (always excluded).
    pub install_namespace: &'a str,
    /// The cluster's Kubernetes minor (35 for v1.35): built-in validation is mirrored as that
    /// minor has it ([`crate::upstream::validation::validate_resize_on`]); `None` means the newest.
    pub minor: Option<u32>,
}

/// Classifies a resize from `old` (stored) to `new` (requested).
pub fn classify(old: &Pod, new: &Pod, ctx: &Context<'_>) -> Verdict {
    if old.spec.is_none() || new.spec.is_none() {
        return Verdict::Skipped("pod has no spec".to_owned());
    }
    if let Some(v) = precheck(new, ctx) {
        return v;
    }
    let prepared = prepare_resize_on(old, new, ctx.minor);
    let (Some(old_spec), Some(new_spec)) = (old.spec.as_ref(), prepared.spec.as_ref()) else {
        return Verdict::Skipped("pod has no spec".to_owned());
    };
    // kube-apiserver validates every resize, whatever it changes (`ValidatePodResize`,
    // pkg/apis/core/validation/validation.go): one that changes no cpu or memory value is
    // NoChange only if validation lets it through. Otherwise it is upstream's to refuse, in its
    // words: pod-level `hugepages-2Mi` added is "only cpu and memory resources are mutable at
    // pod-level" (`validatePodLevelResourcesResize`, v1.36+), and a pod with pod-level resources
    // cannot be resized at all on v1.33–v1.35.
    let invalid = validate_resize_on(old, &prepared, ctx.minor).err();
    if !resources_changed(old_spec, new_spec) {
        return invalid.map_or(Verdict::NoChange, |e| Verdict::Invalid(e.to_string()));
    }
    // `ValidatePodResize` reports the QoS error together with every other error, except for
    // static and Windows pods, where it stops first.
    if let Some(e) = invalid.as_ref().filter(|e| e.alone) {
        return Verdict::Invalid(e.to_string());
    }
    let from = current_qos_class(old);
    let to = spec_qos_class_on(new_spec, ctx.minor);
    if from != to {
        let repair =
            repair(old_spec, from, new_spec).filter(|r| repair_is_valid(old, new, r, ctx.minor));
        return Verdict::QosChange(QosChange {
            from,
            to,
            culprits: culprits(old_spec, from, new_spec, to),
            repair,
            also_invalid: invalid,
        });
    }
    if let Some(e) = invalid {
        return Verdict::Invalid(e.to_string());
    }
    // `NodeDeclaredFeatureValidator` is on from v1.36 (beta; alpha and off in v1.35).
    if let Some(ledger) = ctx.ledger
        && ctx.minor.is_none_or(|m| m >= 36)
        && let Some(refusal) =
            node_features::refusal(old, &prepared, &ledger.node, &ledger.declared_features)
    {
        return Verdict::Invalid(refusal);
    }
    // The resize strategy keeps the stored status, so allocated/actual come from `old`.
    judge_room(&prepared, new_spec, old.status.as_ref(), ctx)
}

/// A repair is only offered when the repaired resize passes built-in validation too. It is
/// checked as the webhook applies it: to the request, before the resize strategy.
fn repair_is_valid(old: &Pod, new: &Pod, repair: &QosRepair, minor: Option<u32>) -> bool {
    let mut repaired = new.clone();
    if let Some(spec) = repaired.spec.as_mut() {
        repair.apply(spec);
    }
    let repaired = prepare_resize_on(old, &repaired, minor);
    validate_resize_on(old, &repaired, minor).is_ok()
}

/// Judges a pod whose desired resources are already in its spec: Infeasible, Fits or Deferred.
pub fn assess(pod: &Pod, ctx: &Context<'_>) -> Verdict {
    let Some(spec) = pod.spec.as_ref() else {
        return Verdict::Skipped("pod has no spec".to_owned());
    };
    if let Some(v) = precheck(pod, ctx) {
        return v;
    }
    judge_room(pod, spec, pod.status.as_ref(), ctx)
}

fn precheck(pod: &Pod, ctx: &Context<'_>) -> Option<Verdict> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    if ctx.policy.excludes_namespace(ns, ctx.install_namespace) {
        return Some(Verdict::Skipped(format!(
            "namespace {ns} is excluded by policy"
        )));
    }
    if let Err(e) = pod::validate_quantities(pod) {
        return Some(Verdict::Denied(Denial::InvalidQuantity(e.to_string())));
    }
    None
}

fn judge_room(pod: &Pod, spec: &PodSpec, status: Option<&PodStatus>, ctx: &Context<'_>) -> Verdict {
    let Some(ledger) = ctx.ledger else {
        return Verdict::Skipped(match pod::node_name(pod) {
            Some(n) => format!("node {n} is not known to resize-guard yet"),
            None => {
                "pod is not bound to a node; the scheduler places it at its new size".to_owned()
            }
        });
    };
    // An allocatable the node has not reported is not zero: judging against it would call every
    // resize on the node Infeasible (and, on a full-looking node, plan preemption). Step aside
    // and say why; the kubelet admits or defers against the allocatable it knows.
    if let Some(why) = &ledger.allocatable_unknown {
        return Verdict::Skipped(format!(
            "node {} {why}, so whether the resize fits is unknown; the kubelet decides",
            ledger.node
        ));
    }
    // Infeasible exactly as upstream decides it on this minor (`crate::upstream::capacity`): v1.36+
    // `PodResizeValidator` (exact `PodRequests` against allocatable), v1.33–v1.35 the kubelet
    // (`GetResourceRequest`, rounded). The verdict names the first of memory, cpu (the kubelet's
    // order) and keeps every resource beyond allocatable in upstream's order.
    let beyond = if ctx.minor.is_none_or(|m| m >= 36) {
        capacity::beyond_allocatable(capacity::pod_requests(spec), ledger.allocatable_exact)
    } else {
        capacity::kubelet_beyond(capacity::kubelet_requests(spec), ledger.allocatable_exact)
    };
    let first = [ResourceName::Memory, ResourceName::Cpu]
        .into_iter()
        .find_map(|name| beyond.iter().find(|e| e.resource == name));
    if let Some(first) = first {
        return Verdict::Infeasible(Infeasibility {
            node: ledger.node.clone(),
            resource: first.resource,
            requested: first.requested,
            allocatable: first.allocatable,
            beyond: beyond.clone(),
            minor: ctx.minor,
        });
    }
    let key = PodKey::of(pod);
    let request = spec_requests(spec, status, Accounting::Resizing);
    let used = ledger.used_by_others(&key.uid);
    if (request + used).fits_in(ledger.allocatable) {
        return Verdict::Fits(Fit {
            node: ledger.node.clone(),
            request,
            used,
            allocatable: ledger.allocatable,
        });
    }
    let preemptor = Preemptor::new(pod, spec, status);
    Verdict::Deferred(Deferral {
        node: ledger.node.clone(),
        request,
        used,
        allocatable: ledger.allocatable,
        shortfall: (request + used).excess_over(ledger.allocatable),
        plan: select_victims(
            &preemptor,
            ledger,
            ctx.budgets,
            ctx.policy,
            ctx.install_namespace,
            Candidates::All,
        ),
    })
}

/// Which cpu/memory requests and limits a resources block sets at all: an entry set to zero is a
/// change from no entry, though both read as zero in [`Resources`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Declared {
    cpu_request: bool,
    memory_request: bool,
    cpu_limit: bool,
    memory_limit: bool,
}

impl Declared {
    fn of(requests: Option<&ResourceList>, limits: Option<&ResourceList>) -> Declared {
        let has = |l: Option<&ResourceList>, k: &str| l.is_some_and(|l| l.contains_key(k));
        Declared {
            cpu_request: has(requests, "cpu"),
            memory_request: has(requests, "memory"),
            cpu_limit: has(limits, "cpu"),
            memory_limit: has(limits, "memory"),
        }
    }
}

/// True when any cpu/memory request or limit differs (by value, not spelling) anywhere a resize
/// can change it: containers, init containers, pod-level resources.
pub fn resources_changed(old: &PodSpec, new: &PodSpec) -> bool {
    let values = |spec: &PodSpec| -> Vec<(Target, Resources, Resources, Declared)> {
        let mut all = targets(spec);
        if let Some(r) = spec.resources.as_ref()
            && !all.iter().any(|(t, _)| *t == Target::Pod)
        {
            all.push((Target::Pod, Some(r)));
        }
        all.into_iter()
            .map(|(t, r)| {
                let req = r.and_then(|r| r.requests.as_ref());
                let lim = r.and_then(|r| r.limits.as_ref());
                (
                    t,
                    Resources::from_opt_list(req),
                    Resources::from_opt_list(lim),
                    Declared::of(req, lim),
                )
            })
            .collect()
    };
    values(old) != values(new)
}

#[cfg(test)]
mod tests;
