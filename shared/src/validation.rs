//! The resource rules of kube-apiserver's built-in `pods/resize` validation, so that `/mutate`
//! can step aside for a resize the API server will refuse anyway and the user sees upstream's
//! precise message instead of a resize-guard verdict on an object that never gets stored.
//!
//! Mirrors, for v1.37.2 (`pkg/apis/core/validation/validation.go`):
//! - `validateResourceRequirements` for every container and init container (non-negative
//!   quantities, request ≤ limit, non-overcommittable resources need request = limit, hugepages
//!   need cpu or memory) and `validatePodResources` for pod-level resources (supported names,
//!   request ≤ limit, `validatePodResourceConsistency`);
//! - `ValidatePodResize`: static and Windows pods, `isPodResizeRequestSupported`, pod-level
//!   removal and non-cpu/memory changes (`validatePodLevelResourcesResize`), container count and
//!   order, requests/limits removal (`validateContainerResize`, init containers included since
//!   `InPlacePodVerticalScalingInitContainers` is GA), only cpu and memory mutable (a changed
//!   `resizePolicy` counts as another change), RestartContainer on a resized non-sidecar init
//!   container.
//!
//! Older minors differ ([`validate_resize_on`], each rule cited to that minor's
//! `ValidatePodResize` / `validateContainerResize`):
//! - v1.33–v1.34: a pod with pod-level resources cannot be resized at all, an error returned
//!   alone, before everything else (`isPodLevelResourcesSet`); v1.35: refused with the
//!   `InPlacePodLevelResourcesVerticalScaling` gate (alpha, off) named, after the QoS check;
//! - v1.33: a memory limit cannot be lowered, or added, unless the container's memory
//!   `resizePolicy` is `RestartContainer`;
//! - v1.33–v1.35: only sidecars' resources are mutable among init containers ("resources for
//!   non-sidecar init containers are immutable"; a sidecar's other resources: "only cpu and memory
//!   resources for sidecar containers are mutable", both at `spec`), and there is no
//!   RestartContainer rule for them.
//!
//! The QoS rule is not here: a QoS change on an otherwise valid resize is resize-guard's to
//! explain ([`crate::qos`]). The first violation found is returned, worded as upstream's
//! `field.Error` (`<path>: <type>: <detail>`).

use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::aggregate::{self, Amounts, amounts};
use crate::pod::is_sidecar;
use crate::quantity::parse_nanos;
use crate::resources::ResourceList;
use crate::strategy::{is_hugepages, is_overcommit_allowed, is_pod_level_resource};

/// One error of the API server's, in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalidity {
    /// The field path, e.g. `spec.containers[0].resources.requests`.
    pub field: String,
    /// The error, e.g. `Invalid value: "1Gi": must be less than or equal to memory limit of 256Mi`.
    pub detail: String,
}

impl fmt::Display for Invalidity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.detail)
        } else {
            write!(f, "{}: {}", self.field, self.detail)
        }
    }
}

/// Every error the API server will report for a resize (besides a QoS change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalidities {
    /// The errors, in upstream's order as far as it has one (it lists several from Go map
    /// iteration, which has none).
    pub errors: Vec<Invalidity>,
    /// Upstream returns this error alone, before it compares QoS classes (static and Windows
    /// pods); all other errors are reported together with a QoS change, if there is one.
    pub alone: bool,
}

impl fmt::Display for Invalidities {
    /// As `field.ErrorList.ToAggregate()` prints: one error bare, several as `[a, b]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        match all.as_slice() {
            [one] => f.write_str(one),
            _ => write!(f, "[{}]", all.join(", ")),
        }
    }
}

/// Collects errors in order.
#[derive(Default)]
struct Errors(Vec<Invalidity>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, detail: String) {
        self.0.push(Invalidity {
            field: field.into(),
            detail,
        });
    }

    fn invalid(&mut self, field: impl Into<String>, value: &str, detail: impl fmt::Display) {
        self.push(field, format!("Invalid value: \"{value}\": {detail}"));
    }

    fn forbidden(&mut self, field: impl Into<String>, detail: &str) {
        self.push(field, format!("Forbidden: {detail}"));
    }

    fn result(self, alone: bool) -> Result<(), Invalidities> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Invalidities {
                errors: self.0,
                alone,
            })
        }
    }
}

/// Checks a resize from the stored `old` pod to `new`, which must already be what the resize
/// strategy makes of the request ([`crate::strategy::prepare_resize`]). Quantities are quoted
/// as the objects spell them: the API server sends webhooks the canonical spelling, which is
/// what its own messages print.
pub fn validate_resize(old: &Pod, new: &Pod) -> Result<(), Invalidities> {
    validate_resize_on(old, new, None)
}

/// [`validate_resize`] as Kubernetes minor `minor` (33 for v1.33) validates; `None` is the
/// newest (v1.37).
pub fn validate_resize_on(old: &Pod, new: &Pod, minor: Option<u32>) -> Result<(), Invalidities> {
    let (Some(old_spec), Some(new_spec)) = (old.spec.as_ref(), new.spec.as_ref()) else {
        return Ok(());
    };
    let minor = minor.unwrap_or(u32::MAX);
    // v1.33–v1.34 `ValidatePodResize`: "pods with pod-level resources cannot be resized", alone.
    if minor <= 34 && (pod_level_set(old_spec) || pod_level_set(new_spec)) {
        let mut only = Errors::default();
        // `field.NewPath("")` prints as `[]`.
        only.forbidden("[]", "pods with pod-level resources cannot be resized");
        return only.result(true);
    }
    let mut e = Errors::default();
    validate_spec_resources(new_spec, &mut e);
    if crate::pod::is_mirror(old) || old_spec.os.as_ref().is_some_and(|os| os.name == "windows") {
        let mut only = Errors::default();
        let what = if crate::pod::is_mirror(old) {
            "static"
        } else {
            "windows"
        };
        // `field.NewPath("")` prints as `[]` (`Path.String`: an unnamed element is `[index]`).
        only.forbidden("[]", &format!("{what} pods cannot be resized"));
        return only.result(true);
    }
    if !resize_supported_by_node(old) {
        e.forbidden("spec", "Pod running on node without support for resize");
    }
    if minor == 35 && (pod_level_set(old_spec) || pod_level_set(new_spec)) {
        // v1.35: the gate is alpha and off by default (`opts.InPlacePodLevelResourcesVerticalScalingEnabled`).
        e.forbidden(
            "[]",
            "resize of pods with pod-level resources is forbidden when InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled",
        );
        return e.result(false);
    }
    validate_pod_level_resize(old_spec, new_spec, &mut e);
    let before = e.0.len();
    validate_container_order(old_spec, new_spec, &mut e);
    if e.0.len() > before {
        return e.result(false);
    }
    let olds = old_spec.init_containers.as_deref().unwrap_or(&[]);
    let news = new_spec.init_containers.as_deref().unwrap_or(&[]);
    // v1.33–v1.35 validate sidecars only (`isRestartableInitContainer` on the old pod).
    let init_resizable = |o: &Container| minor >= 36 || is_sidecar(o);
    for (i, (o, n)) in olds.iter().zip(news).enumerate() {
        if init_resizable(o) {
            let path = format!("spec.initContainers[{i}].resources");
            validate_container_resize(o, n, &path, minor, &mut e);
        }
    }
    for (i, (o, n)) in old_spec
        .containers
        .iter()
        .zip(&new_spec.containers)
        .enumerate()
    {
        let path = format!("spec.containers[{i}].resources");
        validate_container_resize(o, n, &path, minor, &mut e);
    }
    for (o, n) in old_spec.containers.iter().zip(&new_spec.containers) {
        if !only_cpu_memory_changed(o, n, minor) {
            e.forbidden("spec", "only cpu and memory resources are mutable");
        }
    }
    for (i, (o, n)) in olds.iter().zip(news).enumerate() {
        if minor <= 35 {
            // v1.33–v1.35: sidecars may change cpu and memory; other init containers nothing.
            if is_sidecar(n) {
                if !only_cpu_memory_changed(o, n, minor) {
                    e.forbidden(
                        "spec",
                        "only cpu and memory resources for sidecar containers are mutable",
                    );
                }
            } else if !same_requirements(o.resources.as_ref(), n.resources.as_ref())
                || o.resize_policy != n.resize_policy
            {
                e.forbidden(
                    "spec",
                    "resources for non-sidecar init containers are immutable",
                );
            }
            continue;
        }
        let path = format!("spec.initContainers[{i}]");
        if !only_cpu_memory_changed(o, n, minor) {
            e.forbidden(
                path.clone(),
                "only cpu and memory resources for init or sidecar containers are mutable",
            );
        }
        let restarts = n
            .resize_policy
            .iter()
            .flatten()
            .any(|p| p.restart_policy == "RestartContainer");
        if !is_sidecar(n)
            && restarts
            && !same_requirements(o.resources.as_ref(), n.resources.as_ref())
        {
            e.forbidden(
                path,
                "non-sidecar init containers with a resize policy of RestartContainer cannot be resized",
            );
        }
    }
    // The closing `Semantic.DeepEqual`, only reached without other errors: an empty pod-level
    // object the old pod lacks (or the other way round) is a change to something else.
    let claims = |s: &PodSpec| {
        s.resources
            .as_ref()
            .and_then(|r| r.claims.clone())
            .unwrap_or_default()
    };
    if e.0.is_empty()
        && !pod_level_set(old_spec)
        && !pod_level_set(new_spec)
        && (old_spec.resources.is_some() != new_spec.resources.is_some()
            || claims(old_spec) != claims(new_spec))
    {
        e.forbidden("spec", "only cpu and memory resources are mutable");
    }
    e.result(false)
}

/// The resource parts of `ValidatePodSpec` that a resize can break.
fn validate_spec_resources(spec: &PodSpec, e: &mut Errors) {
    let paths = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}].resources"), c))
        .chain(
            spec.init_containers
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, c)| (format!("spec.initContainers[{i}].resources"), c)),
        );
    for (path, c) in paths {
        validate_requirements(c.resources.as_ref(), &path, false, e);
    }
    let Some(pod_level) = spec.resources.as_ref() else {
        return;
    };
    validate_requirements(Some(pod_level), "spec.resources", true, e);
    validate_pod_resource_consistency(spec, pod_level, e);
}

fn nanos(q: &Quantity) -> i128 {
    parse_nanos(&q.0).unwrap_or(0)
}

/// `validateResourceRequirements` (pod-level: with `validatePodResourceName`).
fn validate_requirements(
    r: Option<&ResourceRequirements>,
    path: &str,
    pod_level: bool,
    e: &mut Errors,
) {
    let empty = ResourceList::new();
    let requests = r.and_then(|r| r.requests.as_ref()).unwrap_or(&empty);
    let limits = r.and_then(|r| r.limits.as_ref()).unwrap_or(&empty);
    let mut cpu_or_memory = false;
    let mut hugepages = false;
    for (field, list) in [("limits", limits), ("requests", requests)] {
        for (name, q) in list {
            // Paths are only spelled out for an error: this runs on every admission review.
            let at = || format!("{path}.{field}[{name}]");
            if pod_level && !is_pod_level_resource(name) {
                e.push(
                    at(),
                    format!(
                        "Unsupported value: \"{name}\": supported values: \"cpu\", \"hugepages-\", \"memory\""
                    ),
                );
            }
            if nanos(q) < 0 {
                e.invalid(at(), &q.0, "must be greater than or equal to 0");
            }
            cpu_or_memory |= name == "cpu" || name == "memory";
            hugepages |= is_hugepages(name);
        }
    }
    for (name, request) in requests {
        match limits.get(name) {
            Some(limit) if nanos(request) != nanos(limit) && !is_overcommit_allowed(name) => {
                e.invalid(
                    format!("{path}.requests"),
                    &request.0,
                    format!("must be equal to {name} limit of {}", limit.0),
                );
            }
            Some(limit) if nanos(request) > nanos(limit) => {
                e.invalid(
                    format!("{path}.requests"),
                    &request.0,
                    format!("must be less than or equal to {name} limit of {}", limit.0),
                );
            }
            None if !is_overcommit_allowed(name) => e.push(
                format!("{path}.limits"),
                "Required value: Limit must be set for non overcommitable resources".to_owned(),
            ),
            _ => {}
        }
    }
    if hugepages && !cpu_or_memory {
        e.forbidden(path, "HugePages require cpu or memory");
    }
}

/// `validatePodResourceConsistency`: pod-level requests cover the containers' aggregate,
/// pod-level hugepage limits cover theirs, and no regular container's limit exceeds the
/// pod-level limit (init containers are not checked there).
fn validate_pod_resource_consistency(
    spec: &PodSpec,
    pod_level: &ResourceRequirements,
    e: &mut Errors,
) {
    let empty = ResourceList::new();
    let pod_requests = pod_level.requests.as_ref().unwrap_or(&empty);
    let pod_limits = pod_level.limits.as_ref().unwrap_or(&empty);
    for (name, sum) in aggregate::container_requests_spelled(spec) {
        if let Some(request) = pod_requests.get(&name)
            && sum.0 > nanos(request)
        {
            e.invalid(
                format!("spec.resources.requests[{name}]"),
                &request.0,
                format!(
                    "must be greater than or equal to aggregate container requests of {}",
                    aggregate::spell(sum)
                ),
            );
        }
    }
    for (name, sum) in aggregate::container_limits_spelled(spec) {
        if let Some(limit) = pod_limits.get(&name)
            && is_hugepages(&name)
            && sum.0 > nanos(limit)
        {
            e.invalid(
                format!("spec.resources.limits[{name}]"),
                &limit.0,
                format!(
                    "must be greater than or equal to aggregate container limits of {}",
                    aggregate::spell(sum)
                ),
            );
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (name, limit) in c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(pod_limit) = pod_limits.get(name)
                && nanos(limit) > nanos(pod_limit)
            {
                e.invalid(
                    format!("spec.resources.containers[{i}][{name}].limits"),
                    &limit.0,
                    format!(
                        "must be less than or equal to pod limits of {}",
                        pod_limit.0
                    ),
                );
            }
        }
    }
}

/// `isPodResizeRequestSupported`: the first running container must report its resources.
fn resize_supported_by_node(old: &Pod) -> bool {
    let statuses = old
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or(&[]);
    statuses
        .iter()
        .find(|cs| cs.state.as_ref().is_some_and(|s| s.running.is_some()))
        .is_none_or(|cs| cs.resources.is_some())
}

/// `validatePodLevelResourcesResize`, when either side has pod-level resources.
fn validate_pod_level_resize(old: &PodSpec, new: &PodSpec, e: &mut Errors) {
    if !pod_level_set(old) && !pod_level_set(new) {
        return;
    }
    let (Some(old_r), new_r) = (old.resources.as_ref(), new.resources.as_ref()) else {
        only_cpu_memory_at_pod_level(None, new.resources.as_ref(), e);
        return;
    };
    let Some(new_r) = new_r else {
        e.forbidden("spec.resources", "pod-level resources cannot be removed");
        return;
    };
    if removed(new_r.requests.as_ref(), old_r.requests.as_ref()) {
        e.forbidden(
            "spec.resources.requests",
            "pod-level resource requests cannot be removed",
        );
    }
    if removed(new_r.limits.as_ref(), old_r.limits.as_ref()) {
        e.forbidden(
            "spec.resources.limits",
            "pod-level resource limits cannot be removed",
        );
    }
    only_cpu_memory_at_pod_level(Some(old_r), Some(new_r), e);
}

fn only_cpu_memory_at_pod_level(
    old: Option<&ResourceRequirements>,
    new: Option<&ResourceRequirements>,
    e: &mut Errors,
) {
    let others = |r: Option<&ResourceRequirements>| {
        (
            non_cpu_memory(r.and_then(|r| r.requests.as_ref())),
            non_cpu_memory(r.and_then(|r| r.limits.as_ref())),
            r.and_then(|r| r.claims.clone()).unwrap_or_default(),
        )
    };
    if others(old) != others(new) {
        e.forbidden(
            "spec",
            "only cpu and memory resources are mutable at pod-level",
        );
    }
}

/// `validatePodResizeContainerOrdering`.
fn validate_container_order(old: &PodSpec, new: &PodSpec, e: &mut Errors) {
    if old.containers.len() != new.containers.len() {
        e.forbidden(
            "spec.containers",
            "containers may not be added or removed on resize",
        );
    } else {
        for (i, (o, n)) in old.containers.iter().zip(&new.containers).enumerate() {
            if o.name != n.name {
                e.forbidden(
                    format!("spec.containers[{i}].name"),
                    "containers may not be renamed or reordered on resize",
                );
            }
        }
    }
    let (olds, news) = (
        old.init_containers.as_deref().unwrap_or(&[]),
        new.init_containers.as_deref().unwrap_or(&[]),
    );
    if olds.len() != news.len() {
        e.forbidden(
            "spec.initContainers",
            "initContainers may not be added or removed on resize",
        );
    } else {
        for (i, (o, n)) in olds.iter().zip(news).enumerate() {
            if o.name != n.name {
                e.forbidden(
                    format!("spec.initContainers[{i}].name"),
                    "initContainers may not be renamed or reordered on resize",
                );
            }
        }
    }
}

/// `validateContainerResize`: requests and limits cannot be removed.
fn validate_container_resize(
    old: &Container,
    new: &Container,
    path: &str,
    minor: u32,
    e: &mut Errors,
) {
    fn list(c: &Container, limits: bool) -> Option<&ResourceList> {
        c.resources.as_ref().and_then(|r| {
            if limits {
                r.limits.as_ref()
            } else {
                r.requests.as_ref()
            }
        })
    }
    if removed(list(new, false), list(old, false)) {
        e.forbidden(
            format!("{path}.requests"),
            "resource requests cannot be removed",
        );
    }
    if removed(list(new, true), list(old, true)) {
        e.forbidden(
            format!("{path}.limits"),
            "resource limits cannot be removed",
        );
    }
    if minor <= 33 {
        memory_limit_decrease_v1_33(old, new, path, e);
    }
}

/// v1.33 `validateContainerResize`: "memory limits may not be decreased if resize policy is
/// NotRequired" (the first memory entry of the new container's `resizePolicy`; none means
/// NotRequired), and adding a limit counts as lowering it from unlimited.
fn memory_limit_decrease_v1_33(old: &Container, new: &Container, path: &str, e: &mut Errors) {
    let policy = new
        .resize_policy
        .iter()
        .flatten()
        .find(|p| p.resource_name == "memory")
        .map(|p| p.restart_policy.as_str());
    if !matches!(policy, None | Some("") | Some("NotRequired")) {
        return;
    }
    let limit = |c: &Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"))
            .map(nanos)
    };
    match (limit(new), limit(old)) {
        (Some(n), Some(o)) if n < o => e.forbidden(
            format!("{path}.limits[memory]"),
            "memory limits cannot be decreased unless resizePolicy is RestartContainer",
        ),
        (Some(_), None) => e.forbidden(
            format!("{path}.limits[memory]"),
            "memory limits cannot be added unless resizePolicy is RestartContainer",
        ),
        _ => {}
    }
}

/// `isPodLevelResourcesSet` as `ValidatePodResize` defines it: any request or limit at all.
fn pod_level_set(s: &PodSpec) -> bool {
    s.resources.as_ref().is_some_and(|r| {
        r.requests.as_ref().map_or(0, |l| l.len()) + r.limits.as_ref().map_or(0, |l| l.len()) > 0
    })
}

/// `resourcesRemoved`.
fn removed(new: Option<&ResourceList>, old: Option<&ResourceList>) -> bool {
    let (new_len, old_len) = (new.map_or(0, |l| l.len()), old.map_or(0, |l| l.len()));
    old_len > new_len
        || old
            .into_iter()
            .flatten()
            .any(|(k, _)| !new.is_some_and(|n| n.contains_key(k)))
}

/// `dropCPUMemoryResourcesFromContainer` + `Semantic.DeepEqual`: nothing but cpu and memory
/// values changed (the strategy already reset every other field except `resizePolicy`).
fn only_cpu_memory_changed(old: &Container, new: &Container, minor: u32) -> bool {
    let (o, n) = (old.resources.as_ref(), new.resources.as_ref());
    let no_claims: &[k8s_openapi::api::core::v1::ResourceClaim] = &[];
    let old_claims = o.and_then(|r| r.claims.as_deref()).unwrap_or(no_claims);
    let new_claims = n.and_then(|r| r.claims.as_deref()).unwrap_or(no_claims);
    // v1.33–v1.34 `dropCPUMemoryResourcesFromContainer` drops a whole list the old container
    // lacks (`if oldResourceList == nil { return nil }`), so anything added there passes, and
    // keeps no claims, so an old container with claims never compares equal.
    let legacy = minor <= 34;
    let same_list = |old: Option<&ResourceList>, new: Option<&ResourceList>| {
        if legacy {
            same_others_v1_33(old, new)
        } else {
            same_others(old, new)
        }
    };
    let claims_ok = if legacy {
        old_claims.is_empty()
    } else {
        old_claims == new_claims
    };
    same_list(
        o.and_then(|r| r.requests.as_ref()),
        n.and_then(|r| r.requests.as_ref()),
    ) && same_list(
        o.and_then(|r| r.limits.as_ref()),
        n.and_then(|r| r.limits.as_ref()),
    ) && claims_ok
        && old.resize_policy.as_deref().unwrap_or(&[])
            == new.resize_policy.as_deref().unwrap_or(&[])
}

/// [`same_others`] as v1.33–v1.34 compare: a list the old container lacks (unset or empty, as
/// stored) is never compared.
fn same_others_v1_33(old: Option<&ResourceList>, new: Option<&ResourceList>) -> bool {
    old.is_none_or(|l| l.is_empty()) || same_others(old, new)
}

/// The entries other than cpu and memory are the same, by value.
fn same_others(a: Option<&ResourceList>, b: Option<&ResourceList>) -> bool {
    fn others(l: Option<&ResourceList>) -> impl Iterator<Item = (&String, &Quantity)> {
        l.into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "cpu" && k.as_str() != "memory")
    }
    others(a).count() == others(b).count()
        && others(a).all(|(k, q)| {
            b.and_then(|b| b.get(k))
                .is_some_and(|other| nanos(q) == nanos(other))
        })
}

fn non_cpu_memory(list: Option<&ResourceList>) -> Amounts {
    let mut a = amounts(list);
    a.remove("cpu");
    a.remove("memory");
    a
}

/// Semantic equality of two requirements (values, not spellings).
pub fn same_requirements(
    a: Option<&ResourceRequirements>,
    b: Option<&ResourceRequirements>,
) -> bool {
    let parts = |r: Option<&ResourceRequirements>| {
        (
            amounts(r.and_then(|r| r.requests.as_ref())),
            amounts(r.and_then(|r| r.limits.as_ref())),
            r.and_then(|r| r.claims.clone()).unwrap_or_default(),
        )
    };
    parts(a) == parts(b)
}

#[cfg(test)]
mod tests;
