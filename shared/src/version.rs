//! The Kubernetes minors resize-guard supports and, per minor, the upstream behaviours it adapts
//! to. Both programs read the API server's `/version` at start-up, log what it means here and
//! export it as metrics; anything resize-guard cannot do on a minor is said there, never left
//! silently wrong.
//!
//! Every difference is upstream's, cited to the source of the minor that changed it:
//!
//! | behaviour | minors | upstream |
//! |---|---|---|
//! | `pods/resize` subresource, `InPlacePodVerticalScaling` on by default | 1.33+ (beta 1.33–1.34, GA 1.35) | `pkg/features/kube_features.go` |
//! | memory-limit decrease without restart | 1.34+ | v1.33 `validateContainerResize` refuses it ("memory limits cannot be decreased unless resizePolicy is RestartContainer", `pkg/apis/core/validation/validation.go`) |
//! | kubelet marks a resize above allocatable Infeasible | 1.33–1.35 | `canResizePod` (v1.33 `pkg/kubelet/kubelet.go`), `handlePodResourcesResize` (v1.34–v1.35 `pkg/kubelet/allocation/allocation_manager.go`): "Node didn't have enough capacity" |
//! | API server refuses a resize above allocatable | 1.36+ | `PodResizeValidator` admission plugin (`plugin/pkg/admission/podresize/admission.go`, cause `NodeCapacity`), after mutating webhooks (resize-guard's refusal has its shape: [`crate::refusal`]) |
//! | node opt-out field `spec.podPreemptionPolicy.disableResizePreemption` | 1.37+ (alpha gate `InPlacePodVerticalScalingSchedulerPreemption`) | `pkg/apis/core/types.go` |

use std::fmt;

/// The oldest minor with the `pods/resize` subresource: nothing resize-guard does works before.
pub const OLDEST_MINOR: u32 = 33;

/// The newest minor resize-guard is tested on (`make test-matrix`).
pub const NEWEST_TESTED_MINOR: u32 = 37;

/// A Kubernetes version as the API server's `/version` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesVersion {
    /// `gitVersion`, e.g. `v1.35.4` or `v1.35.4-eks-1a2b3c`.
    pub git_version: String,
    /// The minor: 35.
    pub minor: u32,
}

impl KubernetesVersion {
    /// From `/version`'s `major`, `minor` and `gitVersion`. Managed clusters decorate them
    /// (GKE's minor is `35+`, EKS's gitVersion `v1.35.4-eks-…`), so the minor is the leading
    /// digits of `minor`, else of `gitVersion`'s second field. `None` when neither says 1.N.
    pub fn parse(major: &str, minor: &str, git_version: &str) -> Option<KubernetesVersion> {
        let digits = |s: &str| -> Option<u32> {
            let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            s[..end].parse().ok()
        };
        let from_fields = (digits(major) == Some(1)).then(|| digits(minor)).flatten();
        let from_git = || {
            let v = git_version.trim().strip_prefix('v')?;
            let mut parts = v.split('.');
            (digits(parts.next()?)? == 1).then_some(())?;
            digits(parts.next()?)
        };
        let minor = from_fields.or_else(from_git)?;
        Some(KubernetesVersion {
            git_version: git_version.trim().to_owned(),
            minor,
        })
    }

    /// Whether resize-guard supports this minor.
    pub fn support(&self) -> Support {
        if self.minor < OLDEST_MINOR {
            Support::Unsupported
        } else if self.minor > NEWEST_TESTED_MINOR {
            Support::Untested
        } else {
            Support::Supported
        }
    }

    /// Whether this minor has `feature`.
    pub fn has(&self, feature: Feature) -> bool {
        feature.minors().contains(&self.minor)
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (minor 1.{})", self.git_version, self.minor)
    }
}

/// Whether resize-guard supports a minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// v1.33–v1.37: tested by `make test-matrix`.
    Supported,
    /// Newer than v1.37: expected to work (the API is GA), not tested.
    Untested,
    /// Older than v1.33: there is no `pods/resize` subresource, so nothing reaches resize-guard.
    Unsupported,
}

impl Support {
    /// `supported`, `untested` or `unsupported` (the metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Support::Supported => "supported",
            Support::Untested => "untested",
            Support::Unsupported => "unsupported",
        }
    }
}

/// An upstream behaviour that differs between the supported minors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// The `pods/resize` subresource exists and `InPlacePodVerticalScaling` is on by default.
    ResizeSubresource,
    /// A memory limit can be lowered without `resizePolicy: RestartContainer`.
    MemoryLimitDecrease,
    /// The kubelet marks a resize larger than the node's allocatable `Infeasible` (so such a
    /// resize, once stored, drifts until `feasibility.revertInfeasible` or a person reverts it).
    KubeletMarksCapacityInfeasible,
    /// The API server's `PodResizeValidator` refuses a resize larger than the node's
    /// allocatable; resize-guard's mutating webhook, which runs first, refuses it in the same
    /// shape (`crate::refusal`).
    ApiServerCapacityCheck,
    /// `Node.spec.podPreemptionPolicy.disableResizePreemption` exists (alpha gate); elsewhere
    /// only resize-guard's node label opts a node out.
    NodeResizePreemptionField,
}

impl Feature {
    /// Every feature, in the order they are reported.
    pub const ALL: [Feature; 5] = [
        Feature::ResizeSubresource,
        Feature::MemoryLimitDecrease,
        Feature::KubeletMarksCapacityInfeasible,
        Feature::ApiServerCapacityCheck,
        Feature::NodeResizePreemptionField,
    ];

    /// The minors that have it (open-ended features run to the newest tested minor and on).
    pub fn minors(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Feature::ResizeSubresource => OLDEST_MINOR..=u32::MAX,
            Feature::MemoryLimitDecrease => 34..=u32::MAX,
            Feature::KubeletMarksCapacityInfeasible => OLDEST_MINOR..=35,
            Feature::ApiServerCapacityCheck => 36..=u32::MAX,
            Feature::NodeResizePreemptionField => 37..=u32::MAX,
        }
    }

    /// The metric label, e.g. `api_server_capacity_check`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::ResizeSubresource => "resize_subresource",
            Feature::MemoryLimitDecrease => "memory_limit_decrease",
            Feature::KubeletMarksCapacityInfeasible => "kubelet_marks_capacity_infeasible",
            Feature::ApiServerCapacityCheck => "api_server_capacity_check",
            Feature::NodeResizePreemptionField => "node_resize_preemption_field",
        }
    }

    /// What having it, or not, means for resize-guard (one log line).
    pub fn consequence(self, has: bool) -> &'static str {
        match (self, has) {
            (Feature::ResizeSubresource, true) => {
                "pods/resize exists: resize-guard reviews every in-place resize"
            }
            (Feature::ResizeSubresource, false) => {
                "there is no pods/resize subresource before v1.33: no resize reaches resize-guard; upgrade the cluster"
            }
            (Feature::MemoryLimitDecrease, true) => "memory limits can be lowered in place",
            (Feature::MemoryLimitDecrease, false) => {
                "the API server refuses in-place memory-limit decreases (resizePolicy RestartContainer only); resize-guard leaves that refusal to it"
            }
            (Feature::KubeletMarksCapacityInfeasible, true) => {
                "the kubelet marks a resize above allocatable Infeasible and the API server stores it: resize-guard refuses it at admission, and feasibility.revertInfeasible repairs ones stored without it"
            }
            (Feature::KubeletMarksCapacityInfeasible, false) => {
                "the kubelet no longer marks resizes above allocatable Infeasible"
            }
            (Feature::ApiServerCapacityCheck, true) => {
                "the API server refuses resizes above allocatable itself; resize-guard's refusal comes first, in its shape (403, NodeCapacity, its message word for word), then the node's numbers"
            }
            (Feature::ApiServerCapacityCheck, false) => {
                "the API server stores resizes above allocatable: resize-guard's refusal is the only admission check"
            }
            (Feature::NodeResizePreemptionField, true) => {
                "nodes opt out of resize preemption with spec.podPreemptionPolicy.disableResizePreemption (alpha gate) or resize-guard's label"
            }
            (Feature::NodeResizePreemptionField, false) => {
                "nodes opt out of resize preemption with resize-guard's label only (the Node field arrives in v1.37)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: &str, minor: &str, git: &str) -> Option<u32> {
        KubernetesVersion::parse(major, minor, git).map(|v| v.minor)
    }

    #[test]
    fn managed_clusters_decorate_the_version() {
        assert_eq!(v("1", "35", "v1.35.4"), Some(35));
        assert_eq!(v("1", "35+", "v1.35.4-gke.1200"), Some(35));
        assert_eq!(v("1", "33+", "v1.33.5-eks-3cfe0ce"), Some(33));
        assert_eq!(v("", "", "v1.36.1+k3s1"), Some(36));
        assert_eq!(v("", "", "garbage"), None);
        assert_eq!(v("2", "1", "v2.1.0"), None);
    }

    #[test]
    fn support_and_features_follow_the_minor() {
        let at = |minor| KubernetesVersion {
            git_version: format!("v1.{minor}.0"),
            minor,
        };
        assert_eq!(at(32).support(), Support::Unsupported);
        assert!(!at(32).has(Feature::ResizeSubresource));
        assert_eq!(at(33).support(), Support::Supported);
        assert_eq!(at(38).support(), Support::Untested);
        let row = |minor| Feature::ALL.map(|f| at(minor).has(f));
        assert_eq!(row(33), [true, false, true, false, false]);
        assert_eq!(row(34), [true, true, true, false, false]);
        assert_eq!(row(35), [true, true, true, false, false]);
        assert_eq!(row(36), [true, true, false, true, false]);
        assert_eq!(row(37), [true, true, false, true, true]);
    }
}
