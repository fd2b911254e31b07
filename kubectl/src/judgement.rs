//! What resize-guard decides about a pending resize, in words: one view of a
//! `resize_guard_policy` [`Verdict`] shared by `explain`, `status` and `what-if` — the label, a
//! paragraph with the fix, the victims in the order they would go, and a one-line form for
//! tables. The policy's own knobs that change what the controller does with a plan (audit
//! mode, `minDeferredSeconds`, the Eviction API) are said next to it.

use resize_guard_policy::Context;
use resize_guard_policy::upstream::quantity::ResourceName;
use resize_guard_policy::verdict::{Deferral, Verdict};
use resize_guard_policy::victims::{NoPlan, name_list};
use serde::Serialize;

use crate::facts::LeaseState;
use crate::table::render;

/// The decision, as printed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionView {
    /// The verdict label (`fits`, `deferred-preemptible`, `deferred-stuck`, `infeasible`, …;
    /// `none` when no resize is pending).
    pub label: String,
    /// The explanation with the fix, one or more lines.
    pub text: String,
    /// Pods resize-guard would preempt, in order.
    pub victims: Vec<VictimView>,
    /// Why there is no plan (`NoLowerPriorityPods`, `PreemptionPolicyNever`, …).
    pub reason: Option<String>,
    /// One line, for tables.
    pub short: String,
}

/// A victim.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VictimView {
    /// `namespace/name`.
    pub pod: String,
    /// Its priority.
    pub priority: i32,
    /// What it holds.
    pub cpu: String,
    /// What it holds.
    pub memory: String,
    /// Whether evicting it breaks a PodDisruptionBudget.
    pub violates_pdb: bool,
}

impl DecisionView {
    /// No resize pending: nothing to decide.
    pub fn idle(settled: bool) -> DecisionView {
        let text = if settled {
            "nothing to decide: no resize is pending"
        } else {
            "nothing to decide: the resize is not pending on the kubelet"
        };
        DecisionView {
            label: "none".into(),
            text: text.into(),
            victims: vec![],
            reason: None,
            short: "-".into(),
        }
    }
}

/// Describes `verdict` (from `assess` on the pod's stored resize, or `classify` on a proposed
/// one) under `ctx`'s policy; `lease` says whether a controller is there to act.
pub fn decision_view(
    verdict: &Verdict,
    ctx: &Context<'_>,
    lease: Option<&LeaseState>,
) -> DecisionView {
    let mut view = DecisionView {
        label: verdict.label().to_owned(),
        text: String::new(),
        victims: vec![],
        reason: None,
        short: String::new(),
    };
    match verdict {
        Verdict::Fits(f) => {
            view.text = format!(
                "the resize fits on node {} now: the pod asks for {}, the other pods hold {}, \
                 allocatable is {}; the kubelet admits it on its next retry",
                f.node, f.request, f.used, f.allocatable
            );
            view.short = "fits now".into();
        }
        Verdict::Deferred(d) => deferred(&mut view, d, ctx, lease),
        Verdict::Infeasible(i) => {
            let (req, cap) = (
                i.resource.format(i.requested),
                i.resource.format(i.allocatable),
            );
            view.text = format!(
                "the resize can never fit on node {node}: the pod would request {res} {req} but \
                 the node's allocatable {res} is {cap}. No preemption can help.\n\
                 fix: resize to at most {cap} {res} for the whole pod, or move the workload to a \
                 larger node{revert}",
                node = i.node,
                res = i.resource,
                revert = if ctx.policy.feasibility.revert_infeasible {
                    "; resize-guard reverts the stored resize (feasibility.revertInfeasible)"
                } else {
                    ""
                },
            );
            view.short = format!("infeasible: {} {req} > allocatable {cap}", i.resource);
        }
        Verdict::Skipped(why) => {
            view.text = format!("resize-guard does not judge this pod: {why}");
            view.short = format!("skipped: {why}");
        }
        other => {
            view.text = other.message();
            view.short = other.label().to_owned();
        }
    }
    view
}

fn deferred(view: &mut DecisionView, d: &Deferral, ctx: &Context<'_>, lease: Option<&LeaseState>) {
    let head = format!("node {} lacks {}", d.node, d.shortfall_text());
    let policy = ctx.policy;
    match &d.plan {
        Ok(plan) if plan.victims.is_empty() => {
            let awaiting = name_list(plan.awaiting.iter(), 5);
            view.text = format!(
                "{head}; terminating pods {awaiting} are freeing that room, so nobody else is preempted"
            );
            view.short = format!("awaiting {awaiting}");
        }
        Ok(plan) => {
            view.victims = plan
                .victims
                .iter()
                .map(|v| VictimView {
                    pod: format!("{}/{}", v.key.namespace, v.key.name),
                    priority: v.priority,
                    cpu: ResourceName::Cpu.format(v.held.cpu),
                    memory: ResourceName::Memory.format(v.held.memory),
                    violates_pdb: v.violates_pdb,
                })
                .collect();
            let names = plan.victim_names(5);
            let mut lines = vec![if policy.is_audit() {
                format!(
                    "{head}; in audit mode resize-guard only reports that it would preempt {names} (WouldPreempt Events)"
                )
            } else {
                format!("{head}; resize-guard will preempt {names}:")
            }];
            if policy.preemption.min_deferred_seconds > 0 {
                lines.push(format!(
                    "once the resize has been Deferred for {}s (preemption.minDeferredSeconds)",
                    policy.preemption.min_deferred_seconds
                ));
            }
            if lease.is_some_and(|l| !l.is_held()) {
                lines.push(
                    "but no controller holds the Lease, so nobody acts on this plan now".into(),
                );
            }
            view.text = lines.join("\n");
            view.short = if policy.is_audit() {
                format!("would preempt {names} (audit)")
            } else {
                format!("will preempt {names}")
            };
        }
        Err(why) => {
            view.reason = Some(why.reason().to_owned());
            view.text = format!(
                "{head}, and resize-guard cannot make room: {why}.\nfix: {}",
                fix(why)
            );
            view.short = format!("stuck: {}", why.brief());
        }
    }
}

/// What an operator can do about a missing plan.
fn fix(why: &NoPlan) -> &'static str {
    match why {
        NoPlan::Disabled => {
            "set preemption.enabled: true in the policy ConfigMap, or free room on the node by hand"
        }
        NoPlan::NodeOptedOut(_) => {
            "the node opted out of resize preemption; free room on it by hand or move the workload"
        }
        NoPlan::PreemptorNeverPreempts => {
            "give the pod a PriorityClass with preemptionPolicy: PreemptLowerPriority, or free room by hand"
        }
        NoPlan::CriticalPreemptor => "none needed: the kubelet makes room for critical pods itself",
        NoPlan::NoCandidates { .. } => {
            "only pods of strictly lower priority that policy does not protect can be preempted: \
             raise this pod's priority, or free room on the node by hand"
        }
        NoPlan::NotEnough { .. } => {
            "even every preemptible pod is not enough: resize in a smaller step or move the workload"
        }
        NoPlan::TooManyVictims { .. } => {
            "raise preemption.maxVictimsPerResize in the policy ConfigMap, or resize in a smaller step"
        }
    }
}

/// The victims as a table, each line indented by two spaces (nothing when there are none);
/// `pdb` adds whether evicting each breaks a PodDisruptionBudget.
pub fn victims_table(victims: &[VictimView], pdb: bool) -> String {
    if victims.is_empty() {
        // No header over no rows: the decision's own sentence says why nobody is preempted.
        return String::new();
    }
    let rows: Vec<Vec<String>> = victims
        .iter()
        .map(|v| {
            let mut row = vec![
                v.pod.clone(),
                v.priority.to_string(),
                v.cpu.clone(),
                v.memory.clone(),
            ];
            if pdb {
                row.push(if v.violates_pdb { "yes" } else { "no" }.to_owned());
            }
            row
        })
        .collect();
    let headers: &[&str] = if pdb {
        &["VICTIM", "PRIORITY", "CPU", "MEMORY", "BREAKS PDB"]
    } else {
        &["VICTIM", "PRIORITY", "CPU", "MEMORY"]
    };
    render(headers, &rows)
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect()
}
