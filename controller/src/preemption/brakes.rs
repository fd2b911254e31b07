//! The brakes between a preemption plan and its victims (ARCHITECTURE.md, "Brakes"): whatever the
//! decision, the controller removes victims no faster, in no more places at once, and no more
//! often for one resize than the policy allows, and stops where its plans keep failing to help.
//!
//! - **One plan in flight per node.** A plan claims its node until its resize is admitted or
//!   the plan ends (cleared, dropped, re-planned, failed), or [`CLAIM_TTL`] passes without news
//!   of it; another resize on that node waits.
//! - **Eviction rates** ([`bucket`]): a cluster-wide token bucket
//!   (`preemption.maxEvictionsPerMinute`, the outer bound) and one per preemptor namespace
//!   (`preemption.maxEvictionsPerNamespacePerMinute`), each holding one whole plan
//!   ([`Limits::bucket_size`]: `maxVictimsPerResize` tokens) and refilling at its rate. A plan
//!   starts only when both hold a token for each of its victims, so two plans admitted together can
//!   never exceed either; tokens of victims that were not removed go back. One namespace's churn
//!   spends only its own budget and its share of the cluster's.
//! - **Victims per resize across plans**: `maxVictimsPerResize` caps the victims one resize
//!   costs over its plans that helped nobody (counted per pod UID and `metadata.generation`).
//! - **A circuit breaker per scope** ([`breaker`], `preemption.circuitBreaker`): a plan is futile
//!   when the victims of the previous plan for the same resize were removed, the resize still
//!   needs another, and the node's count of pending resizes did not drop meanwhile: the room
//!   went nowhere resize-guard meant it to (to a resize asked for after the plan, say, which the
//!   kubelet retried first: `tests/e2e/preemption/breaker.rs`). Room that went to resizes
//!   already pending when the plan was made is progress, not futility. `futilePlans` futile plans
//!   within `windowSeconds` in one scope (the preemptor's namespace by default, or its node, or
//!   the cluster) stop preemption in that scope for `pauseSeconds`.
//!
//! **The counts outlive a leader** ([`persisted`], [`ledger`]): the buckets, each resize's spend
//! and the breakers are written, with wall-clock times, to ConfigMap `resize-guard-brakes` in the
//! install namespace, through the lease's fence, at most once a second unless a plan waits on
//! them. A new leader reads them back before its reconcile loop acts. Node claims stay in
//! memory: a recorded plan is resumed by the next leader from the preemptor's annotation
//! (ARCHITECTURE.md, "controller/": plan, then act).
//!
//! **A reserve instead of a write on every plan's path** ([`Admission::saved`]). Each document
//! also declares a *reserve*: the victims this leader may let through before its next document
//! is saved (one whole plan, `maxVictimsPerResize`). A plan whose victims fit in the reserve of
//! the newest saved document sends its evictions at once, and the document counting them
//! follows; a plan beyond it waits until a document counting it is saved (written at once, not
//! after the interval), and is held if that fails. A new leader that reads a reserve charges it
//! to every bucket at the moment it takes over — a whole plan's worth, so every bucket starts
//! empty and refills at its rate — since its predecessor may have spent it anywhere just before
//! it stopped. What the reserve does not cover: a leader that dies within the interval after
//! such a plan leaves that plan's victims out of its resize's spend and its futility out of the
//! breaker (the buckets still charge them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::audience::Audience;
use resize_guard_policy::pod::PodKey;
use resize_guard_policy::policy::{CircuitBreaker, Policy};
use tokio::sync::watch;

pub mod breaker;
mod bucket;
pub mod ledger;
pub mod persisted;

use breaker::{Breaker, Reach};
use bucket::{Bucket, Shape};

/// How long a node stays claimed by a plan nobody hears of (its preemptor deleted, say).
pub const CLAIM_TTL: Duration = Duration::from_secs(300);
/// How long a resize's count is kept after it was last touched.
const SPENT_TTL: Duration = Duration::from_secs(3600);
/// How a held plan's note names the holder of its node's claim when that holder is a pod of
/// another namespace.
pub const OTHER_NAMESPACE: &str = "a pod in another namespace";
/// How long a plan waits for its brakes' state to be saved before it is held instead.
const SAVE_WAIT: Duration = Duration::from_secs(10);

/// The brakes' settings, read from the policy in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `preemption.maxVictimsPerResize`: the victims one resize may cost over its plans
    /// (and the size of each bucket and of the reserve: [`Limits::bucket_size`]).
    pub per_resize: u32,
    /// `preemption.maxEvictionsPerMinute`.
    pub per_minute: u32,
    /// `preemption.maxEvictionsPerNamespacePerMinute`.
    pub per_namespace_minute: u32,
    /// `preemption.circuitBreaker`.
    pub breaker: CircuitBreaker,
}

impl Limits {
    /// The limits `policy` sets.
    pub fn of(policy: &Policy) -> Limits {
        Limits {
            per_resize: policy.preemption.max_victims_per_resize.max(1),
            per_minute: policy.preemption.max_evictions_per_minute.max(1),
            per_namespace_minute: policy
                .preemption
                .max_evictions_per_namespace_per_minute
                .max(1),
            breaker: policy.preemption.circuit_breaker,
        }
    }

    /// The tokens each eviction-rate bucket holds at most: one whole plan, the largest a plan
    /// may be (`maxVictimsPerResize`). Derived, not a knob of its own: a bucket smaller than a
    /// plan would hold that plan for ever (a plan starts only when the bucket holds a token for
    /// each of its victims), and a larger one would let more than one plan through at once, a
    /// burst beyond what the rates (`maxEvictionsPerMinute`,
    /// `maxEvictionsPerNamespacePerMinute`) promise. The reserve of the persisted state
    /// ([`Admission::saved`]) is one such bucket too.
    pub fn bucket_size(self) -> u32 {
        self.per_resize
    }

    fn cluster(self) -> Shape {
        Shape {
            size: self.bucket_size(),
            per_minute: self.per_minute,
        }
    }

    fn namespace(self) -> Shape {
        Shape {
            size: self.bucket_size(),
            per_minute: self.per_namespace_minute,
        }
    }
}

/// Why a plan may not start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// A circuit breaker the plan falls under is open (and opened on this plan when
    /// `opened_now`).
    Paused {
        /// What the open breaker covers.
        reach: Reach,
        /// Until the breaker closes.
        left: Duration,
        /// This plan was the one too many.
        opened_now: bool,
        /// Futile plans counted when it opened.
        futile: u32,
    },
    /// Another resize's plan is in flight on the node.
    NodeBusy {
        /// Its preemptor: `namespace/name` when it is in the held plan's namespace, else
        /// [`OTHER_NAMESPACE`] (this text reaches the held plan's namespace).
        holder: String,
    },
    /// The resize already cost victims; this plan would take it past the cap.
    Spent {
        /// Victims it already cost.
        spent: u32,
        /// This plan's victims.
        more: u32,
    },
    /// The cluster-wide eviction rate allows this plan's victims only after `wait`.
    Rate {
        /// Until enough tokens are back.
        wait: Duration,
    },
    /// The preemptor's namespace has spent its eviction budget for now.
    NamespaceRate {
        /// The namespace.
        namespace: String,
        /// Until enough tokens are back.
        wait: Duration,
    },
    /// The brakes' state could not be saved, so the eviction it pays for is not sent.
    Unsaved {
        /// Why.
        why: String,
    },
}

impl Held {
    /// Stable `outcome` label of `resize_guard_preemptions_total` for a plan held back
    /// (`breaker_opened` for the plan that opened the breaker).
    pub fn outcome(&self) -> &'static str {
        match self {
            Held::Paused {
                opened_now: true, ..
            } => "breaker_opened",
            Held::Paused { .. } => "held_breaker_open",
            Held::NodeBusy { .. } => "held_node_busy",
            Held::Spent { .. } => "held_victims_per_resize",
            Held::Rate { .. } => "held_eviction_rate",
            Held::NamespaceRate { .. } => "held_namespace_rate",
            Held::Unsaved { .. } => "held_state_unsaved",
        }
    }

    /// The brake that holds the plan, in words that stay the same while it holds (the note of
    /// the `PreemptionHeld` Event, so repeats aggregate into one series).
    pub fn brake(&self, limits: Limits) -> String {
        match self {
            Held::Paused { reach, .. } => format!(
                "the circuit breaker of {reach} is open (preemption.circuitBreaker: {} futile plans within {}s pause it for {}s)",
                limits.breaker.futile_plans,
                limits.breaker.window_seconds,
                limits.breaker.pause_seconds
            ),
            Held::NodeBusy { holder } => {
                format!("one plan at a time per node: the plan of {holder} is in flight")
            }
            Held::Spent { .. } => format!(
                "this resize reached preemption.maxVictimsPerResize ({})",
                limits.per_resize
            ),
            Held::Rate { .. } => format!(
                "the cluster-wide eviction rate (preemption.maxEvictionsPerMinute: {}) is used up for now",
                limits.per_minute
            ),
            Held::NamespaceRate { namespace, .. } => format!(
                "namespace {namespace}'s eviction budget (preemption.maxEvictionsPerNamespacePerMinute: {}) is used up for now",
                limits.per_namespace_minute
            ),
            Held::Unsaved { .. } => format!(
                "the brakes' state could not be saved to ConfigMap {}; no eviction is sent until it is",
                ledger::CONFIGMAP
            ),
        }
    }
}

/// A node's claim.
#[derive(Debug, Clone)]
struct Claim {
    /// The preemptor whose plan holds the node.
    holder: PodKey,
    since: Instant,
}

/// What one resize has cost so far.
#[derive(Debug, Clone, PartialEq)]
struct Spent {
    generation: i64,
    victims: u32,
    /// Victims reserved by a plan in flight and not yet counted (persisted as spent: a leader
    /// that dies mid-plan leaves its successor assuming they all went).
    in_flight: u32,
    /// Victims of the current plan were removed (a further plan is futile unless the node made
    /// progress).
    removed_this_plan: bool,
    /// Pending resizes on the node when the current plan was made.
    pending_at_plan: usize,
    touched: Instant,
}

/// Every count the brakes keep.
#[derive(Debug)]
struct State {
    cluster: Bucket,
    namespaces: HashMap<String, Bucket>,
    /// A namespace's bucket made before it is seen starts empty at this time, not full (set
    /// when persisted state could not be read: nothing then may spend a full bucket).
    fresh_from: Option<Instant>,
    nodes: HashMap<String, Claim>,
    resizes: HashMap<String, Spent>,
    breakers: HashMap<Reach, Breaker>,
    /// Bumped by every change worth persisting.
    version: u64,
    /// Victims let through by this process so far (the reserve's measure).
    admitted: u64,
    /// The reserve the next document declares: `maxVictimsPerResize` of the latest plan (none
    /// before the first).
    reserve: u32,
}

impl State {
    /// Full buckets, no claims, no counts.
    fn full() -> State {
        State {
            cluster: Bucket::full(),
            namespaces: HashMap::new(),
            fresh_from: None,
            nodes: HashMap::new(),
            resizes: HashMap::new(),
            breakers: HashMap::new(),
            version: 0,
            admitted: 0,
            reserve: 0,
        }
    }

    fn changed(&mut self) -> u64 {
        self.version += 1;
        self.version
    }

    fn new_bucket(&self) -> Bucket {
        self.fresh_from.map_or_else(Bucket::full, Bucket::empty_at)
    }
}

/// How far the state has been saved.
#[derive(Debug, Clone, Default)]
struct Saved {
    /// Every version up to this one is saved.
    through: u64,
    /// The saved documents' reserves cover plans until this many victims were let through.
    covers: u64,
    /// The last failed save: the version it tried and why it failed.
    failed: Option<(u64, String)>,
}

/// The brakes of one controller process (shared by every reconcile).
#[derive(Debug)]
pub struct Brakes {
    state: Mutex<State>,
    /// The latest version, for the ledger's writer.
    changes: watch::Sender<u64>,
    saved: watch::Sender<Saved>,
    /// The newest version a plan beyond the reserve waits for: the ledger writes it at once.
    urgent: watch::Sender<u64>,
    /// A ledger writer is running: plans wait for their state to be saved.
    persisting: AtomicBool,
}

impl Default for Brakes {
    fn default() -> Self {
        Brakes::new()
    }
}

/// A plan let through: tokens are held for each victim; those not used (see
/// [`Admission::removed`]) go back when it is dropped, and the removed count toward the resize.
#[derive(Debug)]
pub struct Admission<'a> {
    brakes: &'a Brakes,
    uid: String,
    namespace: String,
    reserved: u32,
    removed: u32,
    version: u64,
    /// [`State::admitted`] with this plan's victims.
    admitted: u64,
}

impl Admission<'_> {
    /// One victim was removed.
    pub fn removed(&mut self) {
        self.removed = self.removed.saturating_add(1).min(self.reserved);
    }

    /// Completes once the state that let this plan through is saved, or a saved document's
    /// reserve covers its victims (at once when nothing persists it), or says why it could not
    /// be: its evictions must then not be sent.
    pub async fn saved(&self) -> Result<(), Held> {
        if !self.brakes.persisting.load(Ordering::Acquire) {
            return Ok(());
        }
        let (want, admitted) = (self.version, self.admitted);
        let mut rx = self.brakes.saved.subscribe();
        if rx.borrow().covers >= admitted {
            return Ok(());
        }
        self.brakes.urgent.send_if_modified(|w| {
            let newer = want > *w;
            *w = (*w).max(want);
            newer
        });
        let wait = async {
            loop {
                {
                    let s = rx.borrow_and_update();
                    if s.through >= want || s.covers >= admitted {
                        return Ok(());
                    }
                    if let Some((tried, why)) = &s.failed
                        && *tried >= want
                    {
                        return Err(why.clone());
                    }
                }
                if rx.changed().await.is_err() {
                    return Err("the brakes are gone".to_owned());
                }
            }
        };
        match tokio::time::timeout(SAVE_WAIT, wait).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(Held::Unsaved { why }),
            Err(_) => Err(Held::Unsaved {
                why: format!("not saved within {}s", SAVE_WAIT.as_secs()),
            }),
        }
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let brakes = self.brakes;
        let mut s = brakes.lock();
        let back = f64::from(self.reserved - self.removed);
        s.cluster.tokens += back;
        if let Some(b) = s.namespaces.get_mut(&self.namespace) {
            b.tokens += back;
        }
        if let Some(spent) = s.resizes.get_mut(&self.uid) {
            spent.in_flight = spent.in_flight.saturating_sub(self.reserved);
            if self.removed > 0 {
                spent.victims = spent.victims.saturating_add(self.removed);
                spent.removed_this_plan = true;
            }
        }
        let v = s.changed();
        brakes.changes.send_replace(v);
    }
}

impl Brakes {
    /// Brakes with full buckets, no claims, no counts.
    pub fn new() -> Brakes {
        Brakes {
            state: Mutex::new(State::full()),
            changes: watch::Sender::new(0),
            saved: watch::Sender::new(Saved::default()),
            urgent: watch::Sender::new(0),
            persisting: AtomicBool::new(false),
        }
    }

    /// The state; a poisoned lock is taken over (every update leaves it consistent).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets a plan of `victims` for `preemptor` start now, or says why not. `fresh` is a new
    /// plan (not the resume of a recorded one); `pending_on_node` counts the node's pending
    /// resizes now (its drop between two plans is the node's progress).
    #[allow(clippy::too_many_arguments)]
    pub fn admit(
        &self,
        preemptor: &Pod,
        node: &str,
        victims: u32,
        fresh: bool,
        pending_on_node: usize,
        limits: Limits,
        now: Instant,
    ) -> Result<Admission<'_>, Held> {
        let mut s = self.lock();
        let key = PodKey::of(preemptor);
        let (uid, namespace) = (key.uid.clone(), key.namespace.clone());
        let generation = preemptor.metadata.generation.unwrap_or_default();
        let at = Attempt {
            namespace: &namespace,
            node,
            limits,
            now,
        };
        open_breaker(&mut s, at)?;
        if let Some(claim) = s.nodes.get(node)
            && claim.holder.uid != uid
            && now.saturating_duration_since(claim.since) < CLAIM_TTL
        {
            // The holder reaches the preemptor's namespace (the `PreemptionHeld` Event on its
            // pod): a pod of another namespace is not named there (shared/src/audience.rs).
            let holder = if Audience::Namespace(&namespace).may_name(&claim.holder) {
                claim.holder.to_string()
            } else {
                OTHER_NAMESPACE.to_owned()
            };
            return Err(Held::NodeBusy { holder });
        }
        s.resizes
            .retain(|_, r| now.saturating_duration_since(r.touched) < SPENT_TTL);
        let spent = s
            .resizes
            .get(&uid)
            .filter(|r| r.generation == generation)
            .cloned();
        // After a plan whose victims went: futile if the node made no progress, and then its
        // victims count toward this resize's cap; with progress the count starts again.
        let (already, futile) = match &spent {
            Some(r) if fresh && r.removed_this_plan => {
                let futile = pending_on_node >= r.pending_at_plan;
                (if futile { r.victims } else { 0 }, futile)
            }
            Some(r) => (r.victims, false),
            None => (0, false),
        };
        if already.saturating_add(victims) > limits.per_resize {
            return Err(Held::Spent {
                spent: already,
                more: victims,
            });
        }
        if futile && limits.breaker.futile_plans > 0 {
            let opened = count_futile(&mut s, at);
            let v = s.changed();
            self.changes.send_replace(v);
            opened?;
        }
        take_tokens(&mut s, at, victims)?;
        s.nodes.insert(
            node.to_owned(),
            Claim {
                holder: key.clone(),
                since: now,
            },
        );
        let entry = s.resizes.entry(uid.clone()).or_insert(Spent {
            generation,
            victims: 0,
            in_flight: 0,
            removed_this_plan: false,
            pending_at_plan: pending_on_node,
            touched: now,
        });
        if entry.generation != generation {
            entry.generation = generation;
            entry.victims = 0;
            entry.in_flight = 0;
        }
        entry.victims = entry.victims.min(already);
        entry.in_flight = entry.in_flight.saturating_add(victims);
        if fresh {
            entry.removed_this_plan = false;
            entry.pending_at_plan = pending_on_node;
        }
        entry.touched = now;
        s.admitted = s.admitted.saturating_add(u64::from(victims));
        s.reserve = limits.bucket_size();
        let (version, admitted) = (s.changed(), s.admitted);
        self.changes.send_replace(version);
        Ok(Admission {
            brakes: self,
            uid,
            namespace,
            reserved: victims,
            removed: 0,
            version,
            admitted,
        })
    }

    /// The preemptor's plan ended (cleared, dropped, re-planned, failed): its node is free.
    /// With `resolved` (the resize was admitted or is gone) its count is forgotten too.
    pub fn release(&self, preemptor: &Pod, node: Option<&str>, resolved: bool) {
        let uid = PodKey::of(preemptor).uid;
        let mut s = self.lock();
        if let Some(node) = node
            && s.nodes.get(node).is_some_and(|c| c.holder.uid == uid)
        {
            s.nodes.remove(node);
        }
        if resolved && s.resizes.remove(&uid).is_some() {
            let v = s.changed();
            self.changes.send_replace(v);
        }
    }

    /// The preemptor's plan is still in flight (its victims terminating): its claim stays fresh.
    pub fn touch(&self, preemptor: &Pod, node: Option<&str>, now: Instant) {
        let uid = PodKey::of(preemptor).uid;
        let mut s = self.lock();
        if let Some(claim) = node.and_then(|n| s.nodes.get_mut(n))
            && claim.holder.uid == uid
        {
            claim.since = now;
        }
    }

    /// True while any circuit breaker is open.
    pub fn paused(&self, now: Instant) -> bool {
        self.lock()
            .breakers
            .values()
            .any(|b| b.paused_until.is_some_and(|until| now < until))
    }
}

/// A plan asking to start: where, under which limits and when; what each check of
/// [`Brakes::admit`] judges.
#[derive(Debug, Clone, Copy)]
struct Attempt<'a> {
    /// The preemptor's namespace.
    namespace: &'a str,
    /// The node the plan makes room on.
    node: &'a str,
    /// The policy's limits.
    limits: Limits,
    /// Now.
    now: Instant,
}

/// Held when a breaker the plan falls under is open; a pause that ended closes its breaker. A
/// pause longer than the policy's (read back from persisted state) is cut to it from now.
fn open_breaker(s: &mut State, at: Attempt<'_>) -> Result<(), Held> {
    let pause = Duration::from_secs(u64::from(at.limits.breaker.pause_seconds));
    for reach in Reach::all(at.namespace, at.node) {
        let Some(b) = s.breakers.get_mut(&reach) else {
            continue;
        };
        if let Some(until) = b.paused_until {
            if at.now < until {
                let left = (until - at.now).min(pause);
                b.paused_until = Some(at.now + left);
                if !left.is_zero() {
                    return Err(Held::Paused {
                        reach,
                        left,
                        opened_now: false,
                        futile: 0,
                    });
                }
            }
            b.paused_until = None;
            b.futile.clear();
        }
        if b.is_idle() {
            s.breakers.remove(&reach);
        }
    }
    Ok(())
}

/// Counts a futile plan in the policy's scope, opening that breaker at `futilePlans`.
fn count_futile(s: &mut State, at: Attempt<'_>) -> Result<(), Held> {
    let window = Duration::from_secs(u64::from(at.limits.breaker.window_seconds));
    let reach = Reach::of(at.limits.breaker.scope, at.namespace, at.node);
    let b = s.breakers.entry(reach.clone()).or_default();
    while b
        .futile
        .front()
        .is_some_and(|t| at.now.saturating_duration_since(*t) >= window)
    {
        b.futile.pop_front();
    }
    b.futile.push_back(at.now);
    let count = u32::try_from(b.futile.len()).unwrap_or(u32::MAX);
    if count >= at.limits.breaker.futile_plans {
        let pause = Duration::from_secs(u64::from(at.limits.breaker.pause_seconds));
        b.paused_until = Some(at.now + pause);
        return Err(Held::Paused {
            reach,
            left: pause,
            opened_now: true,
            futile: count,
        });
    }
    Ok(())
}

/// Takes a token per victim from the cluster's bucket and the namespace's, or from neither. The
/// cluster's is asked first: when it is short every namespace waits, whatever its own budget.
fn take_tokens(s: &mut State, at: Attempt<'_>, victims: u32) -> Result<(), Held> {
    let (ns_shape, cluster_shape) = (at.limits.namespace(), at.limits.cluster());
    // Full buckets say nothing a fresh one would not: forgotten, so the map stays small.
    s.namespaces
        .retain(|n, b| n == at.namespace || !b.is_full(ns_shape, at.now));
    s.cluster.refill(cluster_shape, at.now);
    if let Some(wait) = s.cluster.short_by(victims, cluster_shape) {
        return Err(Held::Rate { wait });
    }
    let fresh = s.new_bucket();
    let ns = s.namespaces.entry(at.namespace.to_owned()).or_insert(fresh);
    ns.refill(ns_shape, at.now);
    if let Some(wait) = ns.short_by(victims, ns_shape) {
        return Err(Held::NamespaceRate {
            namespace: at.namespace.to_owned(),
            wait,
        });
    }
    let need = f64::from(victims);
    s.cluster.tokens -= need;
    if let Some(ns) = s.namespaces.get_mut(at.namespace) {
        ns.tokens -= need;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
