//! What the simulated kubelet is told: the nodes it runs ([`NodeConfig`], also the sandbox
//! file's format) and its timing ([`KubeletOptions`]).

use std::collections::BTreeMap;
use std::time::Duration;

use resize_guard_policy::resources::Resources;

/// One simulated node.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeConfig {
    /// Node name.
    pub name: String,
    /// Allocatable (= capacity) cpu, e.g. `1930m`.
    pub cpu: String,
    /// Allocatable (= capacity) memory, e.g. `3Gi`.
    pub memory: String,
    /// Pod capacity.
    #[serde(default = "default_pods")]
    pub pods: u32,
    /// Extra node labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `spec.podPreemptionPolicy.disableResizePreemption` (needs the v1.37 alpha gate on the API
    /// server).
    #[serde(default)]
    pub disable_resize_preemption: Option<Vec<String>>,
}

fn default_pods() -> u32 {
    110
}

impl NodeConfig {
    /// A node with this allocatable cpu and memory.
    pub fn new(name: &str, cpu: &str, memory: &str) -> NodeConfig {
        NodeConfig {
            name: name.to_owned(),
            cpu: cpu.to_owned(),
            memory: memory.to_owned(),
            pods: default_pods(),
            labels: BTreeMap::new(),
            disable_resize_preemption: None,
        }
    }

    /// The t3.medium of the field test: 1930m cpu, 3Gi memory allocatable.
    pub fn t3_medium(name: &str) -> NodeConfig {
        NodeConfig::new(name, "1930m", "3Gi")
    }

    pub(crate) fn allocatable(&self) -> Resources {
        let list = [
            (
                "cpu".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(self.cpu.clone()),
            ),
            (
                "memory".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(self.memory.clone()),
            ),
        ]
        .into();
        Resources::from_list(&list)
    }
}

/// Timing knobs.
#[derive(Debug, Clone)]
pub struct KubeletOptions {
    /// Multiplies termination grace periods (1.0 = real time).
    pub time_scale: f64,
    /// Periodic retry of Deferred resizes (the kubelet uses 3 minutes).
    pub retry_period: Duration,
    /// How long `PodResizeInProgress` stays before actuation completes.
    pub actuation_delay: Duration,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            time_scale: 0.05,
            retry_period: Duration::from_secs(180),
            actuation_delay: Duration::from_millis(100),
        }
    }
}
