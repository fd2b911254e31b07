//! The resize-guard policy: the typed, validated contents of ConfigMap `resize-guard`, key
//! `policy.yaml` (docs/src/reference/policy.md).
//!
//! Every key has a default except the two that decide how much resize-guard does: `mode`
//! must be stated, and so must `preemption.enabled` whenever the `preemption:` section sets any
//! key. An empty document, a ConfigMap without the `policy.yaml` key, or an edit that drops
//! `mode: audit` is an error, never the most aggressive policy by omission ([`Policy::from_yaml`]).
//! Unknown keys and bad values are errors that name the key and the line, because a silently
//! ignored typo in a preemption policy is how pods get evicted by surprise. Callers keep the last
//! good policy when a new one fails to parse.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::upstream::selector::Selector;

/// Whether resize-guard acts or only reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Deny, repair and preempt.
    #[default]
    Enforce,
    /// Never deny or preempt; warn and emit `Would…` events.
    Audit,
}

/// What to do with a resize that would change the pod's QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnQosChange {
    /// Deny it with a message naming the containers and the fix.
    #[default]
    Reject,
    /// Change the requested resources minimally so the class is kept, when possible.
    Repair,
}

/// How victims are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PdbMode {
    /// Evict through the Eviction API; never break a PodDisruptionBudget.
    #[default]
    Respect,
    /// Delete like kube-scheduler does: PDBs only steer the choice of victims.
    BestEffort,
}

/// `qos:` section.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct QosPolicy {
    /// `qos.onChange`.
    pub on_change: OnQosChange,
}

/// `feasibility:` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FeasibilityPolicy {
    /// Deny resizes larger than the node's allocatable.
    #[serde(deserialize_with = "yaml::plain_bool")]
    pub reject_infeasible: bool,
    /// Deny Deferred resizes that no preemption can resolve.
    #[serde(deserialize_with = "yaml::plain_bool")]
    pub reject_stuck_deferred: bool,
    /// Patch drifted Infeasible pods back to their actual resources (controller).
    #[serde(deserialize_with = "yaml::plain_bool")]
    pub revert_infeasible: bool,
}

impl Default for FeasibilityPolicy {
    fn default() -> Self {
        FeasibilityPolicy {
            reject_infeasible: true,
            reject_stuck_deferred: false,
            revert_infeasible: false,
        }
    }
}

/// `preemption:` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PreemptionPolicy {
    /// Preempt at all.
    #[serde(deserialize_with = "yaml::plain_bool")]
    pub enabled: bool,
    /// PDB handling.
    pub pdb: PdbMode,
    /// Most victims one resize may cost (at least 1): in one plan, and over the plans made for
    /// the same resize that helped nobody (victims gone, no resize on the node admitted since):
    /// such a resize gets another plan only within what is left of this.
    #[serde(deserialize_with = "at_least_one")]
    pub max_victims_per_resize: u32,
    /// Most victims removed per minute across the cluster (at least 1). A whole plan of up to
    /// `maxVictimsPerResize` may go at once; the rate refills after it.
    #[serde(deserialize_with = "at_least_one_per_minute")]
    pub max_evictions_per_minute: u32,
    // --- The per-tenant eviction budget (the brakes per namespace).
    /// Most victims removed per minute for the preemptors of one namespace (at least 1), inside
    /// the cluster-wide `maxEvictionsPerMinute`, which stays the outer bound (a value above it
    /// changes nothing). Like the cluster's, a whole plan of up to `maxVictimsPerResize` may go
    /// at once and the rate refills after it. Default 6, under a third of the default cluster
    /// rate (20): one namespace whose resizes churn can spend at most 6 of the 20 a minute, so at
    /// least three namespaces preempt at full speed side by side and one noisy tenant leaves 14 a
    /// minute to all others.
    #[serde(deserialize_with = "at_least_one_per_namespace_per_minute")]
    pub max_evictions_per_namespace_per_minute: u32,
    /// Stop preempting for a while when plans keep failing to unblock their resizes.
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub circuit_breaker: CircuitBreaker,
    /// Cap on a victim's termination grace period; unset (the default) honours each victim's
    /// own `terminationGracePeriodSeconds`, as kube-scheduler's preemption does.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "yaml::plain_optional_u32"
    )]
    pub max_grace_period_seconds: Option<u32>,
    /// How long a resize must have been Deferred before preempting.
    #[serde(deserialize_with = "yaml::plain_u32")]
    pub min_deferred_seconds: u32,
    /// How long a resize may wait on something that should happen without resize-guard acting
    /// (its planned victims terminating, terminating pods nobody planned, the kubelet admitting
    /// a resize that resize-guard counts as fitting) before it is reported stalled: a
    /// `PreemptionStalled` Warning Event saying what it waits on and for how long, and the
    /// node's plan-in-flight claim released so other resizes on the node may plan. Independent
    /// of the victims' grace periods, which stay honoured (10 to 86400; default 600).
    #[serde(deserialize_with = "stall_seconds")]
    pub stall_after_seconds: u32,
    /// Namespaces whose pods are never victims, in addition to `kube-system` and the install
    /// namespace, which are always protected ([`Policy::protects_namespace`]).
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub protected_namespaces: Vec<String>,
    /// Pods matching this label selector are never victims.
    pub protected_selector: ProtectedSelector,
    /// May pods owned by a DaemonSet be victims? Off by default: the DaemonSet controller puts
    /// the pod straight back on the same node, so the room does not stay free.
    #[serde(deserialize_with = "yaml::plain_bool")]
    pub allow_daemon_set_victims: bool,
    /// May pods with no controlling owner be victims? Nothing recreates them, so preempting one
    /// loses it for good. Off by default: kube-scheduler's preemption does take them, but a
    /// resize is worth less than a pod nobody can bring back; `true` treats them as the
    /// scheduler does.
    #[serde(deserialize_with = "yaml::plain_bool")]
    pub allow_bare_pod_victims: bool,
}

impl Default for PreemptionPolicy {
    fn default() -> Self {
        PreemptionPolicy {
            enabled: true,
            pdb: PdbMode::Respect,
            max_victims_per_resize: 5,
            max_evictions_per_minute: 20,
            max_evictions_per_namespace_per_minute: 6,
            circuit_breaker: CircuitBreaker::default(),
            max_grace_period_seconds: None,
            min_deferred_seconds: 0,
            stall_after_seconds: 600,
            protected_namespaces: Vec::new(),
            protected_selector: ProtectedSelector::default(),
            allow_daemon_set_victims: false,
            allow_bare_pod_victims: false,
        }
    }
}

/// `preemption.circuitBreaker:`. A plan is futile when its victims were removed, the same
/// resize then needs another plan, and no other resize on the node was admitted meanwhile: the
/// room went elsewhere, or the kubelet counts differently than the plan did. `futilePlans` of
/// those within `windowSeconds`, counted per `scope`, stop preemption in that scope for
/// `pauseSeconds`, with a `PreemptionPaused` Warning Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CircuitBreaker {
    /// Futile plans that open the breaker (0 turns it off).
    #[serde(deserialize_with = "yaml::plain_u32")]
    pub futile_plans: u32,
    /// The window they are counted in.
    #[serde(deserialize_with = "yaml::plain_u32")]
    pub window_seconds: u32,
    /// How long preemption stops once it opens.
    #[serde(deserialize_with = "yaml::plain_u32")]
    pub pause_seconds: u32,
    // --- Where the breaker counts and stops (the brakes per tenant).
    /// What futile plans are counted over and what an open breaker stops.
    pub scope: BreakerScope,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        CircuitBreaker {
            futile_plans: 3,
            window_seconds: 600,
            pause_seconds: 300,
            scope: BreakerScope::Namespace,
        }
    }
}

/// `preemption.circuitBreaker.scope`: over what futile plans are counted, and so what an open
/// breaker stops. Default `namespace`: futile plans are provoked by the preemptors' own
/// resizes, which their namespace's authors write, so one tenant's futile plans pause only that
/// tenant's preemption and never another's. `node` pauses the node whose plans keep failing
/// (room taken by pods nobody preempted for), whoever asked; `cluster` is the old breaker: any
/// `futilePlans` futile plans stop every preemption. A pause that is open stays open when the
/// scope changes: a plan is held by any open breaker of its namespace, its node or the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BreakerScope {
    /// Per preemptor namespace.
    #[default]
    Namespace,
    /// Per node.
    Node,
    /// One breaker for the whole cluster.
    Cluster,
}

/// What to do with a resize that lowers a memory limit below what the container uses
/// ([`crate::memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BelowUsage {
    /// Deny it with the numbers (usage, its age, the new limit, the headroom).
    #[default]
    Reject,
    /// Allow it with a warning carrying the same numbers.
    Warn,
    /// Do not judge it: usage is never fetched.
    Allow,
}

/// `memory:` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MemoryPolicy {
    /// `memory.decrease`.
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub decrease: MemoryDecrease,
}

/// `memory.decrease:` — lowering a memory limit, the wall CPU does not have: the kubelet refuses
/// a limit at or below current usage and leaves the resize in progress with an error, and a
/// spike between its check and the cgroup write is an OOM kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MemoryDecrease {
    /// `reject`, `warn` or `allow`.
    pub below_usage: BelowUsage,
    /// The new limit must exceed the working set by this much (percent of the working set; 0
    /// judges exactly as the kubelet does, 0–1000).
    #[serde(deserialize_with = "percent")]
    pub headroom_percent: u32,
    /// Usage measured longer ago than this is not judged with (at least 1).
    #[serde(deserialize_with = "at_least_one_second")]
    pub max_usage_age_seconds: u32,
}

impl Default for MemoryDecrease {
    fn default() -> Self {
        MemoryDecrease {
            below_usage: BelowUsage::Reject,
            headroom_percent: 10,
            max_usage_age_seconds: 120,
        }
    }
}

/// `namespaces:` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NamespacePolicy {
    /// Namespaces resize-guard ignores (the install namespace is always added).
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub exclude: Vec<String>,
}

impl Default for NamespacePolicy {
    fn default() -> Self {
        NamespacePolicy {
            exclude: vec!["kube-system".to_owned()],
        }
    }
}

/// The whole policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Policy {
    /// `mode`.
    pub mode: Mode,
    /// `qos`.
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub qos: QosPolicy,
    /// `feasibility`.
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub feasibility: FeasibilityPolicy,
    /// `preemption`.
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub preemption: PreemptionPolicy,
    /// `memory`.
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub memory: MemoryPolicy,
    /// `namespaces`.
    #[serde(deserialize_with = "yaml::empty_is_default")]
    pub namespaces: NamespacePolicy,
}

/// A policy document that does not parse or validate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// 1-based line of the offending key or value, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong, naming the key.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "policy.yaml line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "policy.yaml line {l}: {}", self.message),
            _ => write!(f, "policy.yaml: {}", self.message),
        }
    }
}

/// Key of the policy document in the ConfigMap (docs/src/reference/policy.md).
pub const POLICY_KEY: &str = "policy.yaml";

impl Policy {
    /// The policy a ConfigMap's `data` holds under [`POLICY_KEY`]. No data or no key is an
    /// error, never the defaults: a ConfigMap that lost its key (a bad merge, a GitOps tool
    /// writing another key) must not turn an audit-mode trial into enforcement. An empty
    /// document under the key is the default policy, as the operator wrote it. What the
    /// programs load and the plugin reads.
    pub fn from_config_map(
        data: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Result<Policy, PolicyError> {
        let doc = data.and_then(|d| d.get(POLICY_KEY)).ok_or_else(|| PolicyError {
            line: None,
            column: None,
            message: format!(
                "the ConfigMap has no key {POLICY_KEY}; write the policy under it, starting with `mode: audit` or `mode: enforce`"
            ),
        })?;
        Policy::from_yaml(doc)
    }

    /// Parses and validates a `policy.yaml` document. The keys that decide how much
    /// resize-guard does must be stated ([`unstated`]): an empty document, one without `mode`,
    /// or a `preemption:` section that sets keys without `enabled` is refused, so a truncated
    /// or hand-edited policy can never become enforcement and preemption by omission.
    pub fn from_yaml(doc: &str) -> Result<Policy, PolicyError> {
        let blank = doc
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#') || l.trim() == "---");
        if blank {
            return Err(PolicyError {
                line: None,
                column: None,
                message: "the document is empty; state at least `mode: audit` (judge and say) or `mode: enforce` (deny, repair and preempt)".into(),
            });
        }
        let policy = yaml::parse(doc)?;
        match unstated(doc)? {
            Some(err) => Err(err),
            None => Ok(policy),
        }
    }

    /// The policy as YAML, for logs (`effective policy`).
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).unwrap_or_else(|e| format!("<unprintable policy: {e}>"))
    }

    /// True when resize-guard must leave pods of this namespace alone (`namespaces.exclude`
    /// and the install namespace): their resizes are not judged, they are never victims
    /// ([`crate::victims::exclusion`]) and never reverted ([`Policy::may_revert_in`]).
    pub fn excludes_namespace(&self, namespace: &str, install_namespace: &str) -> bool {
        namespace == install_namespace || self.namespaces.exclude.iter().any(|n| n == namespace)
    }

    /// True when `feasibility.revertInfeasible` may patch a pod of this namespace back: never in
    /// an excluded namespace, and never in `kube-system` or the install namespace, even when an
    /// operator took `kube-system` out of `namespaces.exclude` to have its resizes judged.
    pub fn may_revert_in(&self, namespace: &str, install_namespace: &str) -> bool {
        namespace != "kube-system" && !self.excludes_namespace(namespace, install_namespace)
    }

    /// True when no pod of this namespace may be a victim: `kube-system` and the install
    /// namespace always, plus `preemption.protectedNamespaces` (which adds, never replaces).
    pub fn protects_namespace(&self, namespace: &str, install_namespace: &str) -> bool {
        namespace == "kube-system"
            || namespace == install_namespace
            || self
                .preemption
                .protected_namespaces
                .iter()
                .any(|n| n == namespace)
    }

    /// A victim's grace period: its own `terminationGracePeriodSeconds` (30 s when unset, as
    /// the API server defaults it), capped by `preemption.maxGracePeriodSeconds` when set.
    pub fn victim_grace_seconds(&self, own: Option<i64>) -> u32 {
        let own = own.unwrap_or(30).max(0);
        let capped = match self.preemption.max_grace_period_seconds {
            Some(cap) => own.min(i64::from(cap)),
            None => own,
        };
        u32::try_from(capped).unwrap_or(u32::MAX)
    }

    /// True in audit mode.
    pub fn is_audit(&self) -> bool {
        self.mode == Mode::Audit
    }
}

/// The keys a policy must state, read from a document that already parsed as a [`Policy`]:
/// `mode`, and `preemption.enabled` when the `preemption:` section sets any other key. Their
/// defaults (enforce, preemption on) are the most aggressive values, so their absence is an
/// error rather than a default.
fn unstated(doc: &str) -> Result<Option<PolicyError>, PolicyError> {
    use std::collections::BTreeMap;

    use serde::de::IgnoredAny;

    #[derive(Deserialize)]
    struct Stated {
        #[serde(default)]
        mode: Option<IgnoredAny>,
        #[serde(default)]
        preemption: Option<BTreeMap<String, IgnoredAny>>,
    }
    let stated: Stated = yaml::parse(doc)?;
    if stated.mode.is_none() {
        return Ok(Some(PolicyError {
            line: None,
            column: None,
            message: "`mode` is not stated; write `mode: audit` (judge and say) or `mode: enforce` (deny, repair and preempt): resize-guard never enforces by omission".into(),
        }));
    }
    let preemption = stated.preemption.unwrap_or_default();
    if !preemption.is_empty() && !preemption.contains_key("enabled") {
        return Ok(Some(PolicyError {
            line: key_line(doc, "preemption"),
            column: None,
            message: "preemption.enabled is not stated; the section sets other keys, so write `enabled: true` or `enabled: false` with them: resize-guard never preempts by omission".into(),
        }));
    }
    Ok(None)
}

/// The 1-based line of the top-level key `key`, if the document has it as a block key.
fn key_line(doc: &str, key: &str) -> Option<usize> {
    doc.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|i| i + 1)
}

/// `preemption.protectedSelector`: a label selector in `kubectl -l` syntax, validated on load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedSelector(pub Selector);

impl Default for ProtectedSelector {
    fn default() -> Self {
        // A constant, valid selector.
        ProtectedSelector(Selector::parse("resize-guard.io/protected=true").unwrap_or_default())
    }
}

impl<'de> Deserialize<'de> for ProtectedSelector {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Selector::parse(&s)
            .map(ProtectedSelector)
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for ProtectedSelector {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

/// Declares `serde(deserialize_with)` readers of plain unsigned numbers: each takes the number
/// its test accepts and refuses any other with its message.
macro_rules! bounded_u32 {
    ($($name:ident: |$v:ident| $ok:expr, $message:literal;)*) => {$(
        fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
            let $v = yaml::plain_u32(d)?;
            if $ok {
                Ok($v)
            } else {
                Err(serde::de::Error::custom($message))
            }
        }
    )*};
}

bounded_u32! {
    at_least_one_per_minute: |v| v > 0,
        "maxEvictionsPerMinute must be at least 1 (set preemption.enabled: false to turn preemption off)";
    at_least_one_per_namespace_per_minute: |v| v > 0,
        "maxEvictionsPerNamespacePerMinute must be at least 1 (set preemption.enabled: false to turn preemption off)";
    percent: |v| v <= 1000, "headroomPercent must be between 0 and 1000";
    at_least_one_second: |v| v > 0,
        "maxUsageAgeSeconds must be at least 1 (set belowUsage: allow to turn the rule off)";
    stall_seconds: |v| (10..=86_400).contains(&v),
        "stallAfterSeconds must be between 10 and 86400 (a shorter timer would report ordinary terminations as stalls)";
    at_least_one: |v| v > 0,
        "maxVictimsPerResize must be at least 1 (set preemption.enabled: false to turn preemption off)";
}

pub mod keys;
mod yaml;

#[cfg(test)]
mod tests;
