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

use crate::pod::is_sidecar;
use crate::quantity::parse_nanos;
use crate::resources::ResourceList;

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
/// stored, i.e. after `SetDefaults_Pod`; see [`crate::strategy::default_container_requests`]).
pub fn container_requests(spec: &PodSpec) -> Amounts {
    aggregate(spec, |c| {
        amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
    })
}

/// Upstream `AggregateContainerLimits(pod, PodResourcesOptions{})` over `spec`.
pub fn container_limits(spec: &PodSpec) -> Amounts {
    aggregate(spec, |c| {
        amounts(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
    })
}

fn aggregate(spec: &PodSpec, of: impl Fn(&Container) -> Amounts) -> Amounts {
    let mut result = Amounts::new();
    for c in &spec.containers {
        add(&mut result, &of(c));
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let own = of(c);
        let in_use = if is_sidecar(c) {
            add(&mut result, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut combined = own;
            add(&mut combined, &sidecars);
            combined
        };
        max(&mut init_peak, &in_use);
    }
    max(&mut result, &init_peak);
    result
}

/// `addResourceList`: adds `other` into `list`, creating missing names.
pub fn add(list: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        *list.entry(k.clone()).or_default() += v;
    }
}

/// `maxResourceList`: raises `list` to `other` per name, creating missing names.
pub fn max(list: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        let e = list.entry(k.clone()).or_insert(*v);
        if *v > *e {
            *e = *v;
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
        assert!(container_limits(&spec).is_empty());
    }
}
