//! The memory wall: a resize that lowers a memory limit below what the container uses.
//!
//! CPU is compressible, memory is not. Before it lowers a limit the kubelet compares the new
//! limit with current usage and refuses when usage is at or above it (v1.37.2
//! `pkg/kubelet/kuberuntime/kuberuntime_manager.go`, `validateMemoryResizeAction`): the spec
//! then says one limit, the container keeps the other, and the pod stays `PodResizeInProgress`
//! with reason `Error` "cannot decrease memory limits". Its check and the cgroup write are
//! separate CRI calls, so a spike between them is an OOM kill instead. This module finds the
//! limits a resize lowers ([`lowered_limits`], which mirrors which limits the kubelet checks)
//! and judges them against the working set the resource metrics API reports plus a headroom
//! ([`judge`]). Missing, stale or failed usage is never a reason to deny: it is
//! [`MemoryCheck::Unjudged`], which the webhook allows with a warning.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use crate::policy::{BelowUsage, MemoryDecrease};
use crate::resources::ResourceList;
use crate::upstream::aggregate::container_limits;
use crate::upstream::pod::{all_containers, is_sidecar};
use crate::upstream::quantity::{ResourceName, value};
use crate::usage::{Evidence, PodUsage};

/// Whose limit is lowered.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The pod's cgroup limit (pod-level `resources`, or the sum of every container's limit).
    Pod,
    /// One running container (a regular container or a sidecar).
    Container(String),
}

/// One memory limit the resize lowers (or sets where there was none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lowering {
    /// Whose.
    pub scope: Scope,
    /// The limit in force before, in bytes; `None` when there was none.
    pub from: Option<i64>,
    /// The new limit, in bytes.
    pub to: i64,
}

/// The memory limits the resize `old` → `new` lowers, as the kubelet will see them: a running
/// container's limit that is set where it was unset or goes down (`decreasingContainerLimits`), and
/// the pod's limit likewise (`podLimitDecreasing`) when it is set at pod level. "Before" is what
/// the kubelet has applied when the pod's status reports it
/// (`status.containerStatuses[].resources`), else the old spec; only limits this resize changes
/// count, so a CPU resize of a pod with an older memory resize still pending is not judged again.
pub fn lowered_limits(old: &Pod, new: &Pod) -> Vec<Lowering> {
    let (Some(old_spec), Some(new_spec)) = (old.spec.as_ref(), new.spec.as_ref()) else {
        return Vec::new();
    };
    let mut lowered = Vec::new();
    for c in running(new_spec) {
        let Some(to) = memory_limit(c) else {
            continue;
        };
        let before = running(old_spec).find(|o| o.name == c.name);
        let spec_before = before.and_then(memory_limit);
        if spec_before == Some(to) {
            continue;
        }
        let from = applied_limit(old, &c.name).or(spec_before);
        if from.is_none_or(|f| to < f) {
            lowered.push(Lowering {
                scope: Scope::Container(c.name.clone()),
                from,
                to,
            });
        }
    }
    // The pod's own limit adds a judgement only when it is set at pod level: a sum of the
    // containers' limits stays above the sum of their usage whenever each container's does.
    let pod_level = pod_level_limit(new_spec).is_some();
    if let Some(to) = pod_level.then(|| pod_memory_limit(new_spec)).flatten() {
        let from = pod_memory_limit(old_spec);
        if from.is_none_or(|f| to < f) {
            lowered.push(Lowering {
                scope: Scope::Pod,
                from,
                to,
            });
        }
    }
    lowered
}

/// The memory limits a pod's spec holds below what the kubelet has applied
/// (`status.containerStatuses[].resources`): a decrease still waiting, or one the kubelet
/// refused. What `kubectl resize-guard explain` judges for a pod already admitted.
pub fn unapplied_lowerings(pod: &Pod) -> Vec<Lowering> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    running(spec)
        .filter_map(|c| {
            let to = memory_limit(c)?;
            let from = applied_limit(pod, &c.name)?;
            (to < from).then(|| Lowering {
                scope: Scope::Container(c.name.clone()),
                from: Some(from),
                to,
            })
        })
        .collect()
}

/// The containers the kubelet updates in place: regular containers and sidecars.
fn running(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers.iter().chain(
        spec.init_containers
            .iter()
            .flatten()
            .filter(|c| is_sidecar(c)),
    )
}

/// A container's memory limit in bytes; `None` when unset or zero (the kubelet's
/// `Limits.Memory().IsZero()`).
fn memory_limit(c: &Container) -> Option<i64> {
    memory_in(c.resources.as_ref()?.limits.as_ref())
}

/// A resource list's `memory` in bytes; `None` when absent, unreadable or zero.
fn memory_in(list: Option<&ResourceList>) -> Option<i64> {
    value(list?.get("memory")?).ok().filter(|v| *v > 0)
}

/// The limit the kubelet reports applied to container `name` (`status.containerStatuses[]` or
/// `initContainerStatuses[]` `.resources.limits.memory`).
fn applied_limit(pod: &Pod, name: &str) -> Option<i64> {
    let pod_status = pod.status.as_ref()?;
    let status = pod_status
        .container_statuses
        .iter()
        .flatten()
        .chain(pod_status.init_container_statuses.iter().flatten())
        .find(|s| s.name == name)?;
    memory_in(status.resources.as_ref()?.limits.as_ref())
}

/// The pod cgroup's memory limit, as v1.37.2 `ResourceConfigForPod`
/// (`pkg/kubelet/cm/helpers_linux.go`) sets it: `PodLimits` memory (pod-level
/// `resources.limits.memory` when set, else the aggregate of the containers' limits, plus
/// `overhead`) when every container, init containers included, declares a memory limit or the
/// pod-level limit is set; otherwise none.
pub fn pod_memory_limit(spec: &PodSpec) -> Option<i64> {
    let pod_level = pod_level_limit(spec);
    let declared = all_containers(spec).all(|c| memory_limit(c).is_some());
    let limit = match pod_level {
        Some(v) => v,
        None if declared => {
            let nanos = container_limits(spec).get("memory").copied().unwrap_or(0);
            i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX)
        }
        None => return None,
    };
    let overhead = memory_in(spec.overhead.as_ref()).unwrap_or(0);
    Some(limit.saturating_add(overhead)).filter(|v| *v > 0)
}

/// `spec.resources.limits.memory` (pod-level resources), when set and not zero.
fn pod_level_limit(spec: &PodSpec) -> Option<i64> {
    memory_in(spec.resources.as_ref()?.limits.as_ref())
}

/// A lowered limit judged against usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The limit.
    pub lowering: Lowering,
    /// The working set it is compared with, in bytes.
    pub usage: i64,
    /// `usage` plus the headroom: the least the new limit must exceed.
    pub needed: i64,
}

impl Judged {
    /// True when the new limit is at or below usage (the kubelet refuses it) or below usage
    /// plus the headroom.
    pub fn below(&self) -> bool {
        self.lowering.to <= self.usage || self.lowering.to < self.needed
    }
}

/// The memory rule's answer for one resize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryCheck {
    /// No memory limit is lowered, or the rule is off (`belowUsage: allow`).
    NotApplicable,
    /// A limit is lowered and usage was not fetched yet: fetch it and judge again.
    NeedsUsage(Vec<Lowering>),
    /// Every lowered limit stays above usage plus the headroom.
    Clear(Vec<Judged>),
    /// At least one lowered limit goes below usage plus the headroom (these ones; the list
    /// holds only the offenders).
    Below {
        /// The limits below usage.
        offenders: Vec<Judged>,
        /// How old the usage was.
        age: Duration,
    },
    /// A limit is lowered but no usage can judge it: why. Never a denial.
    Unjudged(String),
}

/// Judges the lowered `limits` against `evidence` under `rule`.
pub fn judge(limits: Vec<Lowering>, evidence: &Evidence, rule: &MemoryDecrease) -> MemoryCheck {
    if limits.is_empty() || rule.below_usage == BelowUsage::Allow {
        return MemoryCheck::NotApplicable;
    }
    let usage = match evidence {
        Evidence::NotFetched => return MemoryCheck::NeedsUsage(limits),
        Evidence::Unavailable(why) => return MemoryCheck::Unjudged(why.clone()),
        Evidence::Measured(u) => u,
    };
    let max_age = Duration::from_secs(u64::from(rule.max_usage_age_seconds));
    if usage.age > max_age {
        return MemoryCheck::Unjudged(format!(
            "the pod's memory usage was measured {}s ago, longer than memory.decrease.maxUsageAgeSeconds ({}s)",
            usage.age.as_secs(),
            rule.max_usage_age_seconds
        ));
    }
    let mut judged = Vec::new();
    let mut missing = Vec::new();
    for lowering in limits {
        match usage_of(usage, &lowering.scope) {
            Some(u) => judged.push(Judged {
                needed: with_headroom(u, rule.headroom_percent),
                usage: u,
                lowering,
            }),
            None => missing.push(scope_name(&lowering.scope)),
        }
    }
    let offenders: Vec<Judged> = judged.iter().filter(|j| j.below()).cloned().collect();
    if !offenders.is_empty() {
        return MemoryCheck::Below {
            offenders,
            age: usage.age,
        };
    }
    if !missing.is_empty() {
        return MemoryCheck::Unjudged(format!(
            "the resource metrics API reports no usage for {}",
            missing.join(", ")
        ));
    }
    MemoryCheck::Clear(judged)
}

/// A container's working set, or the pod's (the sum of its containers', which needs every
/// container the pod runs to be reported: the caller cannot know which are missing, so a pod
/// with none reported is unjudged).
fn usage_of(usage: &PodUsage, scope: &Scope) -> Option<i64> {
    match scope {
        Scope::Container(name) => usage.containers.get(name).copied(),
        Scope::Pod if usage.containers.is_empty() => None,
        Scope::Pod => Some(usage.total()),
    }
}

fn with_headroom(usage: i64, percent: u32) -> i64 {
    let extra = (i128::from(usage) * i128::from(percent) + 99) / 100;
    i64::try_from(i128::from(usage) + extra).unwrap_or(i64::MAX)
}

/// `container "app"` or `the pod`.
pub fn scope_name(scope: &Scope) -> String {
    match scope {
        Scope::Pod => "the pod".to_owned(),
        Scope::Container(name) => format!("container {name:?}"),
    }
}

/// Bytes for people: `150Mi` when exact, else one decimal of the largest binary unit
/// (`150.3Mi`, `272.8Ki`); under 1Ki, plain bytes.
pub fn human_bytes(bytes: i64) -> String {
    match unit_of(bytes) {
        None => ResourceName::Memory.format(bytes),
        Some((unit, size)) => format!("{:.1}{unit}", bytes as f64 / size as f64),
    }
}

/// [`human_bytes`] rounded up, so that it is never below `bytes` (a limit to suggest): `273Ki`,
/// `165.1Mi`.
pub fn human_bytes_up(bytes: i64) -> String {
    match unit_of(bytes) {
        None => ResourceName::Memory.format(bytes),
        Some(("Ki", size)) => format!("{}Ki", (bytes + size - 1) / size),
        Some((unit, size)) => {
            let tenths = (bytes.saturating_mul(10) + size - 1) / size;
            format!("{}.{}{unit}", tenths / 10, tenths % 10)
        }
    }
}

/// The unit `bytes` is shown in with a decimal, `None` when it is shown exactly.
fn unit_of(bytes: i64) -> Option<(&'static str, i64)> {
    const KI: i64 = 1 << 10;
    const MI: i64 = 1 << 20;
    const GI: i64 = 1 << 30;
    if bytes < KI || bytes % MI == 0 || (bytes < MI && bytes % KI == 0) {
        return None;
    }
    Some(match bytes {
        b if b >= GI => ("Gi", GI),
        b if b >= MI => ("Mi", MI),
        _ => ("Ki", KI),
    })
}

impl Judged {
    /// One offender in words, for the denial.
    fn clause(&self, headroom_percent: u32) -> String {
        let from = self
            .lowering
            .from
            .map_or_else(|| "none".to_owned(), human_bytes);
        let head = format!(
            "{} memory limit {from} → {}, working set {}",
            scope_name(&self.lowering.scope),
            human_bytes(self.lowering.to),
            human_bytes(self.usage),
        );
        if self.lowering.to <= self.usage {
            format!(
                "{head}: at or below usage, so the kubelet will refuse it (PodResizeInProgress reason Error, \"cannot decrease memory limits\") and the spec will say {} while the container keeps {from}",
                human_bytes(self.lowering.to)
            )
        } else {
            format!(
                "{head}: within the {headroom_percent}% headroom ({} needed), so usage growing by {} before the kubelet writes the limit is an OOM kill",
                human_bytes(self.needed),
                human_bytes(self.lowering.to - self.usage)
            )
        }
    }

    /// For audit annotations: `container "app" 256Mi->100Mi usage 150Mi needed 165Mi`.
    pub fn brief(&self) -> String {
        format!(
            "{} {}->{} usage {} needed {}",
            scope_name(&self.lowering.scope),
            self.lowering
                .from
                .map_or_else(|| "none".to_owned(), human_bytes),
            human_bytes(self.lowering.to),
            human_bytes(self.usage),
            human_bytes(self.needed)
        )
    }
}

impl MemoryCheck {
    /// Decision label of a denial for it.
    pub const LABEL: &'static str = "memory-below-usage";

    /// The denial message (also the `ResizeRejected` Event) for [`MemoryCheck::Below`].
    pub fn message(&self, rule: &MemoryDecrease) -> String {
        let MemoryCheck::Below { offenders, age } = self else {
            return String::new();
        };
        let least = offenders.iter().map(|j| j.needed).max().unwrap_or(0);
        format!(
            "resize-guard: this resize lowers a memory limit below what is in use (working set from metrics.k8s.io, measured {}s ago): {}. Memory is not compressible: set the limit to at least {} (usage plus memory.decrease.headroomPercent {}%), or lower the usage first",
            age.as_secs(),
            offenders
                .iter()
                .map(|j| j.clause(rule.headroom_percent))
                .collect::<Vec<_>>()
                .join("; "),
            human_bytes_up(least),
            rule.headroom_percent,
        )
    }

    /// The short form, for a warning (`belowUsage: warn`, audit mode).
    pub fn summary(&self) -> String {
        match self {
            MemoryCheck::Below { offenders, age } => format!(
                "resize-guard: memory limit below usage plus headroom ({}s old): {}",
                age.as_secs(),
                briefs(offenders)
            ),
            MemoryCheck::Unjudged(why) => format!(
                "resize-guard did not check the lowered memory limit against usage: {why}"
            ),
            MemoryCheck::NeedsUsage(_) => "resize-guard did not check the lowered memory limit against usage: usage was not fetched".to_owned(),
            MemoryCheck::NotApplicable | MemoryCheck::Clear(_) => String::new(),
        }
    }

    /// The `memory` audit annotation: what was compared (or why nothing was).
    pub fn annotation(&self) -> Option<String> {
        match self {
            MemoryCheck::Clear(judged) => Some(briefs(judged)),
            MemoryCheck::Below { offenders, .. } => Some(briefs(offenders)),
            MemoryCheck::Unjudged(why) => Some(format!("unjudged: {why}")),
            MemoryCheck::NeedsUsage(_) => Some("unjudged: usage was not fetched".to_owned()),
            MemoryCheck::NotApplicable => None,
        }
    }
}

/// Each judged limit in brief ([`Judged::brief`]), `; `-separated.
pub fn briefs(judged: &[Judged]) -> String {
    judged
        .iter()
        .map(Judged::brief)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
