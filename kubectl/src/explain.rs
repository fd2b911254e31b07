//! `kubectl resize-guard explain POD`: everything an operator needs to know about one pod's
//! resize, on one screen — its QoS class and why, its node's ledger, the kubelet's pending
//! condition, what resize-guard decides now (fits / will preempt whom / stuck and why), the plan
//! the controller recorded, whether a controller is leading, and the resize Events. Every
//! judgement is `resize_guard_policy::assess` on the same inputs the controller reads.

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::memory::{MemoryCheck, briefs, judge, unapplied_lowerings};
use resize_guard_policy::plan::PlanRecord;
use resize_guard_policy::pod::{self, PodKey, resize_pending};
use resize_guard_policy::qos::qos_reason;
use resize_guard_policy::requests::{Accounting, spec_requests};
use resize_guard_policy::resources::Resources;
use resize_guard_policy::usage::Evidence;
use resize_guard_policy::{Context, assess};
use serde::Serialize;

use crate::facts::{LeaseState, ago, event_time};
use crate::judgement::{DecisionView, decision_view, victims_table};
use crate::table::{age, bold, render};

/// The explanation, as `-o json|yaml` prints it.
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
    /// Its victims and where each is now.
    pub victims: Vec<String>,
    /// Its age.
    pub age: String,
}

/// One Event.
#[derive(Debug, Serialize)]
pub struct EventView {
    /// Since it last happened.
    pub age: String,
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
    let stored = status.and_then(|s| s.qos_class.clone());
    let qos = match stored {
        Some(c) if c != computed.as_str() => QosView {
            class: c.clone(),
            why: format!(
                "{c} when created; the spec now reads {computed} ({why}), which the API server refuses to resize into"
            ),
        },
        _ => QosView {
            class: computed.as_str().to_owned(),
            why,
        },
    };
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
    });
    let decision = if condition.is_some() {
        let verdict = assess(pod, ctx);
        decision_view(&verdict, ctx, lease)
    } else {
        DecisionView::idle(resize_pending(pod).is_none())
    };
    let memory = memory_view(pod, ctx, usage);
    let generation = pod.metadata.generation.unwrap_or(0);
    let recorded_plan = PlanRecord::of(pod).map(|p| PlanView {
        generation: p.generation,
        current: p.generation == generation,
        victims: p
            .victims
            .iter()
            .map(|v| format!("{}/{} ({})", v.namespace, v.name, victim_state(v, ledger)))
            .collect(),
        age: age(ago(p.time, now)),
    });
    let controller = lease.map(|l| match (&l.holder, l.is_held()) {
        (Some(h), true) => format!(
            "{h} leads (Lease renewed {} ago)",
            l.renewed_ago.map(age).unwrap_or_default()
        ),
        _ => "no controller holds the Lease: nothing will be preempted until one does".to_owned(),
    });
    let events = events
        .iter()
        .filter(|e| is_resize_event(e))
        .map(|e| EventView {
            age: event_time(e).map(|t| age(ago(t, now))).unwrap_or_default(),
            kind: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            from: e
                .reporting_component
                .clone()
                .filter(|c| !c.is_empty())
                .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
                .unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
        })
        .collect();
    Explanation {
        pod: format!("{}/{}", key.namespace, key.name),
        node: pod::node_name(pod).map(str::to_owned),
        priority: pod::priority(pod),
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

fn victim_state(v: &PodKey, ledger: Option<&NodeLedger>) -> &'static str {
    match ledger.and_then(|l| l.entry(&v.uid)) {
        Some(e) if e.terminating => "terminating",
        Some(_) => "running",
        None => "gone",
    }
}

/// The kubelet's resize Events and resize-guard's.
fn is_resize_event(e: &Event) -> bool {
    let reason = e.reason.as_deref().unwrap_or_default();
    reason.starts_with("Resize")
        || matches!(reason, "PreemptingForResize" | "Preempted" | "WouldPreempt")
}

fn split(r: Resources) -> (String, String) {
    use resize_guard_policy::quantity::ResourceName;
    (
        ResourceName::Cpu.format(r.cpu),
        ResourceName::Memory.format(r.memory),
    )
}

/// The text form.
pub fn render_text(x: &Explanation, wide: bool) -> String {
    let mut out = String::new();
    let mut field = |k: &str, v: String| out.push_str(&format!("{:<12}{v}\n", format!("{k}:")));
    field("Pod", x.pod.clone());
    field("Node", x.node.clone().unwrap_or_else(|| "<none>".into()));
    field(
        "Priority",
        match &x.priority_class {
            Some(c) => format!("{} (PriorityClass {c})", x.priority),
            None => x.priority.to_string(),
        },
    );
    field("QoS class", format!("{} — {}", x.qos.class, x.qos.why));
    if let Some(l) = &x.ledger {
        out.push_str(&format!(
            "\n{}\n",
            bold(&format!(
                "Node {} (kubelet accounting):",
                x.node.as_deref().unwrap_or_default()
            ))
        ));
        let row = |name: &str, pick: fn(&Amount) -> &String| -> Vec<String> {
            let mut r = vec![name.to_owned()];
            for a in [
                &l.allocatable,
                &l.others_hold,
                &l.terminating,
                &l.this_pod_holds,
                &l.this_pod_wants,
                &l.free,
            ] {
                r.push(pick(a).clone());
            }
            r
        };
        let table = render(
            &[
                "RESOURCE",
                "ALLOCATABLE",
                "OTHER PODS",
                "TERMINATING",
                "THIS POD HOLDS",
                "THIS POD WANTS",
                "FREE",
            ],
            &[row("cpu", |a| &a.cpu), row("memory", |a| &a.memory)],
        );
        out.push_str(&indent(&table));
    }
    out.push('\n');
    match &x.resize {
        Some(p) => {
            let state = if p.reason.is_empty() {
                p.condition.clone()
            } else {
                format!("{} ({})", p.reason, p.condition)
            };
            let since = p
                .age
                .as_deref()
                .map(|a| format!(", for {a}"))
                .unwrap_or_default();
            out.push_str(&format!("{} {state}{since}\n", bold("Resize:")));
            if !p.message.is_empty() {
                out.push_str(&format!("  kubelet: {}\n", p.message));
            }
        }
        None => out.push_str(&format!(
            "{} none pending (spec and status agree)\n",
            bold("Resize:")
        )),
    }
    out.push_str(&format!(
        "\n{} {}\n",
        bold("resize-guard:"),
        x.decision.label
    ));
    for line in x.decision.text.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str(&victims_table(&x.decision.victims, true));
    if let Some(m) = &x.memory {
        out.push_str(&format!("  memory ({}): {}\n", m.verdict, m.text));
    }
    if let Some(p) = &x.recorded_plan {
        out.push_str(&format!(
            "  recorded plan ({} ago, generation {}{}): {}\n",
            p.age,
            p.generation,
            if p.current { "" } else { ", stale" },
            p.victims.join(", ")
        ));
    }
    if let Some(c) = &x.controller {
        out.push_str(&format!("  controller: {c}\n"));
    }
    for n in &x.notes {
        out.push_str(&format!("  note: {n}\n"));
    }
    out.push_str(&format!("\n{}", bold("Events:")));
    if x.events.is_empty() {
        out.push_str(" <none>\n");
    } else {
        out.push('\n');
        let rows: Vec<Vec<String>> = x
            .events
            .iter()
            .map(|e| {
                let mut r = vec![e.age.clone(), e.kind.clone(), e.reason.clone()];
                if wide {
                    r.push(e.from.clone());
                }
                r.push(e.message.clone());
                r
            })
            .collect();
        let headers: &[&str] = if wide {
            &["LAST SEEN", "TYPE", "REASON", "FROM", "MESSAGE"]
        } else {
            &["LAST SEEN", "TYPE", "REASON", "MESSAGE"]
        };
        out.push_str(&indent(&render(headers, &rows)));
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::budget::Budgets;
    use resize_guard_policy::fixture::{PodBuilder, container, node};
    use resize_guard_policy::plan::PLAN_ANNOTATION;
    use resize_guard_policy::policy::Policy;

    #[test]
    fn a_deferred_resize_awaiting_its_victim_shows_the_recorded_plan() {
        let filler = PodBuilder::new("batch", "filler")
            .owned_by("ReplicaSet")
            .node("n")
            .priority(100)
            .container(container("app").guaranteed("1500m", "256Mi"))
            .running(10)
            .terminating()
            .build();
        let uid = filler.metadata.uid.clone().unwrap_or_default();
        let plan = format!(
            r#"{{"generation":2,"victims":[{{"namespace":"batch","name":"filler","uid":"{uid}"}}],"time":"2026-12-01T10:00:00Z"}}"#
        );
        let app = PodBuilder::new("shop", "app")
            .node("n")
            .priority(1000)
            .container(container("app").guaranteed("250m", "256Mi"))
            .running(20)
            .qos_status("Guaranteed")
            .resize("app", "cpu", "550m")
            .resize_pending("Deferred", "Node didn't have enough resource: cpu")
            .annotation(PLAN_ANNOTATION, &plan)
            .build();
        let ledger = NodeLedger::new(&node("n", "1930m", "3Gi"), [&filler, &app]);
        let (policy, budgets) = (Policy::default(), Budgets::default());
        let ctx = Context {
            ledger: Some(&ledger),
            budgets: &budgets,
            policy: &policy,
            install_namespace: "resize-guard",
            minor: None,
        };
        let now = Timestamp::from_second(1_796_126_500).unwrap();
        let x = explain(
            &app,
            Some(&ledger),
            &ctx,
            None,
            &[],
            &Evidence::NotFetched,
            now,
        );
        assert_eq!(x.decision.label, "deferred-awaiting-termination");
        let text = render_text(&x, false);
        assert!(
            text.contains("  recorded plan (121m ago, generation 2): batch/filler (terminating)\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  node n lacks cpu 120m; terminating pods batch/filler are freeing that room"
            ),
            "{text}"
        );
        assert!(text.contains("Priority:   1000\n"), "{text}");
        assert!(
            text.contains("Resize: Deferred (PodResizePending)\n"),
            "{text}"
        );
        assert!(text.ends_with("Events: <none>\n"), "{text}");
        assert!(
            !text.contains("VICTIM"),
            "no victims, no table header:\n{text}"
        );
        let json = serde_json::to_value(&x).unwrap();
        assert_eq!(json["recordedPlan"]["current"], true);
        assert_eq!(json["ledger"]["terminating"]["cpu"], "1500m");
    }

    #[test]
    fn a_memory_decrease_the_kubelet_refused_is_judged_against_usage() {
        let mut app = PodBuilder::new("shop", "app")
            .node("n")
            .container(container("app").guaranteed("250m", "256Mi"))
            .running(20)
            .resize("app", "memory", "100Mi")
            .build();
        app.status = Some(
            serde_json::from_value(serde_json::json!({
                "conditions": [{"type": "PodResizeInProgress", "status": "True", "reason": "Error",
                    "message": "cannot decrease memory limits: attempting to set container \"app\" memory limit (104857600) below current usage (157286400)"}],
                "containerStatuses": [{"name": "app", "image": "i", "imageID": "", "ready": true,
                    "restartCount": 0, "resources": {"limits": {"memory": "256Mi"}}}]
            }))
            .unwrap(),
        );
        let (policy, budgets) = (Policy::default(), Budgets::default());
        let ctx = Context {
            ledger: None,
            budgets: &budgets,
            policy: &policy,
            install_namespace: "resize-guard",
            minor: None,
        };
        let now = Timestamp::from_second(1_796_126_500).unwrap();
        let usage = Evidence::Measured(resize_guard_policy::usage::PodUsage {
            containers: [("app".to_owned(), 150 << 20)].into(),
            age: std::time::Duration::from_secs(8),
            window: "10s".into(),
        });
        let x = explain(&app, None, &ctx, None, &[], &usage, now);
        let text = render_text(&x, false);
        assert!(
            text.contains("  memory (below-usage): resize-guard: this resize lowers a memory limit below what is in use (working set from metrics.k8s.io, measured 8s ago): container \"app\" memory limit 256Mi → 100Mi, working set 150Mi"),
            "{text}"
        );
        let down = Evidence::Unavailable("metrics.k8s.io is unavailable".into());
        let x = explain(&app, None, &ctx, None, &[], &down, now);
        assert_eq!(x.memory.unwrap().verdict, "unjudged");
        let settled = PodBuilder::new("shop", "app")
            .container(container("app").guaranteed("250m", "256Mi"))
            .build();
        assert!(
            explain(&settled, None, &ctx, None, &[], &usage, now)
                .memory
                .is_none()
        );
    }
}
