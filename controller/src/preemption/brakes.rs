//! The brakes between a preemption plan and its victims (ARCHITECTURE.md §5): whatever the
//! decision, the controller removes victims no faster, in no more places at once, and no more
//! often for one resize than the policy allows, and stops altogether when its plans keep
//! failing to help.
//!
//! - **One plan in flight per node.** A plan claims its node until its resize is admitted or
//!   the plan ends (cleared, dropped, re-planned, failed), or [`CLAIM_TTL`] passes without news
//!   of it; another resize on that node waits.
//! - **A cluster-wide eviction rate** (`preemption.maxEvictionsPerMinute`): a token bucket that
//!   holds one whole plan (`maxVictimsPerResize` tokens) and refills at the rate. A plan starts
//!   only when the bucket holds a token for each of its victims, so two plans admitted together
//!   can never exceed it; tokens of victims that were not removed go back.
//! - **Victims per resize across plans**: `maxVictimsPerResize` caps the victims one resize
//!   costs over its plans that helped nobody (counted per pod UID and `metadata.generation`).
//! - **A circuit breaker** (`preemption.circuitBreaker`): a plan is futile when the victims of
//!   the previous plan for the same resize were removed, the resize still needs another, and no
//!   other resize on the node was admitted meanwhile (its count of pending resizes did not
//!   drop): the room went nowhere resize-guard meant it to (the kubelet counts differently, or
//!   new pods took it). Room that went to other pending resizes of the node is progress, not
//!   futility: equal-priority resizes take freed room in the kubelet's order, not the plan's.
//!   `futilePlans` futile plans within `windowSeconds` stop every preemption for
//!   `pauseSeconds`.
//!
//! The counts live in this process. A new leader starts them afresh: after a failover a resize
//! may cost up to `maxVictimsPerResize` again, and the rate's bucket starts full.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::pod::PodKey;
use resize_guard_policy::policy::{CircuitBreaker, Policy};

/// How long a node stays claimed by a plan nobody hears of (its preemptor deleted, say).
pub const CLAIM_TTL: Duration = Duration::from_secs(300);
/// How long a resize's count is kept after it was last touched.
const SPENT_TTL: Duration = Duration::from_secs(3600);

/// The brakes' settings, read from the policy in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `preemption.maxVictimsPerResize`: per plan and per resize; also the bucket's size.
    pub per_resize: u32,
    /// `preemption.maxEvictionsPerMinute`.
    pub per_minute: u32,
    /// `preemption.circuitBreaker`.
    pub breaker: CircuitBreaker,
}

impl Limits {
    /// The limits `policy` sets.
    pub fn of(policy: &Policy) -> Limits {
        Limits {
            per_resize: policy.preemption.max_victims_per_resize.max(1),
            per_minute: policy.preemption.max_evictions_per_minute.max(1),
            breaker: policy.preemption.circuit_breaker,
        }
    }
}

/// Why a plan may not start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The circuit breaker is open (and opened on this plan when `opened_now`).
    Paused {
        /// Until the breaker closes.
        left: Duration,
        /// This plan was the one too many.
        opened_now: bool,
        /// Futile plans counted when it opened.
        futile: u32,
    },
    /// Another resize's plan is in flight on the node.
    NodeBusy {
        /// Its preemptor (namespace/name).
        holder: String,
    },
    /// The resize already cost victims; this plan would take it past the cap.
    Spent {
        /// Victims it already cost.
        spent: u32,
        /// This plan's victims.
        more: u32,
    },
    /// The eviction rate allows this plan's victims only after `wait`.
    Rate {
        /// Until enough tokens are back.
        wait: Duration,
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
        }
    }
}

/// A node's claim.
#[derive(Debug, Clone)]
struct Claim {
    uid: String,
    holder: String,
    since: Instant,
}

/// What one resize has cost so far.
#[derive(Debug, Clone)]
struct Spent {
    generation: i64,
    victims: u32,
    /// Victims of the current plan were removed (a further plan is futile unless the node made
    /// progress).
    removed_this_plan: bool,
    /// Pending resizes on the node when the current plan was made.
    pending_at_plan: usize,
    touched: Instant,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    refilled: Option<Instant>,
    nodes: HashMap<String, Claim>,
    resizes: HashMap<String, Spent>,
    futile: VecDeque<Instant>,
    paused_until: Option<Instant>,
}

/// The brakes of one controller process (shared by every reconcile).
#[derive(Debug)]
pub struct Brakes {
    state: Mutex<State>,
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
    reserved: u32,
    removed: u32,
}

impl Admission<'_> {
    /// One victim was removed.
    pub fn removed(&mut self) {
        self.removed = self.removed.saturating_add(1).min(self.reserved);
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let mut s = self.brakes.lock();
        s.tokens += f64::from(self.reserved - self.removed);
        if self.removed > 0
            && let Some(spent) = s.resizes.get_mut(&self.uid)
        {
            spent.victims = spent.victims.saturating_add(self.removed);
            spent.removed_this_plan = true;
        }
    }
}

impl Brakes {
    /// Brakes with a full bucket, no claims, no counts.
    pub fn new() -> Brakes {
        Brakes {
            state: Mutex::new(State {
                tokens: 0.0,
                refilled: None,
                nodes: HashMap::new(),
                resizes: HashMap::new(),
                futile: VecDeque::new(),
                paused_until: None,
            }),
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
        let uid = key.uid.clone();
        let generation = preemptor.metadata.generation.unwrap_or_default();
        if let Some(until) = s.paused_until {
            if now < until {
                return Err(Held::Paused {
                    left: until - now,
                    opened_now: false,
                    futile: 0,
                });
            }
            s.paused_until = None;
            s.futile.clear();
        }
        if let Some(claim) = s.nodes.get(node)
            && claim.uid != uid
            && now.duration_since(claim.since) < CLAIM_TTL
        {
            return Err(Held::NodeBusy {
                holder: claim.holder.clone(),
            });
        }
        s.resizes
            .retain(|_, r| now.duration_since(r.touched) < SPENT_TTL);
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
            let window = Duration::from_secs(u64::from(limits.breaker.window_seconds));
            while s
                .futile
                .front()
                .is_some_and(|t| now.duration_since(*t) >= window)
            {
                s.futile.pop_front();
            }
            s.futile.push_back(now);
            let count = u32::try_from(s.futile.len()).unwrap_or(u32::MAX);
            if count >= limits.breaker.futile_plans {
                let pause = Duration::from_secs(u64::from(limits.breaker.pause_seconds));
                s.paused_until = Some(now + pause);
                return Err(Held::Paused {
                    left: pause,
                    opened_now: true,
                    futile: count,
                });
            }
        }
        // The bucket holds one whole plan and refills at the rate.
        let size = f64::from(limits.per_resize);
        let rate = f64::from(limits.per_minute) / 60.0;
        let elapsed = s
            .refilled
            .map_or(f64::INFINITY, |t| now.duration_since(t).as_secs_f64());
        s.tokens = (s.tokens + elapsed * rate).min(size);
        s.refilled = Some(now);
        let need = f64::from(victims);
        if s.tokens < need {
            return Err(Held::Rate {
                wait: Duration::from_secs_f64((need - s.tokens) / rate),
            });
        }
        s.tokens -= need;
        s.nodes.insert(
            node.to_owned(),
            Claim {
                uid: uid.clone(),
                holder: key.to_string(),
                since: now,
            },
        );
        let entry = s.resizes.entry(uid.clone()).or_insert(Spent {
            generation,
            victims: 0,
            removed_this_plan: false,
            pending_at_plan: pending_on_node,
            touched: now,
        });
        if entry.generation != generation {
            entry.generation = generation;
            entry.victims = 0;
        }
        entry.victims = entry.victims.min(already);
        if fresh {
            entry.removed_this_plan = false;
            entry.pending_at_plan = pending_on_node;
        }
        entry.touched = now;
        Ok(Admission {
            brakes: self,
            uid,
            reserved: victims,
            removed: 0,
        })
    }

    /// The preemptor's plan ended (cleared, dropped, re-planned, failed): its node is free.
    /// With `resolved` (the resize was admitted or is gone) its count is forgotten too.
    pub fn release(&self, preemptor: &Pod, node: Option<&str>, resolved: bool) {
        let uid = PodKey::of(preemptor).uid;
        let mut s = self.lock();
        if let Some(node) = node
            && s.nodes.get(node).is_some_and(|c| c.uid == uid)
        {
            s.nodes.remove(node);
        }
        if resolved {
            s.resizes.remove(&uid);
        }
    }

    /// The preemptor's plan is still in flight (its victims terminating): its claim stays fresh.
    pub fn touch(&self, preemptor: &Pod, node: Option<&str>, now: Instant) {
        let uid = PodKey::of(preemptor).uid;
        let mut s = self.lock();
        if let Some(claim) = node.and_then(|n| s.nodes.get_mut(n))
            && claim.uid == uid
        {
            claim.since = now;
        }
    }

    /// True while the circuit breaker is open.
    pub fn paused(&self, now: Instant) -> bool {
        self.lock().paused_until.is_some_and(|until| now < until)
    }
}

#[cfg(test)]
mod tests;
