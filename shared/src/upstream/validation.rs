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
//! explain ([`crate::upstream::qos`]). The first violation found is returned, worded as upstream's
//! `field.Error` (`<path>: <type>: <detail>`).

mod containers;
mod pod_level;
mod requirements;
#[cfg(test)]
mod tests;

use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::upstream::pod::is_sidecar;
use crate::upstream::quantity::parse_nanos;
use containers::{
    only_cpu_memory_changed, validate_container_order, validate_container_resize,
    validate_init_container_changes,
};
use pod_level::{pod_level_set, validate_pod_level_resize};
#[cfg(test)]
use requirements::validate_requirements;
use requirements::validate_spec_resources;

pub use containers::same_requirements;

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
    /// How many of [`errors`](Self::errors) upstream lists before the QoS rule's: those of
    /// `validatePodMetadataAndSpec`, which `ValidatePodResize` collects first.
    pub before_qos: usize,
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

/// Collects errors in order; the second field counts those collected before the QoS rule.
#[derive(Default)]
struct Errors(Vec<Invalidity>, usize);

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
                before_qos: self.1.min(self.0.len()),
                errors: self.0,
                alone,
            })
        }
    }
}

/// Checks a resize from the stored `old` pod to `new`, which must already be what the resize
/// strategy makes of the request ([`crate::upstream::strategy::prepare_resize`]). Quantities are
/// quoted as the objects spell them: the API server sends webhooks the canonical spelling, which is
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
    // Upstream's first error, the QoS rule (`GetPodQOS(old) != ComputePodQOS(new)`), is the
    // policy crate's own rule and not reported here, but it still keeps `ValidatePodResize`
    // from reaching its closing `Semantic.DeepEqual` (only run while `allErrs` is empty).
    let qos_changes = crate::upstream::qos::current_qos_class(old)
        != crate::upstream::qos::spec_qos_class_on(new_spec, minor);
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
    e.1 = e.0.len();
    if crate::upstream::pod::is_mirror(old)
        || old_spec.os.as_ref().is_some_and(|os| os.name == "windows")
    {
        let mut only = Errors::default();
        let what = if crate::upstream::pod::is_mirror(old) {
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
        // v1.35: the gate is alpha and off by default
        // (`opts.InPlacePodLevelResourcesVerticalScalingEnabled`).
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
    validate_init_container_changes(olds, news, minor, &mut e);
    if !qos_changes {
        closing_deep_equal(old_spec, new_spec, &mut e);
    }
    e.result(false)
}

/// The closing `Semantic.DeepEqual` of `ValidatePodResize`, only reached without other errors:
/// an empty pod-level object the old pod lacks (or the other way round) is a change to
/// something else.
fn closing_deep_equal(old_spec: &PodSpec, new_spec: &PodSpec, e: &mut Errors) {
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
}

/// A quantity in nano-units; an unparsable one counts as zero.
fn nanos(q: &Quantity) -> i128 {
    parse_nanos(&q.0).unwrap_or(0)
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
