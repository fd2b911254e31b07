//! `kubectl resize-guard explain POD`: everything an operator needs to know about one pod's
//! resize, on one screen — its QoS class and why, its node's ledger, the kubelet's pending
//! condition, what resize-guard decides now (fits / will preempt whom / stuck and why), the plan
//! the controller recorded, whether a controller is leading, and the resize Events. Every
//! judgement is `resize_guard_policy::assess` on the same inputs the controller reads.

#[cfg(test)]
mod tests;
mod text;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::event_reason::EventReason;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::memory::{MemoryCheck, briefs, judge, unapplied_lowerings};
use resize_guard_policy::plan::SealedPlan;
use resize_guard_policy::pod::{self, PodKey};
use resize_guard_policy::resources::Resources;
use resize_guard_policy::upstream::qos::qos_reason;
use resize_guard_policy::upstream::requests::{Accounting, spec_requests};
use resize_guard_policy::upstream::{self, pod::resize_pending};
use resize_guard_policy::usage::Evidence;
use resize_guard_policy::{Context, assess};
use serde::Serialize;

use crate::facts::{LeaseState, ago, event_time};
use crate::judgement::{DecisionView, decision_view};
use crate::output::{Document, rfc3339};
use crate::table::age;
pub use text::render_text;

impl Document for Explanation {
    const KIND: &'static str = "Explanation";

    fn text(&self, wide: bool) -> String {
        render_text(self, wide)
    }
}

/// What `explain` prints: `kind: Explanation`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// `spec.priority`.
    pub priority: i32,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// The QoS class and why.
    pub qos: QosView,
    /// The node's ledger, kubelet accounting.
    pub ledger: Option<LedgerView>,
    /// The kubelet's condition, if a resize is pending or in progress.
    pub resize: Option<PendingView>,
    /// What resize-guard decides now.
    pub decision: DecisionView,
    /// A memory limit the spec holds below the one applied, judged against usage.
    pub memory: Option<MemoryView>,
    /// The plan the controller recorded on the pod.
    pub recorded_plan: Option<PlanView>,
    /// The controller's leadership.
    pub controller: Option<String>,
    /// Resize Events about the pod, oldest first.
    pub events: Vec<EventView>,
    /// Assumptions made because something could not be read.
    pub notes: Vec<String>,
}

/// QoS.
#[derive(Debug, Serialize)]
pub struct QosView {
    /// `Guaranteed`, `Burstable` or `BestEffort` (the stored `status.qosClass` when set).
    pub class: String,
    /// Why.
    pub why: String,
}

/// One node's books.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerView {
    /// The node's allocatable.
    pub allocatable: Amount,
    /// What this pod holds now (max of allocated and actual).
    pub this_pod_holds: Amount,
    /// What this pod's spec asks for.
    pub this_pod_wants: Amount,
    /// What every other active pod holds.
    pub others_hold: Amount,
    /// Of which pods that are terminating (room on its way).
    pub terminating: Amount,
    /// Allocatable minus what every pod holds.
    pub free: Amount,
}

/// cpu and memory, in Kubernetes quantities.
#[derive(Debug, Serialize)]
pub struct Amount {
    /// e.g. `1930m`.
    pub cpu: String,
    /// e.g. `3Gi`.
    pub memory: String,
}

impl From<Resources> for Amount {
    fn from(r: Resources) -> Amount {
        let (cpu, memory) = split(r);
        Amount { cpu, memory }
    }
}

/// The kubelet's resize condition.
#[derive(Debug, Serialize)]
pub struct PendingView {
    /// `PodResizePending` or `PodResizeInProgress`.
    pub condition: String,
    /// `Deferred`, `Infeasible`, or empty.
    pub reason: String,
    /// The kubelet's message.
    pub message: String,
    /// Since the condition last changed.
    pub age: Option<String>,
    /// The condition's `lastTransitionTime` (RFC 3339).
    pub since: Option<String>,
}

/// The memory rule on limits the kubelet has not applied (a decrease waiting or refused).
#[derive(Debug, Serialize)]
pub struct MemoryView {
    /// `below-usage`, `clear` or `unjudged`.
    pub verdict: String,
    /// What it means, with the numbers.
    pub text: String,
}

/// The recorded plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    /// The generation it was made for.
    pub generation: i64,
    /// Whether it is for the pod's current generation.
    pub current: bool,
    /// Its victims in the pod's own namespace and where each is now (the record names no
    /// other; `resize_guard_policy::plan`).
    pub victims: Vec<String>,
    /// How many victims it has in other namespaces (counted, not named).
    pub others: usize,
    /// Its age.
    pub age: String,
    /// When it was made (RFC 3339).
    pub time: String,
}

/// One Event.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// Since it last happened.
    pub age: String,
    /// When it last happened (RFC 3339).
    pub last_seen: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Reason.
    pub reason: String,
    /// Reporting component.
    pub from: String,
    /// Message.
    pub message: String,
}

/// Explains `pod` from what was read.
pub fn explain(
    pod: &Pod,
    ledger: Option<&NodeLedger>,
    ctx: &Context<'_>,
    lease: Option<&LeaseState>,
    events: &[Event],
    usage: &Evidence,
    now: Timestamp,
) -> Explanation {
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.as_ref();
    let key = PodKey::of(pod);
    let (computed, why) = qos_reason(&spec, ctx.minor);
    let qos = qos_view(
        status.and_then(|s| s.qos_class.clone()),
        computed.as_str(),
        why,
    );
    let ledger_view = ledger.map(|l| LedgerView {
        allocatable: l.allocatable.into(),
        this_pod_holds: l.entry(&key.uid).map(|e| e.held).unwrap_or_default().into(),
        this_pod_wants: spec_requests(&spec, status, Accounting::Desired).into(),
        others_hold: l.used_by_others(&key.uid).into(),
        terminating: l.terminating_others(&key.uid).into(),
        free: l.free().into(),
    });
    let condition = status.and_then(|s| {
        s.conditions.iter().flatten().find(|c| {
            c.status == "True"
                && (c.type_ == "PodResizePending" || c.type_ == "PodResizeInProgress")
        })
    });
    let resize = condition.map(|c| PendingView {
        condition: c.type_.clone(),
        reason: c.reason.clone().unwrap_or_default(),
        message: c.message.clone().unwrap_or_default(),
        age: c.last_transition_time.as_ref().map(|t| age(ago(t.0, now))),
        since: c.last_transition_time.as_ref().map(|t| rfc3339(t.0)),
    });
    let decision = if condition.is_some() {
        let verdict = assess(pod, ctx);
        decision_view(&verdict, ctx, lease)
    } else {
        DecisionView::idle(resize_pending(pod).is_none())
    };
    let memory = memory_view(pod, ctx, usage);
    let generation = pod.metadata.generation.unwrap_or(0);
    let own_namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let recorded_plan = SealedPlan::of(pod).map(|p| PlanView {
        generation: p.generation,
        current: p.generation == generation,
        victims: p
            .own
            .iter()
            .map(|name| {
                let state = victim_state(own_namespace, name, ledger);
                format!("{own_namespace}/{name} ({state})")
            })
            .collect(),
        others: p.count.saturating_sub(p.own.len()),
        age: age(ago(p.time, now)),
        time: rfc3339(p.time),
    });
    let controller = lease.map(controller_line);
    let events = events
        .iter()
        .filter(|e| is_resize_event(e))
        .map(|e| event_view(e, now))
        .collect();
    Explanation {
        pod: format!("{}/{}", key.namespace, key.name),
        node: pod::node_name(pod).map(str::to_owned),
        priority: upstream::pod::priority(pod),
        priority_class: spec.priority_class_name.clone(),
        qos,
        ledger: ledger_view,
        resize,
        decision,
        memory,
        recorded_plan,
        controller,
        events,
        notes: Vec::new(),
    }
}

/// The stored QoS class and why, or why the spec now reads another.
fn qos_view(stored: Option<String>, computed: &str, why: String) -> QosView {
    match stored {
        Some(c) if c != computed => QosView {
            class: c.clone(),
            why: format!(
                "{c} when created; the spec now reads {computed} ({why}), which the API server refuses to resize into"
            ),
        },
        _ => QosView {
            class: computed.to_owned(),
            why,
        },
    }
}

/// Who leads, or that nothing will be preempted until a controller does.
fn controller_line(l: &LeaseState) -> String {
    match (&l.holder, l.is_held()) {
        (Some(h), true) => format!(
            "{h} leads (Lease renewed {} ago)",
            l.renewed_ago.map(age).unwrap_or_default()
        ),
        _ => "no controller holds the Lease: nothing will be preempted until one does".to_owned(),
    }
}

/// One Event as the explanation lists it.
fn event_view(e: &Event, now: Timestamp) -> EventView {
    EventView {
        age: event_time(e).map(|t| age(ago(t, now))).unwrap_or_default(),
        last_seen: event_time(e).map(rfc3339),
        kind: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        from: e
            .reporting_component
            .clone()
            .filter(|c| !c.is_empty())
            .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
            .unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
    }
}

/// The memory rule on what the kubelet has yet to apply; `None` when nothing is lowered or the
/// rule is off.
fn memory_view(pod: &Pod, ctx: &Context<'_>, usage: &Evidence) -> Option<MemoryView> {
    let rule = &ctx.policy.memory.decrease;
    let check = judge(unapplied_lowerings(pod), usage, rule);
    let (verdict, text) = match &check {
        MemoryCheck::NotApplicable => return None,
        MemoryCheck::Below { .. } => ("below-usage", check.message(rule)),
        MemoryCheck::Clear(judged) => (
            "clear",
            format!(
                "the lower limit stays above usage plus headroom ({}); the kubelet should apply it",
                briefs(judged)
            ),
        ),
        MemoryCheck::Unjudged(_) | MemoryCheck::NeedsUsage(_) => ("unjudged", check.summary()),
    };
    Some(MemoryView {
        verdict: verdict.to_owned(),
        text,
    })
}

/// Where the pod `namespace/name` is now (the record carries no UID in clear: a pod of that
/// name on the node is taken for the victim).
fn victim_state(namespace: &str, name: &str, ledger: Option<&NodeLedger>) -> &'static str {
    let entry = ledger.and_then(|l| {
        l.others("")
            .find(|e| e.key.namespace == namespace && e.key.name == name)
    });
    match entry {
        Some(e) if e.terminating => "terminating",
        Some(_) => "running",
        None => "gone",
    }
}

/// The kubelet's resize Events and every Event resize-guard records (one list,
/// [`EventReason::ALL`]).
fn is_resize_event(e: &Event) -> bool {
    let reason = e.reason.as_deref().unwrap_or_default();
    reason.starts_with("Resize") || EventReason::ALL.iter().any(|r| r.as_str() == reason)
}

fn split(r: Resources) -> (String, String) {
    use resize_guard_policy::upstream::quantity::ResourceName;
    (
        ResourceName::Cpu.format(r.cpu),
        ResourceName::Memory.format(r.memory),
    )
}
