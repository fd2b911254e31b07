//! The health of the view's watches: whether each has listed once, whether it is failing now and
//! why, so a missing RBAC rule or a network fault reads as a reason on `/readyz`, a WARN line and
//! a metric instead of a view that is silently never ready.
//!
//! Data flow: every item a watch yields passes through [`WatchHealth::observe`] after the view
//! has applied it. A change (`Apply`, `Delete`) or the end of a list (`InitDone`, which also marks
//! the resource listed) ends the current failure streak; the start and the items of a (re)list
//! do not, because the caches swap a relist in whole at its `InitDone` (kube's reflector store and
//! [`crate::index::PodIndex`] alike) and until then still hold the snapshot from before it
//! ([`WatchState::stale`]). An error starts or extends the streak, is counted through the
//! [`WatchErrorHook`], and is logged at WARN — at most one line per resource every
//! [`LOG_EVERY`], saying how many were not logged. [`WatchHealth::readiness`] names each resource
//! not listed yet, and each whose streak has lasted longer than the configured threshold — except
//! the resources a program only uses for advice ([`WatchHealth::advisory`]: the webhook's PDBs,
//! which only shape warnings), whose problems [`WatchHealth::degraded`] reports instead, so a
//! failing PDB watch degrades warnings rather than taking every webhook replica out of service.
//!
//! A watch that recovers by re-establishing itself yields no event (kube-runtime restarts the
//! watch silently), so a streak also ends once no error has come for [`STREAK_QUIET`]. The watches
//! retry on [`WatchBackoff`], whose longest wait plus a request's connect timeout stays below
//! that window: while a fault lasts, errors keep arriving and the streak keeps growing. A streak
//! of a single error never makes the view unready.
//!
//! The state machine ([`WatchState`]) is pure: it takes the time as an argument.

mod backoff;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::watcher;

pub use backoff::WatchBackoff;

/// At most one WARN line per resource in this period.
pub const LOG_EVERY: Duration = Duration::from_secs(30);
/// A failure streak ends when no error came for this long (the watch recovered silently).
pub const STREAK_QUIET: Duration = Duration::from_secs(45);
/// Default of [`crate::ViewConfig::unhealthy_after`].
pub const DEFAULT_UNHEALTHY_AFTER: Duration = Duration::from_secs(60);

/// A resource the view watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Watched {
    /// All pods.
    Pods,
    /// All nodes.
    Nodes,
    /// All PodDisruptionBudgets.
    PodDisruptionBudgets,
    /// The policy ConfigMap.
    ConfigMap,
    /// The controller's persisted copy of the last good policy (`<policy>-last-good`).
    LastGoodPolicy,
}

impl Watched {
    /// Every watched resource, in the order readiness reports them.
    pub const ALL: [Watched; 5] = [
        Watched::Pods,
        Watched::Nodes,
        Watched::PodDisruptionBudgets,
        Watched::ConfigMap,
        Watched::LastGoodPolicy,
    ];

    /// The name used in logs, readiness reasons and the `resource` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Watched::Pods => "pods",
            Watched::Nodes => "nodes",
            Watched::PodDisruptionBudgets => "poddisruptionbudgets",
            Watched::ConfigMap => "configmap",
            Watched::LastGoodPolicy => "configmap-last-good",
        }
    }

    fn index(self) -> usize {
        match self {
            Watched::Pods => 0,
            Watched::Nodes => 1,
            Watched::PodDisruptionBudgets => 2,
            Watched::ConfigMap => 3,
            Watched::LastGoodPolicy => 4,
        }
    }
}

impl std::fmt::Display for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Called on every watch error with the resource (each binary counts
/// `resize_guard_watch_errors_total{resource}`).
pub type WatchErrorHook = Arc<dyn Fn(Watched) + Send + Sync>;

/// One resource's watch, as far as health goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchState {
    /// The first full list is done.
    pub synced: bool,
    /// First error of the current failure streak.
    pub failing_since: Option<Instant>,
    /// The latest error and when it came (kept after the streak ends).
    pub last_error: Option<(Instant, String)>,
    /// Errors since the start.
    pub errors: u64,
    /// Errors in the current streak.
    pub streak_errors: u64,
    /// A (re)list has started (`Init`) and not completed (`InitDone`): the cache still holds
    /// the snapshot from before it.
    pub relisting: bool,
    last_logged: Option<Instant>,
    suppressed: u64,
}

/// What a successful watch item says about the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A (re)list starts (`Init`): nothing has been delivered yet.
    ListStarted,
    /// An item of the (re)list (`InitApply`), buffered until its end.
    Listing,
    /// The (re)list is complete and swapped in (`InitDone`).
    Listed,
    /// A change on a running watch (`Apply`, `Delete`): the cache is current.
    Changed,
}

impl Progress {
    /// The progress `ev` makes.
    pub fn of<K>(ev: &watcher::Event<K>) -> Progress {
        match ev {
            watcher::Event::Init => Progress::ListStarted,
            watcher::Event::InitApply(_) => Progress::Listing,
            watcher::Event::InitDone => Progress::Listed,
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => Progress::Changed,
        }
    }
}

/// An error to log now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorLine {
    /// Errors since the last line that were not logged.
    pub suppressed: u64,
    /// How long the streak has lasted.
    pub failing_for: Duration,
}

/// A streak that just ended with a successful event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// How long it lasted.
    pub failed_for: Duration,
    /// Errors in it.
    pub errors: u64,
}

impl WatchState {
    /// A successful item. Returns the failure streak it ends, if any: a change or the end of a
    /// (re)list ends one; the start and the items of a (re)list do not (the cache has not taken
    /// them in yet).
    pub fn on_event(&mut self, now: Instant, progress: Progress) -> Option<Recovery> {
        match progress {
            Progress::ListStarted => {
                self.relisting = true;
                return None;
            }
            Progress::Listing => return None,
            Progress::Listed => {
                self.synced = true;
                self.relisting = false;
            }
            Progress::Changed => {}
        }
        let active = self.streak_active(now);
        let since = self.failing_since.take()?;
        let errors = std::mem::take(&mut self.streak_errors);
        self.suppressed = 0;
        // A streak that went quiet ended (silently) at its last error.
        let end = match &self.last_error {
            Some((at, _)) if !active => *at,
            _ => now,
        };
        Some(Recovery {
            failed_for: end.saturating_duration_since(since),
            errors,
        })
    }

    /// An error. Returns what to log, unless a line for this resource went out less than
    /// [`LOG_EVERY`] ago.
    pub fn on_error(&mut self, now: Instant, cause: String) -> Option<ErrorLine> {
        if !self.streak_active(now) {
            self.failing_since = None;
            self.streak_errors = 0;
        }
        let since = *self.failing_since.get_or_insert(now);
        self.errors += 1;
        self.streak_errors += 1;
        self.last_error = Some((now, cause));
        let due = self
            .last_logged
            .is_none_or(|t| now.saturating_duration_since(t) >= LOG_EVERY);
        if !due {
            self.suppressed += 1;
            return None;
        }
        self.last_logged = Some(now);
        Some(ErrorLine {
            suppressed: std::mem::take(&mut self.suppressed),
            failing_for: now.saturating_duration_since(since),
        })
    }

    /// True while errors keep coming: a streak started and the latest error is recent.
    pub fn streak_active(&self, now: Instant) -> bool {
        self.failing_since.is_some()
            && self
                .last_error
                .as_ref()
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) <= STREAK_QUIET)
    }

    /// Why this resource makes the view unready, if it does.
    pub fn problem(&self, now: Instant, unhealthy_after: Duration) -> Option<String> {
        let ago = |at: Instant| now.saturating_duration_since(at).as_secs();
        if !self.synced {
            return Some(match &self.last_error {
                Some((at, cause)) => {
                    format!("not listed yet (last error {}s ago: {cause})", ago(*at))
                }
                None => "not listed yet".to_owned(),
            });
        }
        let since = self.failing_since?;
        let failing_for = now.saturating_duration_since(since);
        if !self.streak_active(now) || self.streak_errors < 2 || failing_for < unhealthy_after {
            return None;
        }
        let cause = self.last_error.as_ref().map_or("", |(_, c)| c.as_str());
        Some(format!(
            "watch failing for {}s ({} errors): {cause}",
            failing_for.as_secs(),
            self.streak_errors
        ))
    }
}

/// How long after a watch's last error its cache counts as current again even without an event
/// (kube-runtime resumes a watch silently; [`WatchBackoff`] waits at most 12.5 s, so a watch that
/// is still failing errors again within this window).
pub const CURRENT_AFTER_QUIET: Duration = Duration::from_secs(15);

impl WatchState {
    /// Why this cache may be stale right now, if it may: not listed yet, a relist under way (its
    /// items are swapped in only at its end), or an error with no change or completed list since
    /// and less than [`CURRENT_AFTER_QUIET`] ago.
    pub fn stale(&self, now: Instant) -> Option<&'static str> {
        let recent_error = self
            .last_error
            .as_ref()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) < CURRENT_AFTER_QUIET);
        if !self.synced {
            Some("a cache has not listed yet")
        } else if self.relisting {
            Some("a watch is relisting and its cache still holds the snapshot from before")
        } else if self.failing_since.is_some() && recent_error {
            Some("a watch failed and has not delivered since")
        } else {
            None
        }
    }
}

/// Every watch's health, shared by the view's watch tasks.
#[derive(Debug)]
pub struct WatchHealth {
    states: Mutex<[WatchState; 5]>,
    unhealthy_after: Duration,
    on_error: ErrorHook,
    advisory: Vec<Watched>,
}

/// The [`WatchErrorHook`] a [`WatchHealth`] calls, shown by name in its `Debug`.
struct ErrorHook(WatchErrorHook);

impl std::fmt::Debug for ErrorHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchErrorHook")
    }
}

impl WatchHealth {
    /// Nothing listed yet; a resource failing for longer than `unhealthy_after` is unhealthy.
    pub fn new(unhealthy_after: Duration, on_error: WatchErrorHook) -> WatchHealth {
        WatchHealth {
            states: Mutex::new(Default::default()),
            unhealthy_after,
            on_error: ErrorHook(on_error),
            advisory: Vec::new(),
        }
    }

    /// `resources` only give advice to this program: their problems degrade it
    /// ([`WatchHealth::degraded`]) instead of making it unready.
    pub fn advisory(mut self, resources: &[Watched]) -> WatchHealth {
        self.advisory = resources.to_vec();
        self
    }

    /// Records one item of a watch stream, after the view applied it: logs and counts errors.
    pub fn observe<K>(&self, resource: Watched, item: &Result<watcher::Event<K>, watcher::Error>) {
        self.observe_at(resource, item, Instant::now());
    }

    /// [`WatchHealth::observe`] at a given time.
    pub fn observe_at<K>(
        &self,
        resource: Watched,
        item: &Result<watcher::Event<K>, watcher::Error>,
        now: Instant,
    ) {
        match item {
            Ok(ev) => {
                let progress = Progress::of(ev);
                if let Some(r) = self.with(resource, |s| s.on_event(now, progress)).flatten() {
                    tracing::info!(
                        resource = resource.as_str(),
                        errors = r.errors,
                        failed_secs = r.failed_for.as_secs(),
                        "watch recovered"
                    );
                }
            }
            Err(e) => {
                (self.on_error.0)(resource);
                let cause = describe(e);
                let line = self
                    .with(resource, |s| s.on_error(now, cause.clone()))
                    .flatten();
                match line {
                    Some(l) if l.suppressed == 0 => {
                        tracing::warn!(resource = resource.as_str(), error = %cause,
                            failing_secs = l.failing_for.as_secs(), "watch error; retrying");
                    }
                    Some(l) => {
                        tracing::warn!(resource = resource.as_str(), error = %cause,
                            suppressed = l.suppressed, failing_secs = l.failing_for.as_secs(),
                            "watch error ({} more since the last line not logged); retrying",
                            l.suppressed);
                    }
                    None => {}
                }
            }
        }
    }

    /// `Ok` when every resource that is not [advisory](WatchHealth::advisory) has listed and none
    /// has failed for longer than the threshold; else each problem, `resource: why`, joined with
    /// `; `.
    pub fn readiness(&self) -> Result<(), String> {
        self.readiness_at(Instant::now())
    }

    /// [`WatchHealth::readiness`] at a given time.
    pub fn readiness_at(&self, now: Instant) -> Result<(), String> {
        let problems = self.problems_at(now, false)?;
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The problems of the [advisory](WatchHealth::advisory) resources, `resource: why` joined
    /// with `; `, if any: the program serves without their advice.
    pub fn degraded(&self) -> Option<String> {
        self.degraded_at(Instant::now())
    }

    /// [`WatchHealth::degraded`] at a given time.
    pub fn degraded_at(&self, now: Instant) -> Option<String> {
        self.problems_at(now, true).ok().filter(|p| !p.is_empty())
    }

    /// The problems of the advisory resources (`advisory`) or of the others, joined.
    fn problems_at(&self, now: Instant, advisory: bool) -> Result<String, String> {
        let Ok(states) = self.states.lock() else {
            return Err("watch health unavailable (a watch task panicked)".to_owned());
        };
        let problems: Vec<String> = Watched::ALL
            .iter()
            .filter(|w| self.advisory.contains(w) == advisory)
            .filter_map(|w| {
                let p = states[w.index()].problem(now, self.unhealthy_after)?;
                Some(format!("{w}: {p}"))
            })
            .collect();
        Ok(problems.join("; "))
    }

    /// The state of one resource's watch.
    pub fn state(&self, resource: Watched) -> Option<WatchState> {
        self.with(resource, |s| s.clone())
    }

    fn with<T>(&self, resource: Watched, f: impl FnOnce(&mut WatchState) -> T) -> Option<T> {
        let mut states = self.states.lock().ok()?;
        Some(f(&mut states[resource.index()]))
    }
}

/// A watch error in a few words: the failed step and the API server's status (`403 Forbidden:
/// pods is forbidden: …`), or the transport error with its causes.
pub fn describe(e: &watcher::Error) -> String {
    let (step, client) = match e {
        watcher::Error::InitialListFailed(c) => ("list failed", c),
        watcher::Error::WatchStartFailed(c) => ("could not start watching", c),
        watcher::Error::WatchFailed(c) => ("watch stream failed", c),
        watcher::Error::WatchError(s) => {
            return format!("API server ended the watch: {}", status(s));
        }
        other => return chain(other),
    };
    match client {
        kube::Error::Api(s) => format!("{step}: {}", status(s)),
        other => format!("{step}: {}", chain(other)),
    }
}

fn status(s: &kube::core::Status) -> String {
    format!("{} {}: {}", s.code, s.reason, s.message)
}

/// An error and its sources, each once (`a: b: c`, skipping a source its parent already quotes).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}

#[cfg(test)]
mod tests;
