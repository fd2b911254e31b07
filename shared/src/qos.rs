//! Pod QoS class, exactly as upstream `pkg/apis/core/helper/qos.ComputePodQOS` (v1.37), which is
//! what `ValidatePodResize` compares: `Pod QOS Class may not change as a result of resizing`.
//!
//! Rules (upstream-resize.md §5): only `cpu` and `memory` count; quantities ≤ 0 are ignored;
//! regular containers *and all init containers* are summed; a container missing a positive cpu
//! or memory limit rules out Guaranteed; when pod-level resources set cpu or memory, only they
//! count. Requests are read after the API server's defaulting (`SetDefaults_Pod`): a limit
//! without a request stands for the request too.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Pod, PodSpec, ResourceRequirements};

use crate::quantity::{ResourceName, parse_nanos};
use crate::requests::{Accounting, spec_requests};
use crate::resources::ResourceList;

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

/// Upstream `ComputePodQOS` on a spec.
pub fn spec_qos_class(spec: &PodSpec) -> QosClass {
    let mut sums = Sums::default();
    if let Some(pod_level) = pod_level_resources(spec) {
        // Pod-level requests default from the containers' aggregate, then from the pod-level
        // limit (`defaultPodRequests`, KEP-2837) — the API server stores them that way.
        let aggregate = spec_requests(spec, None, Accounting::Desired);
        let mut requests = pod_level.requests.clone().unwrap_or_default();
        for name in ResourceName::ALL {
            if requests.contains_key(name.key()) {
                continue;
            }
            let from_containers = aggregate.get(name);
            let has_container_request = crate::pod::all_containers(spec)
                .any(|c| effective_requests(c.resources.as_ref()).contains_key(name.key()));
            if has_container_request && from_containers > 0 {
                requests.insert(
                    name.key().to_owned(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                        if name == ResourceName::Cpu {
                            format!("{from_containers}m")
                        } else {
                            from_containers.to_string()
                        },
                    ),
                );
            } else if let Some(limit) = pod_level.limits.as_ref().and_then(|l| l.get(name.key())) {
                requests.insert(name.key().to_owned(), limit.clone());
            }
        }
        sums.add(Some(&requests), pod_level.limits.as_ref());
    } else {
        for c in crate::pod::all_containers(spec) {
            let requests = effective_requests(c.resources.as_ref());
            sums.add(
                Some(&requests),
                c.resources.as_ref().and_then(|r| r.limits.as_ref()),
            );
        }
    }
    sums.class()
}

/// Pod-level resources count for QoS when they set cpu or memory
/// (`usePodLevelResources` with `PodLevelResourcesFixKubeletQOSClass`).
pub fn pod_level_resources(spec: &PodSpec) -> Option<&ResourceRequirements> {
    let r = spec.resources.as_ref()?;
    let sets = |l: Option<&ResourceList>| {
        l.is_some_and(|l| ResourceName::ALL.iter().any(|n| l.contains_key(n.key())))
    };
    (sets(r.requests.as_ref()) || sets(r.limits.as_ref())).then_some(r)
}

/// A container's requests after `SetDefaults_Pod`: a limit without a request is the request.
pub fn effective_requests(r: Option<&ResourceRequirements>) -> ResourceList {
    let mut out = r.and_then(|r| r.requests.clone()).unwrap_or_default();
    for (k, v) in r.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
        out.entry(k.clone()).or_insert_with(|| v.clone());
    }
    out
}

/// Running sums of positive cpu/memory requests and limits, in nano-units so that equality is
/// exact (`Quantity.Cmp`).
#[derive(Default)]
struct Sums {
    requests: BTreeMap<ResourceName, i128>,
    limits: BTreeMap<ResourceName, i128>,
    guaranteed: bool,
    seen_any: bool,
}

impl Sums {
    fn add(&mut self, requests: Option<&ResourceList>, limits: Option<&ResourceList>) {
        if !self.seen_any {
            self.guaranteed = true;
            self.seen_any = true;
        }
        for (name, amount) in positive(requests) {
            *self.requests.entry(name).or_default() += amount;
        }
        let mut limits_found = 0;
        for (name, amount) in positive(limits) {
            *self.limits.entry(name).or_default() += amount;
            limits_found += 1;
        }
        if limits_found < ResourceName::ALL.len() {
            self.guaranteed = false;
        }
    }

    fn class(&self) -> QosClass {
        if self.requests.is_empty() && self.limits.is_empty() {
            return QosClass::BestEffort;
        }
        let equal = self
            .requests
            .iter()
            .all(|(name, req)| self.limits.get(name) == Some(req));
        if self.guaranteed && equal && self.requests.len() == self.limits.len() {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }
}

/// The positive cpu and memory quantities of a list, in nano-units.
fn positive(list: Option<&ResourceList>) -> impl Iterator<Item = (ResourceName, i128)> + '_ {
    ResourceName::ALL.into_iter().filter_map(move |name| {
        let q = list?.get(name.key())?;
        let nanos = parse_nanos(&q.0).ok()?;
        (nanos > 0).then_some((name, nanos))
    })
}

#[cfg(test)]
mod tests;
