//! The brakes' counts as the leader persists them (ConfigMap `resize-guard-brakes`, key
//! `brakes.json`, written by [`super::ledger`]): the cluster's and each namespace's bucket, each
//! resize's spend (by pod UID and generation) and each breaker's futile plans and pause, with
//! wall-clock times in Unix milliseconds (a monotonic `Instant` means nothing to another
//! process).
//!
//! **Read back as untrusted input.** Another replica wrote it, and whoever may edit the install
//! namespace could too. Everything read is clamped: tokens to `[0, MAX_TOKENS]`, times in the
//! past to now (no refill is credited for a time that has not come), a pause to the policy's
//! `pauseSeconds` from the first plan that meets it ([`super::Brakes::admit`]), lists and maps to
//! bounded sizes, names to plausible object names. What cannot be read is never read as "no
//! brakes": a document that does not parse leaves every bucket empty from now (a namespace's
//! bucket, too, when first used), an unreadable bucket is empty, an unreadable breaker of a
//! known scope is open (cut to `pauseSeconds` when first met); only an unreadable resize's spend
//! is lost, which the buckets still bound. A document declaring a reserve (or one that cannot be
//! read) leaves every bucket empty from now: the writer may have spent a whole plan's worth
//! anywhere after writing it ([`super`]'s doc). [`Restored`] says which happened, for a log line
//! and `resize_guard_brakes_state_loads_total{result}`.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::breaker::{Breaker, Reach, valid_name};
use super::bucket::Bucket;
use super::{Brakes, Spent, State};

/// The format's version: a document of another is unreadable.
pub const FORMAT: u32 = 1;
/// Most resizes, namespaces and breakers kept in the document (the most recently touched).
pub const MAX_ENTRIES: usize = 2000;
/// Most futile plans kept per breaker.
const MAX_FUTILE: usize = 1000;
/// Most tokens a persisted bucket may claim (each bucket is then cut to its size).
const MAX_TOKENS: f64 = 1_000_000.0;
/// How far ahead a persisted pause may reach before it is cut to the policy's.
const MAX_PAUSE_AHEAD: Duration = Duration::from_secs(86_400);

/// One bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BucketDoc {
    /// Tokens at `refilledMs`.
    pub tokens: f64,
    /// When they were counted.
    pub refilled_ms: i64,
}

/// One resize's spend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpentDoc {
    /// The pod's `metadata.generation` the spend is for.
    pub generation: i64,
    /// Victims it cost (those of a plan still in flight included).
    pub victims: u32,
    /// Victims of its current plan were removed.
    pub removed_this_plan: bool,
    /// The node's pending resizes when that plan was made.
    pub pending_at_plan: u64,
    /// Last touched.
    pub touched_ms: i64,
}

/// One breaker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BreakerDoc {
    /// When each futile plan in the window was counted.
    pub futile_ms: Vec<i64>,
    /// Open until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until_ms: Option<i64>,
}

/// The whole document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    /// [`FORMAT`].
    pub format: u32,
    /// When it was written.
    pub written_ms: i64,
    /// The cluster's bucket (`None`: full).
    pub cluster: Option<BucketDoc>,
    /// Namespace buckets that are not full.
    pub namespaces: BTreeMap<String, BucketDoc>,
    /// Spend by pod UID.
    pub resizes: BTreeMap<String, SpentDoc>,
    /// Breakers by key (`namespace/<name>`, `node/<name>`, `cluster`).
    pub breakers: BTreeMap<String, BreakerDoc>,
    /// Victims the writer may let through before its next document is saved (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reserve: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A document to write, and what saving it settles.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The state's version it holds.
    pub version: u64,
    /// Plans are covered until this many victims were let through (those it counts and its
    /// reserve).
    pub covers: u64,
    /// The document.
    pub doc: Document,
}

/// What reading a document gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// Every entry was read.
    Whole,
    /// Some entries were not: each is named (and what was assumed instead).
    Partial(Vec<String>),
    /// The document was not read at all: every bucket starts empty.
    Unreadable(String),
}

impl Restored {
    /// Stable `result` label of `resize_guard_brakes_state_loads_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Restored::Whole => "restored",
            Restored::Partial(_) => "partial",
            Restored::Unreadable(_) => "unreadable",
        }
    }
}

/// A clock reading in both clocks, to convert one into the other.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// The monotonic clock.
    pub instant: Instant,
    /// The wall clock, in Unix milliseconds.
    pub wall_ms: i64,
}

impl Now {
    /// Both clocks now.
    pub fn read() -> Now {
        Now {
            instant: Instant::now(),
            wall_ms: wall_ms(SystemTime::now()),
        }
    }

    fn to_wall(self, t: Instant) -> i64 {
        if t <= self.instant {
            self.wall_ms.saturating_sub(millis(self.instant - t))
        } else {
            self.wall_ms.saturating_add(millis(t - self.instant))
        }
    }

    /// `ms` as an instant no later than now; `None` when it is older than this process can say.
    fn past(self, ms: i64) -> Option<Instant> {
        let ago = u64::try_from(self.wall_ms.saturating_sub(ms)).unwrap_or(0);
        self.instant.checked_sub(Duration::from_millis(ago))
    }

    /// `ms` as an instant, at most [`MAX_PAUSE_AHEAD`] from now; `None` when it has passed.
    fn ahead(self, ms: i64) -> Option<Instant> {
        let ahead = u64::try_from(ms.saturating_sub(self.wall_ms)).ok()?;
        (ahead > 0).then(|| self.instant + Duration::from_millis(ahead).min(MAX_PAUSE_AHEAD))
    }
}

fn wall_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Brakes {
    /// The counts as a document written at `now`.
    pub fn snapshot(&self, now: Now) -> Snapshot {
        let s = self.lock();
        let bucket = |b: &Bucket| BucketDoc {
            tokens: if b.tokens.is_finite() {
                b.tokens.max(0.0)
            } else {
                0.0
            },
            refilled_ms: now.to_wall(b.refilled.unwrap_or(now.instant)),
        };
        let cluster = s.cluster.refilled.map(|_| bucket(&s.cluster));
        let mut namespaces: Vec<_> = s.namespaces.iter().collect();
        namespaces.sort_by_key(|(_, b)| std::cmp::Reverse(b.refilled));
        let mut resizes: Vec<_> = s.resizes.iter().collect();
        resizes.sort_by_key(|(_, r)| std::cmp::Reverse(r.touched));
        let doc = Document {
            format: FORMAT,
            written_ms: now.wall_ms,
            cluster,
            namespaces: namespaces
                .into_iter()
                .take(MAX_ENTRIES)
                .map(|(n, b)| (n.clone(), bucket(b)))
                .collect(),
            resizes: resizes
                .into_iter()
                .take(MAX_ENTRIES)
                .map(|(uid, r)| {
                    let doc = SpentDoc {
                        generation: r.generation,
                        victims: r.victims.saturating_add(r.in_flight),
                        removed_this_plan: r.removed_this_plan || r.in_flight > 0,
                        pending_at_plan: u64::try_from(r.pending_at_plan).unwrap_or(u64::MAX),
                        touched_ms: now.to_wall(r.touched),
                    };
                    (uid.clone(), doc)
                })
                .collect(),
            breakers: s
                .breakers
                .iter()
                .take(MAX_ENTRIES)
                .map(|(reach, b)| {
                    let doc = BreakerDoc {
                        futile_ms: b.futile.iter().map(|t| now.to_wall(*t)).collect(),
                        paused_until_ms: b.paused_until.map(|t| now.to_wall(t)),
                    };
                    (reach.key(), doc)
                })
                .collect(),
            reserve: s.reserve,
        };
        Snapshot {
            version: s.version,
            covers: s.admitted.saturating_add(u64::from(s.reserve)),
            doc,
        }
    }

    /// Replaces the counts (node claims stay) with those `text` holds, read at `now`.
    pub fn restore(&self, text: &str, now: Now) -> Restored {
        let (state, restored) = read(text, now);
        let mut s = self.lock();
        let State {
            cluster,
            namespaces,
            fresh_from,
            resizes,
            breakers,
            ..
        } = state;
        s.cluster = cluster;
        s.namespaces = namespaces;
        s.fresh_from = fresh_from;
        s.resizes = resizes;
        s.breakers = breakers;
        restored
    }

    /// Starts every bucket empty from now, keeping the rest: what a replica does when it could
    /// not read the persisted state at all.
    pub fn empty_buckets(&self, now: Instant) {
        let mut s = self.lock();
        s.cluster = Bucket::empty_at(now);
        s.namespaces.clear();
        s.fresh_from = Some(now);
    }
}

/// The state `text` holds, clamped, and how much of it was read.
fn read(text: &str, now: Now) -> (State, Restored) {
    let mut state = State::full();
    let doc = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(doc)) => doc,
        Ok(_) => return unreadable(state, now, "not a JSON object".to_owned()),
        Err(e) => return unreadable(state, now, format!("not JSON: {e}")),
    };
    if doc.get("format").and_then(Value::as_u64) != Some(u64::from(FORMAT)) {
        return unreadable(state, now, format!("not format {FORMAT}"));
    }
    let mut lost = Vec::new();
    match doc.get("cluster") {
        None | Some(Value::Null) => {}
        Some(v) => match bucket(v, now) {
            Some(b) => state.cluster = b,
            None => {
                lost.push("the cluster's bucket (read as empty)".to_owned());
                state.cluster = Bucket::empty_at(now.instant);
            }
        },
    }
    for (name, v) in entries(&doc, "namespaces", &mut lost) {
        if !valid_name(name) {
            lost.push("a namespace bucket with an implausible name (dropped)".to_owned());
            continue;
        }
        let b = bucket(v, now).unwrap_or_else(|| {
            lost.push(format!("namespace {name}'s bucket (read as empty)"));
            Bucket::empty_at(now.instant)
        });
        state.namespaces.insert(name.clone(), b);
    }
    for (uid, v) in entries(&doc, "resizes", &mut lost) {
        match spent(v, now).filter(|_| uid.len() <= 128 && !uid.is_empty()) {
            Some(r) => {
                state.resizes.insert(uid.clone(), r);
            }
            None => lost.push(format!("the spend of resize {:.64} (dropped)", uid)),
        }
    }
    for (key, v) in entries(&doc, "breakers", &mut lost) {
        let Some(reach) = Reach::parse(key) else {
            lost.push("a breaker of an unknown scope (dropped)".to_owned());
            continue;
        };
        let b = breaker(v, now).unwrap_or_else(|| {
            lost.push(format!("the breaker of {reach} (read as open)"));
            Breaker {
                futile: VecDeque::new(),
                paused_until: Some(now.instant + MAX_PAUSE_AHEAD),
            }
        });
        if !b.is_idle() {
            state.breakers.insert(reach, b);
        }
    }
    let reserved = match doc.get("reserve") {
        None | Some(Value::Null) => false,
        Some(v) if v.as_u64() == Some(0) => false,
        Some(v) => {
            if v.as_u64().is_none() {
                lost.push("the reserve (read as a whole plan's)".to_owned());
            }
            true
        }
    };
    if reserved {
        // Its writer may have spent up to a whole plan's worth in any bucket after writing it:
        // charged now, which leaves none.
        state.cluster = Bucket::empty_at(now.instant);
        state.namespaces.clear();
        state.fresh_from = Some(now.instant);
    }
    let restored = if lost.is_empty() {
        Restored::Whole
    } else {
        Restored::Partial(lost)
    };
    (state, restored)
}

fn unreadable(mut state: State, now: Now, why: String) -> (State, Restored) {
    state.cluster = Bucket::empty_at(now.instant);
    state.fresh_from = Some(now.instant);
    (state, Restored::Unreadable(why))
}

/// The entries of map `field`, at most [`MAX_ENTRIES`]; a field that is not a map is lost.
fn entries<'a>(
    doc: &'a serde_json::Map<String, Value>,
    field: &str,
    lost: &mut Vec<String>,
) -> Vec<(&'a String, &'a Value)> {
    let map = match doc.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => {
            lost.push(format!("{field} (not a map)"));
            None
        }
    };
    if map.is_some_and(|m| m.len() > MAX_ENTRIES) {
        lost.push(format!("{field} beyond the first {MAX_ENTRIES}"));
    }
    map.into_iter().flatten().take(MAX_ENTRIES).collect()
}

fn bucket(v: &Value, now: Now) -> Option<Bucket> {
    let d = BucketDoc::deserialize(v).ok()?;
    if !d.tokens.is_finite() {
        return None;
    }
    Some(Bucket {
        tokens: d.tokens.clamp(0.0, MAX_TOKENS),
        // A time to come is now (no refill credited for it); one older than this process can
        // place is long enough ago for the bucket to have refilled.
        refilled: now.past(d.refilled_ms),
    })
}

fn spent(v: &Value, now: Now) -> Option<Spent> {
    let d = SpentDoc::deserialize(v).ok()?;
    Some(Spent {
        generation: d.generation,
        victims: d.victims,
        in_flight: 0,
        removed_this_plan: d.removed_this_plan,
        pending_at_plan: usize::try_from(d.pending_at_plan).unwrap_or(usize::MAX),
        // Too old to place: older than any spend is kept.
        touched: now.past(d.touched_ms)?,
    })
}

fn breaker(v: &Value, now: Now) -> Option<Breaker> {
    let d = BreakerDoc::deserialize(v).ok()?;
    let mut futile: Vec<Instant> = d
        .futile_ms
        .iter()
        .rev()
        .take(MAX_FUTILE)
        .filter_map(|ms| now.past(*ms))
        .collect();
    futile.sort();
    Some(Breaker {
        futile: futile.into(),
        paused_until: d.paused_until_ms.and_then(|ms| now.ahead(ms)),
    })
}
