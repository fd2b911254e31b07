//! The webhook's view of the cluster: nodes and PodDisruptionBudgets through kube-runtime
//! reflectors, pods in an index by node holding only their ledger entries (so a decision never
//! re-reads pod specs), and the policy from the ConfigMap, reloaded live.
//!
//! The view is ready once every watch has listed once; until then `/readyz` fails and the API
//! server's `failurePolicy` decides. A policy edit that does not parse keeps the last good policy,
//! is logged, counted, and reported as an `InvalidPolicy` Warning Event on the ConfigMap.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger, counts_on};
use resize_guard_policy::pod::node_name;
use resize_guard_policy::policy::Policy;

use crate::Cluster;

/// Key of the policy document in the ConfigMap.
pub const POLICY_KEY: &str = "policy.yaml";

/// Pods grouped by the node they are bound to, kept as ledger entries (what decisions read),
/// with each node's ledger cached until a pod on it or the node itself changes.
#[derive(Debug, Default)]
pub struct PodIndex {
    by_node: HashMap<String, BTreeMap<String, LedgerEntry>>,
    node_of: HashMap<String, String>,
    cache: HashMap<String, (Option<String>, Arc<NodeLedger>)>,
}

impl PodIndex {
    /// Adds or replaces a pod (a pod in a terminal phase holds nothing and is dropped).
    pub fn apply(&mut self, pod: &Pod) {
        let uid = pod.uid().unwrap_or_default();
        self.delete(&uid);
        if let Some(node) = node_name(pod)
            .filter(|n| counts_on(pod, n))
            .map(str::to_owned)
        {
            self.cache.remove(&node);
            self.node_of.insert(uid.clone(), node.clone());
            self.by_node
                .entry(node)
                .or_default()
                .insert(uid, LedgerEntry::new(pod));
        }
    }

    /// Removes a pod.
    pub fn delete(&mut self, uid: &str) {
        if let Some(node) = self.node_of.remove(uid) {
            self.cache.remove(&node);
            if let Some(pods) = self.by_node.get_mut(&node) {
                pods.remove(uid);
                if pods.is_empty() {
                    self.by_node.remove(&node);
                }
            }
        }
    }

    /// The ledger of `node`, from the cache when neither its pods nor the node (by
    /// resourceVersion) changed since it was built.
    pub fn ledger(&mut self, node: &Node) -> Arc<NodeLedger> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let version = node.metadata.resource_version.clone();
        if let Some((v, l)) = self.cache.get(&name)
            && *v == version
        {
            return l.clone();
        }
        let entries = self
            .by_node
            .get(&name)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        let ledger = Arc::new(NodeLedger::from_entries(node, entries));
        self.cache.insert(name, (version, ledger.clone()));
        ledger
    }

    /// Number of indexed pods.
    pub fn len(&self) -> usize {
        self.node_of.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }
}

/// Called after every policy reload with whether it succeeded (for metrics).
pub type PolicyReloadHook = Arc<dyn Fn(bool) + Send + Sync>;

/// The live cluster view.
pub struct ClusterView {
    nodes: Store<Node>,
    pdbs: Store<PodDisruptionBudget>,
    pods: RwLock<PodIndex>,
    policy: RwLock<Arc<Policy>>,
    namespace: String,
    pods_synced: AtomicBool,
    policy_synced: AtomicBool,
    policy_version: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for ClusterView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterView")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl ClusterView {
    /// Starts the watches on the current runtime and returns the view (not yet ready).
    pub fn start(
        client: kube::Client,
        namespace: &str,
        policy_configmap: &str,
        reporter: Reporter,
        on_policy_reload: PolicyReloadHook,
    ) -> Arc<ClusterView> {
        let (nodes, node_writer) = reflector::store();
        let (pdbs, pdb_writer) = reflector::store();
        let view = Arc::new(ClusterView {
            nodes,
            pdbs,
            pods: RwLock::new(PodIndex::default()),
            policy: RwLock::new(Arc::new(Policy::default())),
            namespace: namespace.to_owned(),
            pods_synced: AtomicBool::new(false),
            policy_synced: AtomicBool::new(false),
            policy_version: tokio::sync::watch::Sender::new(0),
        });
        let node_api: Api<Node> = Api::all(client.clone());
        tokio::spawn(
            watcher(node_api, watcher::Config::default())
                .default_backoff()
                .modify(|n: &mut Node| n.metadata.managed_fields = None)
                .reflect(node_writer)
                .for_each(|_| async {}),
        );
        let pdb_api: Api<PodDisruptionBudget> = Api::all(client.clone());
        tokio::spawn(
            watcher(pdb_api, watcher::Config::default())
                .default_backoff()
                .reflect(pdb_writer)
                .for_each(|_| async {}),
        );
        tokio::spawn(watch_pods(client.clone(), view.clone()));
        tokio::spawn(watch_policy(
            client,
            view.clone(),
            policy_configmap.to_owned(),
            reporter,
            on_policy_reload,
        ));
        view
    }

    /// True once nodes, pods, PDBs and the policy have been listed.
    pub fn is_ready(&self) -> bool {
        // A store is ready after its first full list.
        let stores = futures::FutureExt::now_or_never(self.nodes.wait_until_ready()).is_some()
            && futures::FutureExt::now_or_never(self.pdbs.wait_until_ready()).is_some();
        stores
            && self.pods_synced.load(Ordering::Acquire)
            && self.policy_synced.load(Ordering::Acquire)
    }

    fn set_policy(&self, policy: Policy) {
        if let Ok(mut p) = self.policy.write() {
            *p = Arc::new(policy);
        }
        self.policy_version.send_modify(|v| *v += 1);
    }

    /// Ticks every time a new policy takes effect (the controller re-evaluates every pod).
    pub fn policy_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.policy_version.subscribe()
    }
}

impl Cluster for ClusterView {
    fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .map(|p| p.clone())
            .unwrap_or_else(|_| Arc::new(Policy::default()))
    }

    fn ledger(&self, node: &str) -> Option<Arc<NodeLedger>> {
        let n = self.nodes.get(&reflector::ObjectRef::new(node))?;
        Some(self.pods.write().ok()?.ledger(&n))
    }

    fn budgets(&self) -> Budgets {
        let all = self.pdbs.state();
        Budgets::new(all.iter().map(|p| p.as_ref()))
    }

    fn install_namespace(&self) -> &str {
        &self.namespace
    }
}

async fn watch_pods(client: kube::Client, view: Arc<ClusterView>) {
    let api: Api<Pod> = Api::all(client);
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relist: Option<PodIndex> = None;
    while let Some(ev) = stream.next().await {
        let Ok(ev) = ev else { continue };
        match ev {
            watcher::Event::Init => relist = Some(PodIndex::default()),
            watcher::Event::InitApply(p) => {
                if let Some(r) = relist.as_mut() {
                    r.apply(&p);
                }
            }
            watcher::Event::InitDone => {
                if let (Some(fresh), Ok(mut idx)) = (relist.take(), view.pods.write()) {
                    *idx = fresh;
                }
                view.pods_synced.store(true, Ordering::Release);
            }
            watcher::Event::Apply(p) => {
                if let Ok(mut idx) = view.pods.write() {
                    idx.apply(&p);
                }
            }
            watcher::Event::Delete(p) => {
                if let Ok(mut idx) = view.pods.write() {
                    idx.delete(&p.uid().unwrap_or_default());
                }
            }
        }
    }
}

async fn watch_policy(
    client: kube::Client,
    view: Arc<ClusterView>,
    name: String,
    reporter: Reporter,
    on_reload: PolicyReloadHook,
) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &view.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let recorder = Recorder::new(client, reporter);
    let mut stream = watcher(api, config).default_backoff().boxed();
    let mut seen_in_list = false;
    while let Some(ev) = stream.next().await {
        let Ok(ev) = ev else { continue };
        match ev {
            watcher::Event::Init => seen_in_list = false,
            watcher::Event::InitApply(cm) | watcher::Event::Apply(cm) => {
                seen_in_list = true;
                apply_policy(&view, &cm, &recorder, &on_reload).await;
            }
            watcher::Event::InitDone => {
                if !seen_in_list {
                    tracing::info!(configmap = %name, "no policy ConfigMap; using the default policy");
                    view.set_policy(Policy::default());
                }
                view.policy_synced.store(true, Ordering::Release);
            }
            watcher::Event::Delete(_) => {
                tracing::warn!(configmap = %name, "policy ConfigMap deleted; using the default policy");
                view.set_policy(Policy::default());
            }
        }
    }
}

async fn apply_policy(
    view: &ClusterView,
    cm: &ConfigMap,
    recorder: &Recorder,
    on_reload: &PolicyReloadHook,
) {
    let doc = cm
        .data
        .as_ref()
        .and_then(|d| d.get(POLICY_KEY))
        .map(String::as_str)
        .unwrap_or_default();
    match Policy::from_yaml(doc) {
        Ok(policy) => {
            on_reload(true);
            tracing::info!(effective_policy = %policy.to_yaml(), "policy loaded");
            view.set_policy(policy);
        }
        Err(e) => {
            on_reload(false);
            tracing::warn!(error = %e, "invalid policy; keeping the last good one");
            let event = KubeEvent {
                type_: EventType::Warning,
                reason: "InvalidPolicy".into(),
                note: Some(format!("{e}; keeping the last good policy")),
                action: "LoadPolicy".into(),
                secondary: None,
            };
            if let Err(err) = recorder.publish(&event, &cm.object_ref(&())).await {
                tracing::warn!(error = %err, "could not record InvalidPolicy event");
            }
        }
    }
}
