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
    /// `status.declaredFeatures` (the list kube-apiserver's `NodeDeclaredFeatureValidator` checks
    /// pod updates against). `None`: what a v1.37.2 kubelet with default feature gates declares,
    /// [`DEFAULT_DECLARED_FEATURES`]; `Some(vec![])`: a node declaring nothing, like a kubelet
    /// older than v1.36 (whose `NodeDeclaredFeatures` gate is off by default).
    #[serde(default)]
    pub declared_features: Option<Vec<String>>,
}

/// The features a v1.37.2 kubelet with default feature gates declares in
/// `status.declaredFeatures`, sorted as the kubelet publishes them.
///
/// Derived from `k8s.io/component-helpers@v0.37.2/nodedeclaredfeatures/features/*/`: every
/// registered feature's `Discover` is "the kubelet feature gate of the same name is enabled"
/// (`UserNamespacesHostNetworkSupport` and `VolumeBindMountOptions` also need a runtime feature),
/// and the gate defaults in `k8s.io/kubernetes@v1.37.2/pkg/features/kube_features.go`:
/// `ExtendWebSocketsToKubelet` (beta, on since 1.36), `InPlacePodLevelResourcesVerticalScaling`
/// (beta, on since 1.36), `InPlacePodVerticalScalingInitContainers` (GA in 1.37),
/// `RestartAllContainersOnContainerExits` (beta, on since 1.36); off by default:
/// `InPlacePodVerticalScalingMemoryBackedVolumes`, `UserNamespacesHostNetworkSupport`,
/// `DRANodeAllocatableResources`, `DRAOptionalNodeOperations`, `VolumeBindMountOptions`.
pub const DEFAULT_DECLARED_FEATURES: [&str; 4] = [
    "ExtendWebSocketsToKubelet",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    "RestartAllContainersOnContainerExits",
];

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
            declared_features: None,
        }
    }

    /// The `status.declaredFeatures` this node publishes: sorted and without duplicates, as the
    /// API server requires.
    pub fn declared_features(&self) -> Vec<String> {
        let mut features: Vec<String> = match &self.declared_features {
            Some(list) => list.clone(),
            None => DEFAULT_DECLARED_FEATURES.map(str::to_owned).to_vec(),
        };
        features.sort();
        features.dedup();
        features
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_features_default_to_a_v1_37_2_kubelets_and_can_be_emptied() {
        let default: NodeConfig =
            serde_yaml_ng::from_str("{name: a, cpu: \"1\", memory: 1Gi}").unwrap();
        assert_eq!(default.declared_features, None);
        assert_eq!(default.declared_features(), DEFAULT_DECLARED_FEATURES);
        assert_eq!(
            NodeConfig::new("a", "1", "1Gi").declared_features(),
            DEFAULT_DECLARED_FEATURES
        );
        let old: NodeConfig =
            serde_yaml_ng::from_str("{name: b, cpu: \"1\", memory: 1Gi, declaredFeatures: []}")
                .unwrap();
        assert_eq!(old.declared_features, Some(vec![]));
        assert!(old.declared_features().is_empty());
        let unsorted: NodeConfig = serde_yaml_ng::from_str(
            "{name: c, cpu: \"1\", memory: 1Gi, declaredFeatures: [Z, A, Z]}",
        )
        .unwrap();
        assert_eq!(unsorted.declared_features(), ["A", "Z"]);
    }
}
