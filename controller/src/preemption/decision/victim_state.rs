//! Where each victim of a recorded plan is now, judged by the rules a fresh plan obeys, and
//! found by the victim's key: [`victim_state`] judges one victim, [`VictimStates`] holds the
//! judgement of each, keyed by [`PodKey`], for [`decide`](super::decide). Keyed, never paired by
//! position, so a victim can only ever be read with its own state.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger};
use resize_guard_policy::pod::{PodKey, node_name};
use resize_guard_policy::policy::Policy;
use resize_guard_policy::upstream::pod::priority;
use resize_guard_policy::victims::{Candidates, Exclusion, Preemptor, exclusion, select_victims};

/// Where a planned victim is now, re-checked against the rules a fresh plan obeys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VictimState {
    /// Running on the preemptor's node, and a fresh plan could still choose it.
    Present,
    /// Running on the preemptor's node and eligible, but the reprieve run over the plan's
    /// victims still present lets it live: room appeared since the plan was made
    /// ([`spare_the_unneeded`]). A resume never removes it.
    Spare,
    /// Deletion started.
    Terminating,
    /// No longer exists (or is a different pod now).
    Gone,
    /// Still there, but no fresh plan under the current policy could choose it (another node,
    /// not lower priority, protected, critical …): the sentence says why.
    Ineligible(String),
}

/// A victim nobody said anything about: not known to exist.
static GONE: VictimState = VictimState::Gone;

/// The state of each victim of a recorded plan, by the victim's key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VictimStates(BTreeMap<PodKey, VictimState>);

impl VictimStates {
    /// The state of `victim`; [`VictimState::Gone`] when none was given for it.
    pub fn of(&self, victim: &PodKey) -> &VictimState {
        self.0.get(victim).unwrap_or(&GONE)
    }
}

/// Marks [`VictimState::Spare`] the present victims of `states` that a fresh reprieve over the
/// present ones no longer needs (`Candidates::Recorded`): a resumed plan removes only what the
/// resize still needs, never the whole record. When the present victims alone can no longer make
/// room, all of them are spared and the resize is planned afresh once the terminating ones are
/// gone.
pub fn spare_the_unneeded(
    states: &mut VictimStates,
    preemptor: &Pod,
    ledger: Option<&NodeLedger>,
    budgets: &Budgets,
    policy: &Policy,
    install_namespace: &str,
) {
    let present: Vec<PodKey> = states
        .0
        .iter()
        .filter(|(_, s)| **s == VictimState::Present)
        .map(|(k, _)| k.clone())
        .collect();
    if present.is_empty() {
        return;
    }
    let needed: Vec<PodKey> = match (ledger, preemptor.spec.as_ref()) {
        (Some(ledger), Some(spec)) => select_victims(
            &Preemptor::new(preemptor, spec, preemptor.status.as_ref()),
            ledger,
            budgets,
            policy,
            install_namespace,
            Candidates::Recorded(&present),
        )
        .map(|plan| plan.victims.into_iter().map(|v| v.key).collect())
        .unwrap_or_default(),
        _ => Vec::new(),
    };
    for key in present {
        if !needed.iter().any(|n| n.uid == key.uid) {
            states.0.insert(key, VictimState::Spare);
        }
    }
}

impl FromIterator<(PodKey, VictimState)> for VictimStates {
    fn from_iter<I: IntoIterator<Item = (PodKey, VictimState)>>(iter: I) -> Self {
        VictimStates(iter.into_iter().collect())
    }
}

/// Where the victim `key` of a recorded plan is now, judged by the rules of a fresh plan:
/// `entry` is its line in the view's pod index (`None` when gone or terminal), `ledger` the
/// resizing pod's node ledger. A victim that is another pod now (same UID, other name), the
/// preemptor itself, on another node, or excluded by [`exclusion`] (priority, critical,
/// protected, owner) is [`VictimState::Ineligible`]; a terminating one is awaited.
pub fn victim_state(
    key: &PodKey,
    entry: Option<&LedgerEntry>,
    preemptor: &Pod,
    ledger: Option<&NodeLedger>,
    policy: &Policy,
    install_namespace: &str,
) -> VictimState {
    let Some(e) = entry.filter(|e| e.key.name == key.name && e.key.namespace == key.namespace)
    else {
        return VictimState::Gone;
    };
    if preemptor.metadata.uid.as_deref() == Some(key.uid.as_str()) {
        return VictimState::Ineligible("it is the resizing pod itself".into());
    }
    let Some(ledger) = ledger.filter(|l| l.entry(&key.uid).is_some()) else {
        return VictimState::Ineligible(format!(
            "it is not on the resizing pod's node {}",
            node_name(preemptor).unwrap_or("(none)")
        ));
    };
    match exclusion(e, priority(preemptor), policy, install_namespace) {
        None => VictimState::Present,
        Some(Exclusion::Terminating) => VictimState::Terminating,
        Some(why) => VictimState::Ineligible(format!("{why} (node {})", ledger.node)),
    }
}
