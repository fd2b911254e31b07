//! Exact, per-resource-name aggregation of container requests and limits, as upstream
//! `component-helpers/resource.AggregateContainerRequests` / `AggregateContainerLimits` with
//! default options (`aggregateContainerResourcesByFn`, v0.37.2): regular containers and sidecars
//! are summed; each ordinary init container counts with the sidecars started before it; the
//! result is the per-resource maximum of the two. A resource is present in the result exactly
//! when some container names it (even at zero), which is what upstream's defaulting and
//! validation test with `exists`.
//!
//! [`Amounts`] keeps every resource name (cpu, memory, hugepages, extended) in nano-units, so
//! `Cmp` and `Equal` are exact; [`crate::resources::Resources`] (millicores and bytes) is the
//! kubelet's rounded view and serves accounting, not validation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use crate::resources::ResourceList;
use crate::upstream::pod::is_sidecar;
use crate::upstream::quantity::{Format, canonical, parse_nanos};

/// Resource name → exact amount in nano-units.
pub type Amounts = BTreeMap<String, i128>;

/// Reads a resource list exactly. Unparseable quantities count as zero: the API server refuses
/// them while decoding, before anything resize-guard mirrors runs.
pub fn amounts(list: Option<&ResourceList>) -> Amounts {
    list.into_iter()
        .flatten()
        .map(|(k, q)| (k.clone(), parse_nanos(&q.0).unwrap_or(0)))
        .collect()
}

/// Upstream `AggregateContainerRequests(pod, PodResourcesOptions{})` over `spec` (requests as
/// stored, i.e. after `SetDefaults_Pod`; see
/// [`crate::upstream::strategy::default_container_requests`]).
pub fn container_requests(spec: &PodSpec) -> Amounts {
    values(&container_requests_spelled(spec))
}

/// Upstream `AggregateContainerLimits(pod, PodResourcesOptions{})` over `spec`.
pub fn container_limits(spec: &PodSpec) -> Amounts {
    values(&container_limits_spelled(spec))
}

/// [`container_requests`] with the spelling upstream's result would print in.
pub fn container_requests_spelled(spec: &PodSpec) -> Spelled {
    aggregate(spec, |c| {
        c.resources.as_ref().and_then(|r| r.requests.as_ref())
    })
}

/// [`container_limits`] with the spelling upstream's result would print in.
pub fn container_limits_spelled(spec: &PodSpec) -> Spelled {
    aggregate(spec, |c| {
        c.resources.as_ref().and_then(|r| r.limits.as_ref())
    })
}

/// Resource name → (exact amount, the format upstream's `Quantity` for it carries).
pub type Spelled = BTreeMap<String, (i128, Format)>;

/// The spelling upstream prints an aggregated amount in (`Quantity.String()`).
pub fn spell(amount: (i128, Format)) -> String {
    canonical(amount.0, amount.1)
}

fn values(s: &Spelled) -> Amounts {
    s.iter().map(|(k, (v, _))| (k.clone(), *v)).collect()
}

fn spelled(list: Option<&ResourceList>) -> Spelled {
    list.into_iter()
        .flatten()
        .map(|(k, q)| {
            (
                k.clone(),
                (parse_nanos(&q.0).unwrap_or(0), Format::of(&q.0)),
            )
        })
        .collect()
}

fn aggregate(spec: &PodSpec, of: impl Fn(&Container) -> Option<&ResourceList>) -> Spelled {
    let mut result = Spelled::new();
    for c in &spec.containers {
        add(&mut result, &spelled(of(c)));
    }
    let mut sidecars = Spelled::new();
    let mut init_peak = Spelled::new();
    for c in spec.init_containers.iter().flatten() {
        let own = spelled(of(c));
        let in_use = if is_sidecar(c) {
            add(&mut result, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut combined = Spelled::new();
            add(&mut combined, &own);
            add(&mut combined, &sidecars);
            combined
        };
        max(&mut init_peak, &in_use);
    }
    max(&mut result, &init_peak);
    result
}

/// `addResourceList`: adds `other` into `list`, creating missing names; a sum keeps the
/// receiver's format unless the receiver is zero (`Quantity.Add` in apimachinery v0.37.2).
/// Sums saturate like the amounts themselves ([`crate::upstream::quantity`]).
fn add(list: &mut Spelled, other: &Spelled) {
    for (k, (v, f)) in other {
        list.entry(k.clone())
            .and_modify(|e| {
                if e.0 == 0 {
                    e.1 = *f;
                }
                e.0 = e.0.saturating_add(*v);
            })
            .or_insert((*v, *f));
    }
}

/// `maxResourceList`: replaces an entry (format and all) by a strictly larger one.
fn max(list: &mut Spelled, other: &Spelled) {
    for (k, (v, f)) in other {
        match list.get(k) {
            Some((cur, _)) if *v <= *cur => {}
            _ => {
                list.insert(k.clone(), (*v, *f));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::container;

    #[test]
    fn sidecars_add_and_init_containers_peak_with_earlier_sidecars() {
        // max(app 2 + sidecar 500m, init 3 + the sidecar started before it) = 3500m.
        let spec = PodSpec {
            containers: vec![container("app").request("cpu", "2").build()],
            init_containers: Some(vec![
                container("proxy").request("cpu", "500m").sidecar().build(),
                container("setup")
                    .request("cpu", "3")
                    .request("memory", "0")
                    .build(),
            ]),
            ..Default::default()
        };
        let got = container_requests(&spec);
        assert_eq!(got["cpu"], 3_500_000_000);
        // A name present only at zero is still present (upstream `exists` checks rely on it).
        assert_eq!(got.get("memory"), Some(&0));
        // A zero receiver takes the addend's format (`Quantity.Add`): 0 + 256Mi prints 256Mi.
        let spec = PodSpec {
            containers: vec![
                container("a").request("memory", "0").build(),
                container("b").request("memory", "256Mi").build(),
            ],
            ..Default::default()
        };
        assert_eq!(spell(container_requests_spelled(&spec)["memory"]), "256Mi");
        assert!(container_limits(&spec).is_empty());
    }

    #[test]
    fn sums_of_saturated_amounts_saturate_instead_of_overflowing() {
        // Found by `fuzz_review`: a limit that saturates (`9223372036854775807Ei`) plus any
        // other container's amount overflowed i128 (a panic in debug builds, a negative sum in
        // release builds).
        let spec = PodSpec {
            containers: vec![
                container("a").request("nvidia.com/gpu", "1").build(),
                container("b")
                    .request("nvidia.com/gpu", "9223372036854775807Ei")
                    .build(),
            ],
            init_containers: Some(vec![
                container("proxy")
                    .request("nvidia.com/gpu", "9223372036854775807Ei")
                    .sidecar()
                    .build(),
            ]),
            ..Default::default()
        };
        assert_eq!(container_requests(&spec)["nvidia.com/gpu"], i128::MAX);
    }
}
