//! How the view is started: [`ViewConfig`] names the install namespace and the policy ConfigMap,
//! says whether to keep a pod store (the controller) and which pods it keeps, how long a watch may
//! fail before the view is unready, how the big watches list, and the hooks that count reloads and
//! watch errors.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use resize_guard_runtime::ClusterVersion;
use resize_guard_runtime::Events;

use super::initial_list::InitialList;
use crate::watch_health::{DEFAULT_UNHEALTHY_AFTER, WatchErrorHook};

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
    /// The API server's Kubernetes version (the program's
    /// [`resize_guard_runtime::Runtime::version`]): decisions mirror that minor's validation.
    pub version: ClusterVersion,
    /// The program acts on PodDisruptionBudgets (the controller): a failing PDB watch makes the
    /// view unready and stale for acting. Otherwise (the webhook, the default) PDBs only shape
    /// warnings, and a failing PDB watch degrades `/readyz` instead ([`ClusterView::policy_note`]).
    pub acts_on_pdbs: bool,
    /// How the pod and node watches get their first state (default: a streaming list, pages
    /// where the API server refuses one).
    pub initial_list: InitialList,
    /// Test-only injected panics of the watch tasks (and, read back through
    /// [`ClusterView::injected_panics`], of the controller's reconciles).
    #[cfg(any(test, feature = "testing"))]
    pub injected_panics: resize_guard_runtime::fault::InjectedPanics,
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
            initial_list: InitialList::default(),
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
            .field("initial_list", &self.initial_list)
            .finish_non_exhaustive()
    }
}
