//! Pod QoS class, exactly as upstream `pkg/apis/core/helper/qos.ComputePodQOS` (v1.37), which is
//! what `ValidatePodResize` compares: `Pod QOS Class may not change as a result of resizing`.
//!
//! Rules (v1.37.2 code; v1.33–v1.36 summed first, see [`spec_qos_class_on`]): only `cpu` and
//! `memory` count; regular containers *and all init containers* are judged one by one, each
//! resource on its own; when pod-level resources set cpu, memory or hugepages, only they count,
//! after `DefaultPodLevelResources`. Requests are read after `SetDefaults_Pod`: a limit without
//! a request stands for the request too.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};

use crate::resources::ResourceList;
use crate::upstream::quantity::{ResourceName, parse_nanos};
use crate::upstream::strategy::{
    default_container_requests, default_pod_level_resources, is_pod_level_resource,
};

/// A pod's quality-of-service class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    /// No cpu or memory requests or limits anywhere.
    BestEffort,
    /// Anything between.
    Burstable,
    /// Every container has cpu and memory limits equal to its requests.
    Guaranteed,
}

impl QosClass {
    /// The API spelling (`status.qosClass`).
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::BestEffort => "BestEffort",
            QosClass::Burstable => "Burstable",
            QosClass::Guaranteed => "Guaranteed",
        }
    }

    /// Parses the API spelling.
    pub fn parse(s: &str) -> Option<QosClass> {
        match s {
            "BestEffort" => Some(QosClass::BestEffort),
            "Burstable" => Some(QosClass::Burstable),
            "Guaranteed" => Some(QosClass::Guaranteed),
            _ => None,
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Upstream `GetPodQOS`: the stored `status.qosClass` when set, else computed. This is the class
/// the API server holds a resize to.
pub fn current_qos_class(pod: &Pod) -> QosClass {
    pod.status
        .as_ref()
        .and_then(|s| s.qos_class.as_deref())
        .and_then(QosClass::parse)
        .unwrap_or_else(|| qos_class(pod))
}

/// Upstream `ComputePodQOS` on the pod's spec.
pub fn qos_class(pod: &Pod) -> QosClass {
    pod.spec
        .as_ref()
        .map_or(QosClass::BestEffort, spec_qos_class)
}

/// Upstream `ComputePodQOS` on a spec, after the API server's defaulting (container requests
/// from limits, `DefaultPodLevelResources`; both idempotent, so a stored spec may be passed).
///
/// v1.37 judges each container, and each of cpu and memory within it, on its own
/// (`requirementsQOS`, `resourceQOS` in `pkg/apis/core/helper/qos/qos.go`): a resource is
/// BestEffort when its request and limit are both zero or unset, Guaranteed when they are equal
/// and non-zero, Burstable otherwise; a container mixing shapes is Burstable; the pod is the one
/// shape all containers share, else Burstable. Sums across containers would agree only while
/// every request is at most its limit, which invalid resizes break.
pub fn spec_qos_class(spec: &PodSpec) -> QosClass {
    if pod_level_resources(spec).is_some() {
        let mut defaulted = spec.clone();
        default_container_requests(&mut defaulted);
        default_pod_level_resources(&mut defaulted);
        let r = defaulted.resources.unwrap_or_default();
        return requirements_qos(r.requests.as_ref(), r.limits.as_ref());
    }
    let mut pod: Option<QosClass> = None;
    for (_, requests, limits) in container_requirements(spec) {
        match (requirements_qos(Some(&requests), limits), pod) {
            (QosClass::Burstable, _) => return QosClass::Burstable,
            (class, None) => pod = Some(class),
            (class, Some(seen)) if class != seen => return QosClass::Burstable,
            _ => {}
        }
    }
    pod.unwrap_or(QosClass::BestEffort)
}

/// [`spec_qos_class`] as Kubernetes minor `minor` computes it (`None`: the newest).
///
/// v1.33–v1.36 `ComputePodQOS` (`pkg/apis/core/helper/qos/qos.go`) sums instead: the positive
/// cpu and memory requests and limits of every container (init containers included) — or, with
/// `PodLevelResources` on (beta from v1.34), of a pod-level `resources` object that is merely
/// present, however empty, and not defaulted — and calls the pod BestEffort when both sums are
/// empty, Guaranteed when every container's (or the pod-level) limits name both cpu and memory
/// and the summed requests equal the summed limits resource by resource, Burstable otherwise.
pub fn spec_qos_class_on(spec: &PodSpec, minor: Option<u32>) -> QosClass {
    match minor {
        Some(m) if m <= 36 => legacy_qos_class(spec, m >= 34),
        _ => spec_qos_class(spec),
    }
}

fn legacy_qos_class(spec: &PodSpec, pod_level_gate: bool) -> QosClass {
    let mut requests: BTreeMap<&'static str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&'static str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let positive = |l: Option<&ResourceList>| -> Vec<(&'static str, i128)> {
        ResourceName::ALL
            .iter()
            .filter_map(|n| {
                let q = parse_nanos(&l?.get(n.key())?.0).unwrap_or(0);
                (q > 0).then_some((n.key(), q))
            })
            .collect()
    };
    let mut add = |requests_of: Vec<(&'static str, i128)>, limits_of: Vec<(&'static str, i128)>| {
        for (k, q) in requests_of {
            let sum = requests.entry(k).or_default();
            *sum = sum.saturating_add(q);
        }
        if limits_of.len() < ResourceName::ALL.len() {
            guaranteed = false;
        }
        for (k, q) in limits_of {
            let sum = limits.entry(k).or_default();
            *sum = sum.saturating_add(q);
        }
    };
    match spec.resources.as_ref().filter(|_| pod_level_gate) {
        Some(r) => add(positive(r.requests.as_ref()), positive(r.limits.as_ref())),
        None => {
            for c in spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
            {
                let reqs = effective_requests(c.resources.as_ref());
                add(
                    positive(Some(&reqs)),
                    positive(c.resources.as_ref().and_then(|r| r.limits.as_ref())),
                );
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests.iter().all(|(k, q)| limits.get(k) == Some(q))
    {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// Upstream `requirementsQOS`: the class of one set of requests and limits.
fn requirements_qos(requests: Option<&ResourceList>, limits: Option<&ResourceList>) -> QosClass {
    let empty = |l: Option<&ResourceList>| l.is_none_or(BTreeMap::is_empty);
    if empty(requests) && empty(limits) {
        return QosClass::BestEffort;
    }
    let mut class = None;
    for name in ResourceName::ALL {
        let amount = |l: Option<&ResourceList>| {
            l.and_then(|l| l.get(name.key()))
                .map_or(0, |q| parse_nanos(&q.0).unwrap_or(0))
        };
        // `resourceQOS`: unset is zero; `Equal` compares values.
        let (req, lim) = (amount(requests), amount(limits));
        let shape = if req != lim {
            QosClass::Burstable
        } else if req == 0 {
            QosClass::BestEffort
        } else {
            QosClass::Guaranteed
        };
        match (shape, class) {
            (QosClass::Burstable, _) => return QosClass::Burstable,
            (s, None) => class = Some(s),
            (s, Some(seen)) if s != seen => return QosClass::Burstable,
            _ => {}
        }
    }
    class.unwrap_or(QosClass::BestEffort)
}

/// Pod-level resources decide QoS when they name a supported pod-level resource (cpu, memory or
/// hugepages: `helper.IsPodLevelResourcesSet` with `PodLevelResourcesFixKubeletQOSClass`).
pub fn pod_level_resources(spec: &PodSpec) -> Option<&ResourceRequirements> {
    let r = spec.resources.as_ref()?;
    let sets =
        |l: Option<&ResourceList>| l.is_some_and(|l| l.keys().any(|k| is_pod_level_resource(k)));
    (sets(r.requests.as_ref()) || sets(r.limits.as_ref())).then_some(r)
}

/// Every container, init containers first as `qos.go` walks them, with its requests as QoS
/// reads them ([`effective_requests`]) and its limits.
fn container_requirements(
    spec: &PodSpec,
) -> impl Iterator<Item = (&Container, ResourceList, Option<&ResourceList>)> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| {
            let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
            (c, effective_requests(c.resources.as_ref()), limits)
        })
}

/// A container's requests after `SetDefaults_Pod`: a limit without a request is the request.
pub fn effective_requests(r: Option<&ResourceRequirements>) -> ResourceList {
    let mut out = r.and_then(|r| r.requests.clone()).unwrap_or_default();
    for (k, v) in r.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
        out.entry(k.clone()).or_insert_with(|| v.clone());
    }
    out
}

mod why;
pub use why::qos_reason;

#[cfg(test)]
mod tests;
