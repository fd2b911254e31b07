//! Why a pod has its QoS class, in words an operator can act on (`kubectl resize-guard
//! explain`): the container and resource that make a pod Burstable, or the rule that makes it
//! Guaranteed or BestEffort. Derived from the same per-container shapes [`super::spec_qos_class`]
//! judges, so the reason names what decides the class.

use k8s_openapi::api::core::v1::PodSpec;

use super::{
    QosClass, container_requirements, effective_requests, pod_level_resources, spec_qos_class_on,
};
use crate::resources::ResourceList;
use crate::upstream::quantity::{ResourceName, parse_nanos};

/// The class of `spec` on Kubernetes minor `minor` (`None`: the newest) and why.
pub fn qos_reason(spec: &PodSpec, minor: Option<u32>) -> (QosClass, String) {
    let class = spec_qos_class_on(spec, minor);
    if let Some(r) = pod_level_resources(spec) {
        let requests = effective_requests(Some(r));
        let why = match class {
            QosClass::Guaranteed => {
                "pod-level resources set cpu and memory limits equal to their requests".to_owned()
            }
            QosClass::BestEffort => "pod-level resources set no cpu or memory".to_owned(),
            QosClass::Burstable => format!(
                "pod-level resources: {}",
                mismatch(&requests, r.limits.as_ref())
                    .unwrap_or_else(|| "requests and limits differ".to_owned())
            ),
        };
        return (class, why);
    }
    let why = match class {
        QosClass::Guaranteed => {
            "every container sets cpu and memory limits equal to its requests".to_owned()
        }
        QosClass::BestEffort => "no container requests or limits cpu or memory".to_owned(),
        QosClass::Burstable => burstable_reason(spec),
    };
    (class, why)
}

/// The first container that is not Guaranteed on its own, and how.
fn burstable_reason(spec: &PodSpec) -> String {
    let mut empty = Vec::new();
    for (c, requests, limits) in container_requirements(spec) {
        if requests.is_empty() && limits.is_none_or(|l| l.is_empty()) {
            empty.push(c.name.clone());
        } else if let Some(m) = mismatch(&requests, limits) {
            return format!("container {}: {m}", c.name);
        }
    }
    match empty.first() {
        Some(name) => format!(
            "container {name} sets no cpu or memory while others do (a Guaranteed pod needs \
             limits equal to requests in every container)"
        ),
        None => "requests and limits differ across containers".to_owned(),
    }
}

/// How one set of requests and limits falls short of Guaranteed (cpu first), if it does.
fn mismatch(requests: &ResourceList, limits: Option<&ResourceList>) -> Option<String> {
    for name in ResourceName::ALL {
        let amount = |l: Option<&ResourceList>| {
            l.and_then(|l| l.get(name.key()))
                .map(|q| parse_nanos(&q.0).unwrap_or(0))
        };
        let text = |l: Option<&ResourceList>| {
            l.and_then(|l| l.get(name.key()))
                .map(|q| q.0.clone())
                .unwrap_or_default()
        };
        match (amount(Some(requests)), amount(limits)) {
            (Some(r), Some(l)) if r == l && r > 0 => {}
            (Some(r), Some(l)) if r != l => {
                return Some(format!(
                    "{name} request {} ≠ limit {}",
                    text(Some(requests)),
                    text(limits)
                ));
            }
            (None | Some(0), None | Some(0)) => {
                return Some(format!("no {name} request or limit"));
            }
            (_, None) => return Some(format!("no {name} limit")),
            _ => return Some(format!("no {name} request")),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{PodBuilder, container};

    fn reason(c: crate::fixture::ContainerBuilder, minor: Option<u32>) -> (QosClass, String) {
        let pod = PodBuilder::new("ns", "p")
            .container(container("side").guaranteed("100m", "64Mi"))
            .container(c)
            .build();
        qos_reason(pod.spec.as_ref().unwrap(), minor)
    }

    #[test]
    fn names_the_container_and_resource_that_make_a_pod_burstable() {
        let (class, why) = reason(container("app").guaranteed("250m", "256Mi"), None);
        assert_eq!(class, QosClass::Guaranteed);
        assert_eq!(
            why,
            "every container sets cpu and memory limits equal to its requests"
        );

        for minor in [Some(35), None] {
            let c = container("app")
                .guaranteed("250m", "256Mi")
                .request("cpu", "100m");
            let (class, why) = reason(c, minor);
            assert_eq!(class, QosClass::Burstable);
            assert_eq!(why, "container app: cpu request 100m ≠ limit 250m");
        }
        let (_, why) = reason(container("app").request("memory", "64Mi"), None);
        assert_eq!(why, "container app: no cpu request or limit");
        let (_, why) = reason(container("app"), None);
        assert!(
            why.starts_with("container app sets no cpu or memory"),
            "{why}"
        );

        let none = PodBuilder::new("ns", "p")
            .container(container("app"))
            .build();
        let (class, why) = qos_reason(none.spec.as_ref().unwrap(), None);
        assert_eq!(class, QosClass::BestEffort);
        assert_eq!(why, "no container requests or limits cpu or memory");
    }
}
