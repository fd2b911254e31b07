//! The live cluster view both programs share — the webhook reviews against it, the controller
//! reconciles against it: nodes and PodDisruptionBudgets through kube-runtime reflector stores,
//! pods in a [`PodIndex`] by node holding only their ledger entries (so a decision never re-reads
//! pod specs), and the policy from the ConfigMap, reloaded live.
//!
//! One watch per resource, each object trimmed ([`crate::trim`]) before anything keeps it. The
//! pod watch feeds the index and, when [`ViewConfig::keep_pods`] asks for it (the controller), a
//! reflector [`Store`] of the trimmed pods [`ViewConfig::keep_pod_if`] selects and a broadcast of
//! each of them it applies or deletes, in that order — so the controller runs on the same single
//! pod watch instead of a second one, and keeps whole pods only for the few it acts on (at
//! 150,000 pods a store of every trimmed pod alone would outgrow the process's memory limit).
//!
//! Every watch item also goes to [`WatchHealth`]: the view is ready once every watch has listed
//! and none has been failing for longer than [`ViewConfig::unhealthy_after`]; until then each
//! program's `/readyz` fails with the reason (for the webhook the API server's `failurePolicy`
//! then decides; the controller also holds off acting while its pod, node or PDB watch is stale,
//! [`ClusterView::stale_for_acting`]). The webhook only warns with PDBs, so for it (unless
//! [`ViewConfig::acts_on_pdbs`]) a failing PDB watch degrades `/readyz` ([`ClusterView::policy_note`])
//! instead of failing it. Every watch runs under the view's [`Supervisor`]: a watch task that
//! panics or ends makes the view unready and stale for good, and the controller steps down. Which policy is in force follows
//! [`crate::policy_source`]: the ConfigMap when it parses, else the one already in force, else
//! the controller's persisted last good copy, else none — never the defaults by omission. A
//! policy edit that does not parse is logged, counted, and reported as an `InvalidPolicy` Warning
//! Event on the ConfigMap; no policy at all as a `NoPolicy` Warning Event.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node, ObjectReference, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::Api;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger};
use resize_guard_policy::policy::{POLICY_KEY, Policy};
use resize_guard_runtime::ClusterVersion;
use resize_guard_runtime::Events;
use tokio::sync::broadcast;

use crate::Cluster;
pub use crate::index::PodIndex;
use crate::policy_source::{InForce, PolicySource, parse};
use crate::supervisor::Supervisor;
use crate::trim::{trim_node, trim_pdb, trim_pod};
use crate::watch_health::{
    DEFAULT_UNHEALTHY_AFTER, WatchBackoff, WatchErrorHook, WatchHealth, Watched,
};

/// How many pod events [`ClusterView::pod_events`] buffers per receiver before it lags.
pub const POD_EVENTS_CAPACITY: usize = 4096;

/// Selects the pods the controller's pod store keeps ([`ViewConfig::keep_pod_if`]).
pub type KeepPod = fn(&Pod) -> bool;

/// Called after every policy reload with whether it succeeded (for metrics).
pub type PolicyReloadHook = Arc<dyn Fn(bool) + Send + Sync>;

/// What to watch and how: [`ViewConfig::new`] gives the defaults, fields override them.
#[derive(Clone)]
pub struct ViewConfig {
    /// resize-guard's namespace (always excluded; holds the policy ConfigMap).
    pub namespace: String,
    /// Name of the policy ConfigMap.
    pub policy_configmap: String,
    /// Publishes the `InvalidPolicy` and `PolicyDeleted` Events (the program's one publisher).
    pub events: Events,
    /// Also keep the trimmed pods in a [`Store`] and broadcast pod events (the controller).
    pub keep_pods: bool,
    /// Which pods the [`Store`] keeps and the broadcast sends (default: all). A pod that stops
    /// matching leaves the store; every pod stays in the index either way.
    pub keep_pod_if: KeepPod,
    /// A watch failing for longer than this makes the view unready.
    pub unhealthy_after: Duration,
    /// Called after every policy reload.
    pub on_policy_reload: PolicyReloadHook,
    /// Called on every watch error.
    pub on_watch_error: WatchErrorHook,
    /// The API server's Kubernetes version (the program's [`resize_guard_runtime::Runtime::version`]):
    /// decisions mirror that minor's validation.
    pub version: ClusterVersion,
    /// The program acts on PodDisruptionBudgets (the controller): a failing PDB watch makes the
    /// view unready and stale for acting. Otherwise (the webhook, the default) PDBs only shape
    /// warnings, and a failing PDB watch degrades `/readyz` instead ([`ClusterView::policy_note`]).
    pub acts_on_pdbs: bool,
    /// Test-only injected panics of the watch tasks (and, read back through
    /// [`ClusterView::injected_panics`], of the controller's reconciles).
    #[cfg(any(test, feature = "testing"))]
    pub injected_panics: crate::fault::InjectedPanics,
}

impl ViewConfig {
    /// Defaults: no pod store, unhealthy after 60 s of failure, no hooks.
    pub fn new(namespace: &str, policy_configmap: &str, events: Events) -> ViewConfig {
        ViewConfig {
            namespace: namespace.to_owned(),
            policy_configmap: policy_configmap.to_owned(),
            events,
            keep_pods: false,
            keep_pod_if: |_| true,
            unhealthy_after: DEFAULT_UNHEALTHY_AFTER,
            on_policy_reload: Arc::new(|_| {}),
            on_watch_error: Arc::new(|_| {}),
            version: ClusterVersion::default(),
            acts_on_pdbs: false,
            #[cfg(any(test, feature = "testing"))]
            injected_panics: Default::default(),
        }
    }
}

impl Debug for ViewConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewConfig")
            .field("namespace", &self.namespace)
            .field("policy_configmap", &self.policy_configmap)
            .field("keep_pods", &self.keep_pods)
            .field("unhealthy_after", &self.unhealthy_after)
            .field("acts_on_pdbs", &self.acts_on_pdbs)
            .finish_non_exhaustive()
    }
}

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
    #[cfg(any(test, feature = "testing"))]
    injected_panics: crate::fault::InjectedPanics,
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
            #[cfg(any(test, feature = "testing"))]
            injected_panics: config.injected_panics.clone(),
        });
        // A watch loop only returns when its stream ends, which kube's watcher never does on its
        // own (it retries on `WatchBackoff`): any end is a fault.
        let ended = || Err::<(), String>("its watch stream ended".to_owned());
        let spawn = |task: &str, work: WatchTask| {
            view.supervisor.spawn(task, work);
        };
        spawn(
            "the nodes watch",
            Box::pin({
                let work = reflect(
                    view.clone(),
                    Api::all(client.clone()),
                    trim_node,
                    node_writer,
                    Watched::Nodes,
                );
                async move {
                    work.await;
                    ended()
                }
            }),
        );
        spawn(
            "the poddisruptionbudgets watch",
            Box::pin({
                let work = reflect(
                    view.clone(),
                    Api::all(client.clone()),
                    trim_pdb,
                    pdb_writer,
                    Watched::PodDisruptionBudgets,
                );
                async move {
                    work.await;
                    ended()
                }
            }),
        );
        spawn(
            "the pods watch",
            Box::pin({
                let work = watch_pods(
                    view.clone(),
                    Api::all(client.clone()),
                    pod_writer.map(|w| (w, config.keep_pod_if)),
                );
                async move {
                    work.await;
                    ended()
                }
            }),
        );
        spawn(
            "the last good policy watch",
            Box::pin({
                let work = watch_last_good(client.clone(), view.clone(), config.clone());
                async move {
                    work.await;
                    ended()
                }
            }),
        );
        spawn(
            "the policy watch",
            Box::pin({
                let work = watch_policy(client, view.clone(), config);
                async move {
                    work.await;
                    ended()
                }
            }),
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
    pub fn injected_panics(&self) -> &crate::fault::InjectedPanics {
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
    /// [`ViewConfig::keep_pod_if`] selects, trimmed, sent after the index and the store took it (a relist's `InitApply` pods, as in kube's own
    /// reflector, are buffered and become visible together at its `InitDone`). A receiver that
    /// falls more than [`POD_EVENTS_CAPACITY`] behind gets `Lagged` and must catch up from the
    /// store. Nothing is sent (or allocated) while there is no receiver.
    pub fn pod_events(&self) -> broadcast::Receiver<Arc<Pod>> {
        self.pod_events.subscribe()
    }

    /// Applies one source's reading; a change of the policy in force ticks
    /// [`ClusterView::policy_changes`] and is logged; losing every policy publishes a `NoPolicy`
    /// Warning Event on the policy ConfigMap (once per spell without one).
    fn update_policy(&self, config: &ViewConfig, update: impl FnOnce(&mut PolicySource) -> bool) {
        let Ok(mut source) = self.policy.write() else {
            return;
        };
        let changed = update(&mut source);
        let (in_force, why_none) = (source.in_force().cloned(), source.why_none());
        let settled = source.settled();
        drop(source);
        if changed {
            match &in_force {
                Some(f) => tracing::info!(
                    origin = f.origin.as_str(),
                    effective_policy = %f.policy.to_yaml(),
                    "policy loaded"
                ),
                None => tracing::warn!("no policy in force"),
            }
            self.policy_version.send_modify(|v| *v += 1);
        }
        if in_force.is_some() {
            self.no_policy_reported.store(false, Ordering::Release);
            return;
        }
        let Some(why) = why_none.filter(|_| settled) else {
            return;
        };
        if self.no_policy_reported.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(
            why,
            "nothing is denied, repaired or preempted until a policy parses"
        );
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: "NoPolicy".into(),
            note: Some(format!(
                "{why}; resize-guard denies, repairs and preempts nothing until {POLICY_KEY} in ConfigMap {}/{} parses",
                self.namespace, config.policy_configmap
            )),
            action: "LoadPolicy".into(),
            secondary: None,
        };
        let regarding = named_config_map(&config.policy_configmap, &self.namespace);
        config.events.publish(event, regarding);
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

/// A watch of `api`, retried on [`WatchBackoff`], every object trimmed.
fn trimmed<K>(
    api: Api<K>,
    config: watcher::Config,
    trim: fn(&mut K),
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, config)
        .backoff(WatchBackoff::default())
        .modify(trim)
}

/// Keeps a reflector store of `api`'s trimmed objects.
async fn reflect<K>(
    view: Arc<ClusterView>,
    api: Api<K>,
    trim: fn(&mut K),
    mut writer: Writer<K>,
    resource: Watched,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut stream = trimmed(api, watcher::Config::default(), trim).boxed();
    while let Some(item) = stream.next().await {
        #[cfg(any(test, feature = "testing"))]
        inject(&view, resource, &item);
        if let Ok(ev) = &item {
            writer.apply_watcher_event(ev);
            if resource == Watched::PodDisruptionBudgets {
                view.pdb_generation.fetch_add(1, Ordering::AcqRel);
            }
        }
        view.health.observe(resource, &item);
    }
}

/// A watch task of the view, boxed so the five can be spawned alike.
type WatchTask = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// Panics if a test injected a panic for this watch and the object `item` carries.
#[cfg(any(test, feature = "testing"))]
fn inject<K: Resource>(
    view: &ClusterView,
    resource: Watched,
    item: &watcher::Result<watcher::Event<K>>,
) {
    if let Ok(
        watcher::Event::InitApply(obj) | watcher::Event::Apply(obj) | watcher::Event::Delete(obj),
    ) = item
    {
        view.injected_panics
            .check(crate::fault::Site::Watch(resource), &obj.name_any());
    }
}

/// Pods are listed 100 per page rather than kube's default 500: a page is held whole and
/// decoded before it is trimmed (~150 kB per pod in memory, `managedFields` and all), and its
/// peak stays resident after the list; 100 keeps that peak to ~15 MiB for a few more requests
/// (1,500 at 150,000 pods, each served from kube-apiserver's watch cache).
pub const POD_PAGE_SIZE: u32 = 100;

fn pod_list_config() -> watcher::Config {
    watcher::Config::default().page_size(POD_PAGE_SIZE)
}

async fn watch_pods(
    view: Arc<ClusterView>,
    api: Api<Pod>,
    mut store: Option<(Writer<Pod>, KeepPod)>,
) {
    let mut stream = trimmed(api, pod_list_config(), trim_pod).boxed();
    let mut relist: Option<PodIndex> = None;
    while let Some(item) = stream.next().await {
        #[cfg(any(test, feature = "testing"))]
        inject(&view, Watched::Pods, &item);
        let mut kept = None;
        if let Ok(ev) = &item {
            apply_to_index(&view, ev, &mut relist);
            if let Some((w, keep)) = store.as_mut() {
                kept = keep_in_store(w, *keep, ev);
            }
        }
        view.health.observe(Watched::Pods, &item);
        if kept == Some(true)
            && let Ok(
                watcher::Event::InitApply(p) | watcher::Event::Apply(p) | watcher::Event::Delete(p),
            ) = item
            && view.pod_events.receiver_count() > 0
        {
            // Only fails without receivers (a race with the last one leaving): nothing to do.
            let _ = view.pod_events.send(Arc::new(p));
        }
    }
}

/// Applies `ev` to the store as far as `keep` selects its pod: a pod that stops matching is
/// deleted from it. Returns whether the event's pod is selected (`None` for list boundaries).
fn keep_in_store(store: &mut Writer<Pod>, keep: KeepPod, ev: &watcher::Event<Pod>) -> Option<bool> {
    match ev {
        watcher::Event::Init | watcher::Event::InitDone => {
            store.apply_watcher_event(ev);
            None
        }
        watcher::Event::InitApply(p) => {
            let kept = keep(p);
            if kept {
                store.apply_watcher_event(ev);
            }
            Some(kept)
        }
        watcher::Event::Apply(p) => {
            let kept = keep(p);
            if kept {
                store.apply_watcher_event(ev);
            } else if store
                .as_reader()
                .get(&reflector::ObjectRef::from_obj(p))
                .is_some()
            {
                store.apply_watcher_event(&watcher::Event::Delete(p.clone()));
            }
            Some(kept)
        }
        watcher::Event::Delete(p) => {
            store.apply_watcher_event(ev);
            Some(keep(p))
        }
    }
}

/// A relist builds a fresh index in `relist` and swaps it in at `InitDone`.
fn apply_to_index(view: &ClusterView, ev: &watcher::Event<Pod>, relist: &mut Option<PodIndex>) {
    match ev {
        watcher::Event::Init => *relist = Some(PodIndex::default()),
        watcher::Event::InitApply(p) => {
            if let Some(r) = relist.as_mut() {
                r.apply(p);
            }
        }
        watcher::Event::InitDone => {
            if let (Some(fresh), Ok(mut idx)) = (relist.take(), view.pods.write()) {
                *idx = fresh;
            }
        }
        watcher::Event::Apply(p) => {
            if let Ok(mut idx) = view.pods.write() {
                idx.apply(p);
            }
        }
        watcher::Event::Delete(p) => {
            if let Ok(mut idx) = view.pods.write() {
                idx.delete(&p.uid().unwrap_or_default());
            }
        }
    }
}

/// What a watch of one named ConfigMap saw.
enum Seen<'a> {
    /// Listed or changed.
    Present(&'a ConfigMap),
    /// Deleted (`Some`), or absent from a (re)list (`None`).
    Gone(Option<&'a ConfigMap>),
}

/// Watches the ConfigMap `name` in the install namespace (a field selector, which RBAC's
/// `resourceNames` allows), telling `on` whenever it is present or gone, and `watched`'s health
/// about every item.
async fn watch_config_map(
    client: kube::Client,
    view: &ClusterView,
    name: &str,
    watched: Watched,
    mut on: impl FnMut(Seen<'_>),
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &view.namespace);
    let watch = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = trimmed(api, watch, |cm: &mut ConfigMap| {
        cm.metadata.managed_fields = None;
    })
    .boxed();
    let mut seen_in_list = false;
    while let Some(item) = stream.next().await {
        match &item {
            Err(_) | Ok(watcher::Event::InitDone) => {}
            Ok(watcher::Event::Init) => seen_in_list = false,
            Ok(watcher::Event::InitApply(cm) | watcher::Event::Apply(cm)) => {
                seen_in_list = true;
                on(Seen::Present(cm));
            }
            Ok(watcher::Event::Delete(cm)) => on(Seen::Gone(Some(cm))),
        }
        if matches!(item, Ok(watcher::Event::InitDone)) && !seen_in_list {
            on(Seen::Gone(None));
        }
        view.health.observe(watched, &item);
    }
}

async fn watch_policy(client: kube::Client, view: Arc<ClusterView>, config: ViewConfig) {
    let name = config.policy_configmap.clone();
    watch_config_map(
        client,
        &view,
        &name,
        Watched::ConfigMap,
        |seen| match seen {
            Seen::Present(cm) => {
                let read = parse(cm.data.as_ref());
                report_policy(&read, cm, &config.events, &config.on_policy_reload);
                view.update_policy(&config, |s| s.config_map(Some(read)));
            }
            Seen::Gone(cm) => {
                if cm.is_some() || view.policy_in_force().is_some() {
                    policy_gone(&name, &view.namespace, cm, &config.events);
                } else {
                    tracing::warn!(configmap = %name, "no policy ConfigMap");
                }
                view.update_policy(&config, |s| s.config_map(None));
            }
        },
    )
    .await;
}

/// The name of the controller's last good copy of the policy ConfigMap `policy_configmap`.
pub fn last_good_name(policy_configmap: &str) -> String {
    format!("{policy_configmap}-last-good")
}

/// Watches the controller's last good copy (read at start when the policy ConfigMap gives no
/// policy; see [`crate::policy_source`]).
async fn watch_last_good(client: kube::Client, view: Arc<ClusterView>, config: ViewConfig) {
    let name = last_good_name(&config.policy_configmap);
    watch_config_map(client, &view, &name, Watched::LastGoodPolicy, |seen| {
        let read = match seen {
            Seen::Present(cm) => Some(parse(cm.data.as_ref())),
            Seen::Gone(_) => None,
        };
        if let Some(Err(why)) = &read {
            tracing::warn!(configmap = %name, why, "the last good policy copy is invalid");
        }
        view.update_policy(&config, |s| s.last_good(read));
    })
    .await;
}

/// A reference to the ConfigMap `name` in `namespace`, when only its name is known.
fn named_config_map(name: &str, namespace: &str) -> ObjectReference {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    }
    .object_ref(&())
}

/// The policy ConfigMap disappeared: keep the policy in force, say so in the log and in a
/// `PolicyDeleted` Warning Event on the (deleted) ConfigMap.
fn policy_gone(name: &str, namespace: &str, cm: Option<&ConfigMap>, events: &Events) {
    tracing::warn!(configmap = %name, "policy ConfigMap deleted; keeping the last good policy until it is recreated");
    let regarding = match cm {
        Some(cm) => cm.object_ref(&()),
        // Gone at a relist: only its name is known.
        None => named_config_map(name, namespace),
    };
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: "PolicyDeleted".into(),
        note: Some(format!(
            "the policy ConfigMap {namespace}/{name} was deleted; keeping the last good policy until it is recreated"
        )),
        action: "LoadPolicy".into(),
        secondary: None,
    };
    events.publish(event, regarding);
}

/// Counts a reload and, for one that failed, logs it and publishes an `InvalidPolicy` Warning
/// Event on the ConfigMap.
fn report_policy(
    read: &Result<(Policy, String), String>,
    cm: &ConfigMap,
    events: &Events,
    on_reload: &PolicyReloadHook,
) {
    on_reload(read.is_ok());
    if let Err(e) = read {
        tracing::warn!(error = %e, "invalid policy; keeping the last good one");
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: "InvalidPolicy".into(),
            note: Some(format!("{e}; keeping the last good policy")),
            action: "LoadPolicy".into(),
            secondary: None,
        };
        events.publish(event, cm.object_ref(&()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_source::Origin;

    #[test]
    fn every_origin_is_a_series_of_the_in_force_gauge() {
        for origin in [Origin::ConfigMap, Origin::LastGood] {
            // Exhaustive: a new origin does not compile here until it is listed above.
            match origin {
                Origin::ConfigMap | Origin::LastGood => {}
            }
            assert!(POLICY_ORIGINS.contains(&origin.as_str()), "{origin:?}");
        }
        assert!(POLICY_ORIGINS.contains(&"none"));
    }
}
