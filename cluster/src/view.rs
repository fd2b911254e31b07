//! The live cluster view both programs share — the webhook reviews against it, the controller
//! reconciles against it: nodes and PodDisruptionBudgets through kube-runtime reflector stores,
//! pods in a [`PodIndex`] by node holding only their ledger entries (so a decision never re-reads
//! pod specs), and the policy from the ConfigMap, reloaded live.
//!
//! One watch per resource, each object trimmed before anything keeps it: pods and nodes decoded
//! lean ([`crate::lean`]: only the kept fields are read off the wire), PodDisruptionBudgets and
//! the policy ConfigMap decoded and then trimmed ([`crate::trim`]). Pods and nodes get their
//! first state from a streaming list where the API server serves one ([`InitialList`]). The
//! pod watch feeds the index and, when [`ViewConfig::keep_pods`] asks for it (the controller), a
//! reflector [`Store`] of the trimmed pods [`ViewConfig::keep_pod_if`] selects and a broadcast of
//! each of them it applies or deletes, in that order — so the controller runs on the same single
//! pod watch instead of a second one, and keeps whole pods only for the few it acts on (at
//! 150,000 pods a store of every trimmed pod alone would outgrow the process's memory limit).
//!
//! Every watch item also goes to [`WatchHealth`]: the view is ready once every watch has listed and
//! none has been failing for longer than [`ViewConfig::unhealthy_after`]; until then each program's
//! `/readyz` fails with the reason (for the webhook the API server's `failurePolicy` then decides;
//! the controller also holds off acting while its pod, node or PDB watch is stale,
//! [`ClusterView::stale_for_acting`]). The webhook only warns with PDBs, so for it (unless
//! [`ViewConfig::acts_on_pdbs`]) a failing PDB watch degrades `/readyz`
//! ([`ClusterView::policy_note`]) instead of failing it. Every watch runs under the view's
//! [`Supervisor`]: a watch task that panics or ends makes the view unready and stale for good, and
//! the controller steps down. Which policy is in force follows [`crate::policy_source`]: the
//! ConfigMap when it parses, else the one already in force, else the controller's persisted last
//! good copy, else none — never the defaults by omission. A policy edit that does not parse is
//! logged, counted, and reported as an `InvalidPolicy` Warning Event on the ConfigMap; no policy at
//! all as a `NoPolicy` Warning Event.
//!
//! Rooms: `config` (what to watch and how), `initial_list` (streaming or paged, and the fallback),
//! `watches` (a lean or trimmed, supervised watch and its store), `pods` (the pod watch: index,
//! store, broadcast), `policy_watch` (the two policy ConfigMaps and their Events); this file holds
//! the view and its answers.

mod config;
mod initial_list;
mod pods;
mod policy_watch;
#[cfg(test)]
mod tests;
mod watches;

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger};
use resize_guard_policy::policy::Policy;
use resize_guard_runtime::ClusterVersion;
use tokio::sync::broadcast;

use crate::Cluster;
pub use crate::index::PodIndex;
use crate::lean::LeanNode;
use crate::policy_source::{InForce, PolicySource};
use crate::trim::trim_pdb;
use crate::watch_health::{WatchHealth, Watched};
pub use config::{KeepPod, PolicyReloadHook, ViewConfig};
pub use initial_list::InitialList;
use initial_list::listed;
use pods::watch_pods;
pub use pods::{POD_EVENTS_CAPACITY, POD_PAGE_SIZE};
pub use policy_watch::last_good_name;
use policy_watch::{watch_last_good, watch_policy};
use resize_guard_runtime::supervisor::Supervisor;
use watches::{reflect, trimmed};

/// Every value [`ClusterView::policy_origin`] answers: the series of
/// `resize_guard_policy_in_force{origin}`.
pub const POLICY_ORIGINS: &[&str] = &["configmap", "last-good", "none"];

/// The live cluster view.
pub struct ClusterView {
    nodes: Store<Node>,
    pdbs: Store<PodDisruptionBudget>,
    /// The compiled PDBs and the [`ClusterView::pdb_generation`] they were compiled at.
    budgets: RwLock<(u64, Arc<Budgets>)>,
    /// Bumped by every PDB watch event (after the store applied it).
    pdb_generation: AtomicU64,
    pods: RwLock<PodIndex>,
    pod_store: Option<Store<Pod>>,
    pod_events: broadcast::Sender<Arc<Pod>>,
    policy: RwLock<PolicySource>,
    /// A `NoPolicy` Event was published for the current spell without a policy.
    no_policy_reported: std::sync::atomic::AtomicBool,
    namespace: String,
    health: WatchHealth,
    policy_version: tokio::sync::watch::Sender<u64>,
    version: ClusterVersion,
    /// Every watch task runs under it.
    supervisor: Supervisor,
    acts_on_pdbs: bool,
    /// The API server refused a streaming list: the pod and node watches list in pages.
    lists_in_pages: Arc<std::sync::atomic::AtomicBool>,
    #[cfg(any(test, feature = "testing"))]
    injected_panics: resize_guard_runtime::fault::InjectedPanics,
}

impl Debug for ClusterView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterView")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl ClusterView {
    /// Starts the watches on the current runtime and returns the view (not yet ready).
    pub fn start(client: kube::Client, config: ViewConfig) -> Arc<ClusterView> {
        let (nodes, node_writer) = reflector::store();
        let (pdbs, pdb_writer) = reflector::store();
        let (pod_store, pod_writer) = if config.keep_pods {
            let (store, writer) = reflector::store();
            (Some(store), Some(writer))
        } else {
            (None, None)
        };
        let view = Arc::new(ClusterView {
            nodes,
            pdbs,
            budgets: RwLock::new((0, Arc::new(Budgets::default()))),
            pdb_generation: AtomicU64::new(1),
            pods: RwLock::new(PodIndex::default()),
            pod_store,
            pod_events: broadcast::Sender::new(POD_EVENTS_CAPACITY),
            policy: RwLock::new(PolicySource::default()),
            no_policy_reported: std::sync::atomic::AtomicBool::new(false),
            namespace: config.namespace.clone(),
            health: {
                let h = WatchHealth::new(config.unhealthy_after, config.on_watch_error.clone());
                if config.acts_on_pdbs {
                    h
                } else {
                    h.advisory(&[Watched::PodDisruptionBudgets])
                }
            },
            policy_version: tokio::sync::watch::Sender::new(0),
            version: config.version.clone(),
            supervisor: Supervisor::new(),
            acts_on_pdbs: config.acts_on_pdbs,
            lists_in_pages: Default::default(),
            #[cfg(any(test, feature = "testing"))]
            injected_panics: config.injected_panics.clone(),
        });
        let (keep_pod_if, last_good_config) = (config.keep_pod_if, config.clone());
        view.supervise(
            "the nodes watch",
            reflect(
                view.clone(),
                listed(
                    Api::<LeanNode>::all(client.clone()),
                    watcher::Config::default(),
                    config.initial_list,
                    "nodes",
                    view.lists_in_pages.clone(),
                ),
                node_writer,
                Watched::Nodes,
            ),
        );
        view.supervise(
            "the poddisruptionbudgets watch",
            reflect(
                view.clone(),
                trimmed(
                    Api::all(client.clone()),
                    watcher::Config::default(),
                    trim_pdb,
                ),
                pdb_writer,
                Watched::PodDisruptionBudgets,
            ),
        );
        view.supervise(
            "the pods watch",
            watch_pods(
                view.clone(),
                Api::all(client.clone()),
                config.initial_list,
                pod_writer.map(|w| (w, keep_pod_if)),
            ),
        );
        view.supervise(
            "the last good policy watch",
            watch_last_good(client.clone(), view.clone(), last_good_config),
        );
        view.supervise(
            "the policy watch",
            watch_policy(client, view.clone(), config),
        );
        view
    }

    /// The supervisor of the view's watch tasks (the controller supervises its own tasks with it
    /// too, and steps down on the first that stops).
    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// The test-only injected panics the view was started with.
    #[cfg(any(test, feature = "testing"))]
    pub fn injected_panics(&self) -> &resize_guard_runtime::fault::InjectedPanics {
        &self.injected_panics
    }

    /// `Ok` once nodes, pods, PDBs and the policy have been listed and no watch has been failing
    /// for longer than [`ViewConfig::unhealthy_after`] (PDBs only with
    /// [`ViewConfig::acts_on_pdbs`]), and no supervised task has stopped; else why not.
    pub fn readiness(&self) -> Result<(), String> {
        if let Some(exit) = self.supervisor.exit() {
            return Err(format!("{exit}; the caches may be frozen"));
        }
        self.health.readiness()
    }

    /// Whether the API server refused a streaming list, so the pod and node watches list in
    /// pages ([`InitialList`]).
    pub fn lists_in_pages(&self) -> bool {
        self.lists_in_pages.load(Ordering::Acquire)
    }

    /// [`ClusterView::readiness`] is `Ok`.
    pub fn is_ready(&self) -> bool {
        self.readiness().is_ok()
    }

    /// Why acting on the pod, node and PDB caches now could act on stale objects, if it could (see
    /// [`WatchState::stale`](crate::watch_health::WatchState::stale)): the controller waits then,
    /// or a victim evicted just before a watch fault would still look present. A supervised task
    /// that stopped (a watch task's cache is frozen) makes them stale for good.
    pub fn stale_for_acting(&self) -> Option<&'static str> {
        if self.supervisor.exit().is_some() {
            return Some("a supervised task stopped; the caches may be frozen");
        }
        let now = std::time::Instant::now();
        [Watched::Pods, Watched::Nodes, Watched::PodDisruptionBudgets]
            .into_iter()
            .find_map(|w| match self.health.state(w) {
                Some(state) => state.stale(now),
                None => Some("the watch health is unavailable (a watch task panicked)"),
            })
    }

    /// The health of each watch.
    pub fn watch_health(&self) -> &WatchHealth {
        &self.health
    }

    /// The trimmed pods of the view's pod watch that [`ViewConfig::keep_pod_if`] selects, when
    /// [`ViewConfig::keep_pods`] was set.
    pub fn pod_store(&self) -> Option<Store<Pod>> {
        self.pod_store.clone()
    }

    /// The ledger entry of the pod with this UID, if it is bound to a node and not terminal
    /// (whether or not the pod store keeps it).
    pub fn pod_entry(&self, uid: &str) -> Option<LedgerEntry> {
        self.pods.read().ok()?.entry(uid).cloned()
    }

    /// Every pod the pod watch applies or deletes (`InitApply`, `Apply`, `Delete`) that
    /// [`ViewConfig::keep_pod_if`] selects, trimmed, sent after the index and the store took it (a
    /// relist's `InitApply` pods, buffered as in kube's own reflector until its `InitDone`, are
    /// sent at that `InitDone`, once the store shows them). A receiver that
    /// falls more than [`POD_EVENTS_CAPACITY`] behind gets `Lagged` and must catch up from the
    /// store. Nothing is sent (or allocated) while there is no receiver.
    pub fn pod_events(&self) -> broadcast::Receiver<Arc<Pod>> {
        self.pod_events.subscribe()
    }

    /// The policy in force and where it came from, if any.
    pub fn policy_in_force(&self) -> Option<InForce> {
        self.policy.read().ok()?.in_force().cloned()
    }

    /// Why no policy is in force (`None` when one is): the webhook allows every resize with this
    /// as its warning, the controller idles and is unready.
    pub fn policy_problem(&self) -> Option<String> {
        match self.policy.read() {
            Ok(source) => source.why_none(),
            Err(_) => Some("no policy in force: the policy state is unavailable (a task panicked while updating it)".into()),
        }
    }

    /// The degraded note for `/readyz`: the policy's ([`PolicySource::note`]) and, when PDBs only
    /// shape warnings (not [`ViewConfig::acts_on_pdbs`]), a failing PDB watch's.
    pub fn policy_note(&self) -> Option<String> {
        let policy = match self.policy.read() {
            Ok(source) => source.note(),
            Err(_) => self.policy_problem(),
        };
        let pdbs = self.pdb_problem();
        match (policy, pdbs) {
            (Some(p), Some(b)) => Some(format!("{p}; {b}")),
            (p, b) => p.or(b),
        }
    }

    /// Why the PDBs the view serves may be missing or out of date, when they only shape warnings
    /// (not [`ViewConfig::acts_on_pdbs`]; with it, the same problem makes the view unready).
    pub fn pdb_problem(&self) -> Option<String> {
        if self.acts_on_pdbs {
            return None;
        }
        let why = self.health.degraded()?;
        Some(format!(
            "{why}; warnings may miss or misstate PodDisruptionBudgets"
        ))
    }

    /// Where the policy in force came from (`configmap`, `last-good`) or `none`: the value of
    /// `resize_guard_policy_in_force{origin}` that reads 1 on both programs' `/metrics`
    /// (`runtime/src/policy_mode.rs`, `PolicyOrigin`; every value is in [`POLICY_ORIGINS`]).
    pub fn policy_origin(&self) -> &'static str {
        self.policy_in_force().map_or("none", |f| f.origin.as_str())
    }

    /// What the policy ConfigMap holds as last read (`valid`, `invalid`, `missing`, `unread`):
    /// the value of `resize_guard_policy_configmap_state{state}` that reads 1
    /// (`crate::policy_source::CONFIG_MAP_STATES`).
    pub fn policy_config_map_state(&self) -> &'static str {
        self.policy
            .read()
            .map_or("unread", |source| source.config_map_state())
    }

    /// Ticks every time a new policy takes effect (the controller re-evaluates every pod).
    pub fn policy_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.policy_version.subscribe()
    }
}

impl Cluster for ClusterView {
    fn kubernetes_minor(&self) -> Option<u32> {
        self.version.get().map(|v| v.minor)
    }

    /// `None` while no policy is in force, and when the policy state is unavailable (a
    /// poisoned lock): never the defaults by omission.
    fn policy(&self) -> Option<Arc<Policy>> {
        Some(self.policy.read().ok()?.in_force()?.policy.clone())
    }

    fn no_policy_reason(&self) -> String {
        self.policy_problem()
            .unwrap_or_else(|| "no policy in force".to_owned())
    }

    fn ledger(&self, node: &str) -> Option<Arc<NodeLedger>> {
        let n = self.nodes.get(&reflector::ObjectRef::new(node))?;
        Some(self.pods.read().ok()?.ledger(&n))
    }

    /// Compiled once per PDB change, not per decision: a generation read *before* the store
    /// is read tags the result, so a compilation that raced a change is never served as current.
    fn budgets(&self) -> Arc<Budgets> {
        let generation = self.pdb_generation.load(Ordering::Acquire);
        if let Ok(cached) = self.budgets.read()
            && cached.0 == generation
        {
            return cached.1.clone();
        }
        let all = self.pdbs.state();
        let compiled = Arc::new(Budgets::new(all.iter().map(|p| p.as_ref())));
        if let Ok(mut cached) = self.budgets.write()
            && cached.0 < generation
        {
            *cached = (generation, compiled.clone());
        }
        compiled
    }

    fn install_namespace(&self) -> &str {
        &self.namespace
    }
}
