//! Resuming a plan recorded for the current generation: its victims still running are
//! preempted, terminating ones awaited, rather than chosen again. A resumed plan obeys every
//! rule a fresh one does ([`unfit_to_resume`]; the victim cap is the fresh plan's own,
//! `resize_guard_policy::victims::victim_cap`), and a victim stuck terminating long past its
//! grace period is reported, not replaced ([`stalled`]). Each victim is read with its own state,
//! by key ([`VictimStates`]).

use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::pod::PodKey;
use resize_guard_policy::policy::Policy;
use resize_guard_policy::verdict::Deferral;
use resize_guard_policy::victims::victim_cap;

use super::{
    Decision, Record, SHORT_WAIT, STALL_SLACK, STALLED_RECHECK, VictimState, VictimStates, join,
    removals,
};
use crate::preemption::brakes::Limits;
use crate::preemption::seal::PlanRecord;

/// What to do with the recorded plan `plan`; `None` once every planned victim is gone (the
/// resize, still Deferred, is then planned afresh).
pub(super) fn resume(
    plan: &PlanRecord,
    victims: &VictimStates,
    deferral: &Deferral,
    policy: &Policy,
    now: Timestamp,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
    pending_on_node: usize,
) -> Option<Decision> {
    if let Some(why) = unfit_to_resume(plan, victims, deferral, policy) {
        return Some(Decision::DropPlan {
            why,
            after: SHORT_WAIT,
        });
    }
    let pending: Vec<PodKey> = plan
        .victims
        .iter()
        .filter(|v| *victims.of(v) == VictimState::Present)
        .cloned()
        .collect();
    let fresh_needs_victims = matches!(&deferral.plan, Ok(f) if !f.victims.is_empty());
    if !pending.is_empty() && fresh_needs_victims {
        return Some(Decision::Preempt {
            record: Record::Recorded,
            note: format!("resuming the recorded plan: {}", join(&pending)),
            victims: removals(pending, policy, grace),
            limits: Limits::of(policy),
            pending_on_node,
            after: SHORT_WAIT,
        });
    }
    if let Some(note) = stalled(plan, victims, policy, now, grace) {
        return Some(Decision::Stalled {
            note,
            after: STALLED_RECHECK,
        });
    }
    let terminating = plan
        .victims
        .iter()
        .any(|v| *victims.of(v) == VictimState::Terminating);
    if terminating || !pending.is_empty() {
        return Some(Decision::Wait {
            why: "planned victims are terminating; the room they free covers the resize".into(),
            after: SHORT_WAIT,
        });
    }
    None
}

/// Why a recorded plan (of the current generation) may not be resumed, if it may not: a
/// resumed plan obeys every rule a fresh one does — the victim cap, each victim still eligible
/// on the preemptor's node ([`VictimState::Ineligible`]), preemption allowed at all for this
/// resize now (enforce mode, and a fresh plan exists: preemption enabled, the node not opted
/// out, the preemptor allowed to preempt, enough candidates within the cap).
fn unfit_to_resume(
    plan: &PlanRecord,
    victims: &VictimStates,
    deferral: &Deferral,
    policy: &Policy,
) -> Option<String> {
    // The cap a fresh plan obeys, where it is decided (`shared/src/victims.rs`).
    if let Err(over) = victim_cap(plan.victims.len(), &policy.preemption) {
        return Some(format!(
            "it names {} victims, more than preemption.maxVictimsPerResize ({})",
            over.victims, over.max
        ));
    }
    let ineligible: Vec<String> = plan
        .victims
        .iter()
        .filter_map(|v| match victims.of(v) {
            VictimState::Ineligible(why) => Some(format!("{v}: {why}")),
            _ => None,
        })
        .collect();
    if !ineligible.is_empty() {
        return Some(format!(
            "a fresh plan could not choose {}",
            ineligible.join("; ")
        ));
    }
    if policy.is_audit() {
        return Some("the policy is in audit mode, which never preempts".into());
    }
    match &deferral.plan {
        Err(why) => Some(format!("no fresh plan can make room now: {why}")),
        Ok(_) => None,
    }
}
/// The plan's victims still terminating [`STALL_SLACK`] past their grace period since the plan
/// was made (a finalizer nobody removes, a node that stopped reporting), as the Event's note.
/// The room they will free still counts, so no other victim is chosen meanwhile; the Event is
/// what tells an operator the resize waits on them.
fn stalled(
    plan: &PlanRecord,
    victims: &VictimStates,
    policy: &Policy,
    now: Timestamp,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
) -> Option<String> {
    let age = now.duration_since(plan.time).as_secs_f64().max(0.0);
    let stuck: Vec<String> = plan
        .victims
        .iter()
        .filter(|v| *victims.of(v) == VictimState::Terminating)
        .filter_map(|v| {
            let allowed = u64::from(policy.victim_grace_seconds(grace(v))) + STALL_SLACK.as_secs();
            (age > allowed as f64).then(|| {
                format!(
                    "{}/{} (grace period {}s)",
                    v.namespace,
                    v.name,
                    policy.victim_grace_seconds(grace(v))
                )
            })
        })
        .collect();
    (!stuck.is_empty()).then(|| {
        format!(
            "the resize waits on {} still terminating {:.0}s after the plan: a finalizer or a node that stopped reporting may hold it; the room it frees is already counted, so resize-guard chooses no other victim",
            stuck.join(", "),
            age
        )
    })
}
