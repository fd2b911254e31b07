//! QoS-preserving repair of a resize, and the culprits that name why a resize changes the class.
//!
//! The API server refuses any resize that changes `status.qosClass`. The common case is a
//! Guaranteed pod resized by a tool that only moves requests (VPA `RequestsOnly`) or only limits:
//! the minimal repair is to move the other side along, per container and resource. Which side
//! wins follows what the resize changed: a changed request carries the limit with it, a changed
//! limit carries the request; when both changed to different values, the request wins (it is what
//! the scheduler and kubelet account). A removed value is restored from the old pod.
//!
//! No repair exists for BestEffort (it can never gain requests in place), for a resize that would
//! make a pod BestEffort (requests cannot be removed), or for Burstable → Guaranteed (any change
//! that keeps the pod Burstable would contradict what was asked in some container).

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::resources::ResourceList;
use crate::upstream::qos::{QosClass, effective_requests, pod_level_resources, spec_qos_class};
use crate::upstream::quantity::{ResourceName, parse_nanos};

/// Where a resource setting lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `spec.containers[name=…]`.
    Container(String),
    /// `spec.initContainers[name=…]` (sidecars and ordinary init containers).
    InitContainer(String),
    /// Pod-level `spec.resources`.
    Pod,
}

impl Target {
    /// `container app`, `init container proxy`, `pod-level resources`.
    pub fn describe(&self) -> String {
        match self {
            Target::Container(n) => format!("container {n}"),
            Target::InitContainer(n) => format!("init container {n}"),
            Target::Pod => "pod-level resources".to_owned(),
        }
    }
}

/// `requests` or `limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `resources.requests`.
    Requests,
    /// `resources.limits`.
    Limits,
}

impl Field {
    /// The API key.
    pub fn key(self) -> &'static str {
        match self {
            Field::Requests => "requests",
            Field::Limits => "limits",
        }
    }
}

/// One value the repair sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairChange {
    /// Where.
    pub target: Target,
    /// Which resource.
    pub resource: ResourceName,
    /// Requests or limits.
    pub field: Field,
    /// The value the resize asked for (absent if it asked for none).
    pub from: Option<String>,
    /// The value the repair sets.
    pub to: String,
}

impl RepairChange {
    /// `container app: limits.cpu 250m → 500m`.
    pub fn describe(&self) -> String {
        format!(
            "{}: {}.{} {} → {}",
            self.target.describe(),
            self.field.key(),
            self.resource,
            self.from.as_deref().unwrap_or("(unset)"),
            self.to
        )
    }
}

/// A minimal change to a resize that keeps the pod's QoS class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosRepair {
    /// The class kept.
    pub class: QosClass,
    /// The values to set.
    pub changes: Vec<RepairChange>,
}

impl QosRepair {
    /// Applies the changes to a spec.
    pub fn apply(&self, spec: &mut PodSpec) {
        for c in &self.changes {
            let Some(req) = resources_mut(spec, &c.target) else {
                continue;
            };
            let list = match c.field {
                Field::Requests => &mut req.requests,
                Field::Limits => &mut req.limits,
            };
            list.get_or_insert_with(Default::default)
                .insert(c.resource.key().to_owned(), Quantity(c.to.clone()));
        }
    }

    /// `container app: limits.cpu 250m → 500m; …`.
    pub fn describe(&self) -> String {
        self.changes
            .iter()
            .map(RepairChange::describe)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn resources_mut<'a>(
    spec: &'a mut PodSpec,
    target: &Target,
) -> Option<&'a mut ResourceRequirements> {
    match target {
        Target::Pod => Some(spec.resources.get_or_insert_with(Default::default)),
        Target::Container(n) => spec
            .containers
            .iter_mut()
            .find(|c| &c.name == n)
            .map(|c| c.resources.get_or_insert_with(Default::default)),
        Target::InitContainer(n) => spec
            .init_containers
            .iter_mut()
            .flatten()
            .find(|c| &c.name == n)
            .map(|c| c.resources.get_or_insert_with(Default::default)),
    }
}

/// Every place resources are set in a spec, with its target.
pub fn targets(spec: &PodSpec) -> Vec<(Target, Option<&ResourceRequirements>)> {
    let mut out: Vec<(Target, Option<&ResourceRequirements>)> = spec
        .containers
        .iter()
        .map(|c| (Target::Container(c.name.clone()), c.resources.as_ref()))
        .collect();
    out.extend(
        spec.init_containers
            .iter()
            .flatten()
            .map(|c| (Target::InitContainer(c.name.clone()), c.resources.as_ref())),
    );
    if let Some(r) = pod_level_resources(spec) {
        out.push((Target::Pod, Some(r)));
    }
    out
}

fn find<'a>(spec: &'a PodSpec, target: &Target) -> Option<&'a ResourceRequirements> {
    targets(spec)
        .into_iter()
        .find(|(t, _)| t == target)
        .and_then(|(_, r)| r)
}

/// The targets that decide `new`'s QoS class, each with its requests (as defaulted) and limits
/// in `old`, then in `new`: with pod-level resources only they decide it; otherwise only the
/// containers do.
fn deciding<'a>(
    old: &'a PodSpec,
    new: &'a PodSpec,
) -> impl Iterator<Item = (Target, [ResourceList; 4])> + 'a {
    let pod_level = pod_level_resources(new).is_some();
    let limits =
        |r: Option<&ResourceRequirements>| r.and_then(|r| r.limits.clone()).unwrap_or_default();
    targets(new)
        .into_iter()
        .filter(move |(target, _)| (*target == Target::Pod) == pod_level)
        .map(move |(target, res)| {
            let old_res = find(old, &target);
            let sides = [
                effective_requests(old_res),
                limits(old_res),
                effective_requests(res),
                limits(res),
            ];
            (target, sides)
        })
}

fn positive(list: &ResourceList, name: ResourceName) -> Option<(&Quantity, i128)> {
    let q = list.get(name.key())?;
    let n = parse_nanos(&q.0).ok()?;
    (n > 0).then_some((q, n))
}

/// The repair for a resize from `old` (of class `from`) to `new`, if one exists.
pub fn repair(old: &PodSpec, from: QosClass, new: &PodSpec) -> Option<QosRepair> {
    if from != QosClass::Guaranteed || spec_qos_class(new) == QosClass::Guaranteed {
        return None;
    }
    let mut changes = Vec::new();
    for (target, [old_req, old_lim, new_req, new_lim]) in deciding(old, new) {
        for name in ResourceName::ALL {
            let req = positive(&new_req, name);
            let lim = positive(&new_lim, name);
            if let (Some((_, r)), Some((_, l))) = (req, lim)
                && r == l
            {
                continue;
            }
            let req_changed = new_req.get(name.key()) != old_req.get(name.key());
            let lim_changed = new_lim.get(name.key()) != old_lim.get(name.key());
            // The value both sides should take.
            let chosen = match (req, lim) {
                (Some((q, _)), _) if req_changed || !lim_changed || lim.is_none() => q.clone(),
                (_, Some((q, _))) => q.clone(),
                _ => match positive(&old_lim, name) {
                    Some((q, _)) => q.clone(),
                    // Old pod was Guaranteed, so this cannot happen for a real pod.
                    None => return None,
                },
            };
            for (field, list) in [(Field::Requests, &new_req), (Field::Limits, &new_lim)] {
                let current = list.get(name.key());
                let same = current
                    .and_then(|q| parse_nanos(&q.0).ok())
                    .zip(parse_nanos(&chosen.0).ok())
                    .is_some_and(|(a, b)| a == b);
                if !same {
                    changes.push(RepairChange {
                        target: target.clone(),
                        resource: name,
                        field,
                        from: current.map(|q| q.0.clone()),
                        to: chosen.0.clone(),
                    });
                }
            }
        }
    }
    let mut repaired = new.clone();
    let fix = QosRepair {
        class: QosClass::Guaranteed,
        changes,
    };
    fix.apply(&mut repaired);
    (spec_qos_class(&repaired) == QosClass::Guaranteed).then_some(fix)
}

/// One reason a resize changes the QoS class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Culprit {
    /// Where.
    pub target: Target,
    /// Which resource.
    pub resource: ResourceName,
    /// What is wrong with it: `request 500m ≠ limit 250m`.
    pub detail: String,
}

impl Culprit {
    /// `container app: cpu request 500m ≠ limit 250m`.
    pub fn describe(&self) -> String {
        format!(
            "{}: {} {}",
            self.target.describe(),
            self.resource,
            self.detail
        )
    }
}

/// The containers and resources that move a resize from class `from` to class `to`.
pub fn culprits(old: &PodSpec, from: QosClass, new: &PodSpec, to: QosClass) -> Vec<Culprit> {
    let mut out = Vec::new();
    for (target, [old_req, old_lim, new_req, new_lim]) in deciding(old, new) {
        for name in ResourceName::ALL {
            let show = |l: &ResourceList| {
                l.get(name.key())
                    .map_or_else(|| "unset".to_owned(), |q| q.0.clone())
            };
            let (req, lim) = (positive(&new_req, name), positive(&new_lim, name));
            let changed = new_req.get(name.key()) != old_req.get(name.key())
                || new_lim.get(name.key()) != old_lim.get(name.key());
            let detail = match (from, to) {
                (QosClass::Guaranteed, _) => match (req, lim) {
                    (Some((_, r)), Some((_, l))) if r == l => continue,
                    (_, None) => format!("has no {} limit", name),
                    _ => format!("request {} ≠ limit {}", show(&new_req), show(&new_lim)),
                },
                (QosClass::BestEffort, _) if req.is_some() || lim.is_some() => format!(
                    "gains request {} / limit {}",
                    show(&new_req),
                    show(&new_lim)
                ),
                (QosClass::Burstable, QosClass::Guaranteed) if changed => format!(
                    "request {} = limit {} (was request {} / limit {})",
                    show(&new_req),
                    show(&new_lim),
                    show(&old_req),
                    show(&old_lim)
                ),
                (QosClass::Burstable, QosClass::BestEffort) if changed => {
                    format!(
                        "request and limit removed (were {} / {})",
                        show(&old_req),
                        show(&old_lim)
                    )
                }
                _ => continue,
            };
            out.push(Culprit {
                target: target.clone(),
                resource: name,
                detail,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
