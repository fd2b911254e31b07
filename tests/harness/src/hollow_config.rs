//! A hollow node's configuration ([`HollowNodeConfig`]): the machine the fake cAdvisor reports
//! (cores, memory, fake pod memory usage) and the kubelet's settings (reservation, max pods,
//! labels, taints, feature gates, whether it serves its HTTPS API), checked before a process
//! starts and turned into the `hollow-node` command line ([`crate::hollow_node`] runs it).
//!
//! It is also the format of a node in YAML (camelCase, unknown keys rejected):
//!
//! ```yaml
//! - {name: node-a, cpu: 2, memory: 4Gi, reservedCpu: 70m, reservedMemory: 1Gi}
//! - name: node-b
//!   cpu: 4
//!   memory: 8Gi
//!   pods: 30
//!   labels: {zone: b}
//!   taints: ["dedicated=batch:NoSchedule"]
//!   featureGates: ["InPlacePodLevelResourcesVerticalScaling=false"]
//!   podMemoryUsage: 200Mi
//!   kubeletApi: true
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::quantity::parse_milli;

/// One hollow node: the machine the fake cAdvisor reports and the kubelet's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HollowNodeConfig {
    /// Node name.
    pub name: String,
    /// Machine cores, i.e. capacity cpu (cAdvisor reports whole cores).
    pub cpu: u32,
    /// Machine memory, i.e. capacity memory, e.g. `4Gi`.
    pub memory: String,
    /// CPU reserved for the system (kubelet `systemReserved`): allocatable = `cpu` − this.
    #[serde(default = "zero")]
    pub reserved_cpu: String,
    /// Memory reserved for the system: allocatable = `memory` − this.
    #[serde(default = "zero")]
    pub reserved_memory: String,
    /// Pod capacity (kubelet `maxPods`).
    #[serde(default = "default_pods")]
    pub pods: u32,
    /// Extra node labels (kubelet `--node-labels`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints to register with, in the kubelet's `--register-with-taints` syntax
    /// (`key[=value]:Effect`).
    #[serde(default)]
    pub taints: Vec<String>,
    /// Kubelet feature gates, `Name=true|false`.
    #[serde(default)]
    pub feature_gates: Vec<String>,
    /// Memory usage the fake cAdvisor reports for every pod; the kubelet refuses to lower a pod's
    /// memory limit to this or below.
    #[serde(default = "zero")]
    pub pod_memory_usage: String,
    /// Serve the kubelet's HTTPS API (`/metrics/resource`, `/stats`, …) on this machine's address
    /// at a free port, as the Node's status advertises it: what metrics-server scrapes.
    #[serde(default)]
    pub kubelet_api: bool,
}

fn zero() -> String {
    "0".to_owned()
}

fn default_pods() -> u32 {
    110
}

impl HollowNodeConfig {
    /// A node with `cpu` cores and `memory`, nothing reserved, 110 pods.
    pub fn new(name: &str, cpu: u32, memory: &str) -> HollowNodeConfig {
        HollowNodeConfig {
            name: name.to_owned(),
            cpu,
            memory: memory.to_owned(),
            reserved_cpu: zero(),
            reserved_memory: zero(),
            pods: default_pods(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            feature_gates: Vec::new(),
            pod_memory_usage: zero(),
            kubelet_api: false,
        }
    }

    /// The field test's t3.medium: 2 cores with 70m reserved (1930m allocatable), 4Gi with 1Gi
    /// reserved (3Gi allocatable).
    pub fn t3_medium(name: &str) -> HollowNodeConfig {
        HollowNodeConfig::new(name, 2, "4Gi").reserved("70m", "1Gi")
    }

    /// A node whose *allocatable* is `cpu` and `memory` (e.g. `1930m`, `3Gi`): the machine has
    /// `cpu` rounded up to whole cores (cAdvisor reports cores) and the difference is reserved
    /// for the system; memory capacity equals allocatable.
    pub fn with_allocatable(
        name: &str,
        cpu: &str,
        memory: &str,
    ) -> anyhow::Result<HollowNodeConfig> {
        let milli = parse_milli(cpu).with_context(|| format!("node {name}: cpu"))?;
        if milli <= 0 {
            anyhow::bail!("node {name}: cpu {cpu} must be positive");
        }
        // `parse_milli` gives millicores for cpu.
        let cores = (milli + 999) / 1000;
        let reserved = cores * 1000 - milli;
        let cores = u32::try_from(cores).with_context(|| format!("node {name}: cpu {cpu}"))?;
        Ok(HollowNodeConfig::new(name, cores, memory).reserved(&format!("{reserved}m"), "0"))
    }

    /// Sets the system reservation.
    pub fn reserved(mut self, cpu: &str, memory: &str) -> HollowNodeConfig {
        self.reserved_cpu = cpu.to_owned();
        self.reserved_memory = memory.to_owned();
        self
    }

    /// Sets the memory usage reported for every pod.
    pub fn pod_memory_usage(mut self, usage: &str) -> HollowNodeConfig {
        self.pod_memory_usage = usage.to_owned();
        self
    }

    /// Serves the kubelet's HTTPS API (for metrics-server).
    pub fn kubelet_api(mut self) -> HollowNodeConfig {
        self.kubelet_api = true;
        self
    }

    /// Sets the pod capacity.
    pub fn pods(mut self, pods: u32) -> HollowNodeConfig {
        self.pods = pods;
        self
    }

    /// Adds a node label.
    pub fn label(mut self, key: &str, value: &str) -> HollowNodeConfig {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds a taint (`key[=value]:Effect`).
    pub fn taint(mut self, taint: &str) -> HollowNodeConfig {
        self.taints.push(taint.to_owned());
        self
    }

    /// Adds a kubelet feature gate (`Name=true|false`).
    pub fn feature_gate(mut self, gate: &str) -> HollowNodeConfig {
        self.feature_gates.push(gate.to_owned());
        self
    }

    /// Checks the values before a process is started, so mistakes fail with the field's name.
    pub fn validate(&self) -> anyhow::Result<()> {
        let name = &self.name;
        if name.is_empty()
            || name.len() > 63
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        {
            anyhow::bail!(
                "hollow node name {name:?}: want a DNS-1123 name of at most 63 characters"
            );
        }
        if self.cpu == 0 {
            anyhow::bail!("hollow node {name}: cpu must be at least 1 core");
        }
        if self.pods == 0 {
            anyhow::bail!("hollow node {name}: pods must be at least 1");
        }
        for (field, value) in [
            ("memory", &self.memory),
            ("reservedCpu", &self.reserved_cpu),
            ("reservedMemory", &self.reserved_memory),
            ("podMemoryUsage", &self.pod_memory_usage),
        ] {
            let v = parse_milli(value).with_context(|| format!("hollow node {name}: {field}"))?;
            if v < 0 {
                anyhow::bail!("hollow node {name}: {field} {value} is negative");
            }
        }
        let (cpu, memory) = self.expected_allocatable()?;
        if cpu <= 0 || memory <= 0 {
            anyhow::bail!(
                "hollow node {name}: the reservation leaves no allocatable cpu or memory"
            );
        }
        let flag_values = self
            .labels
            .keys()
            .chain(&self.taints)
            .chain(&self.feature_gates);
        for s in flag_values.chain(self.labels.values()) {
            if s.contains(',') {
                anyhow::bail!("hollow node {name}: {s:?} must contain no comma");
            }
        }
        if let Some(s) = non_empty_check(self) {
            anyhow::bail!("hollow node {name}: an empty {s}");
        }
        Ok(())
    }

    /// The allocatable (millicores, milli-bytes) the kubelet should publish: capacity minus the
    /// reservation, computed here independently of the code under test.
    pub fn expected_allocatable(&self) -> anyhow::Result<(i128, i128)> {
        let cpu = i128::from(self.cpu) * 1000 - parse_milli(&self.reserved_cpu)?;
        let memory = parse_milli(&self.memory)? - parse_milli(&self.reserved_memory)?;
        Ok((cpu, memory))
    }

    /// The `hollow-node` command line (without the binary) for a work directory and kubeconfig.
    pub fn args(&self, work_dir: &Path, kubeconfig: &Path) -> Vec<String> {
        let mut args = vec![
            format!("--node-name={}", self.name),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--work-dir={}", work_dir.display()),
            format!("--cores={}", self.cpu),
            format!("--memory={}", self.memory),
            format!("--reserved-cpu={}", self.reserved_cpu),
            format!("--reserved-memory={}", self.reserved_memory),
            format!("--pod-memory-usage={}", self.pod_memory_usage),
            format!("--max-pods={}", self.pods),
        ];
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            args.push(format!("--node-labels={}", labels.join(",")));
        }
        if !self.taints.is_empty() {
            args.push(format!("--register-with-taints={}", self.taints.join(",")));
        }
        if !self.feature_gates.is_empty() {
            args.push(format!("--feature-gates={}", self.feature_gates.join(",")));
        }
        args
    }
}

fn non_empty_check(c: &HollowNodeConfig) -> Option<&'static str> {
    if c.labels.keys().any(String::is_empty) {
        Some("label key")
    } else if c.taints.iter().any(String::is_empty) {
        Some("taint")
    } else if c.feature_gates.iter().any(String::is_empty) {
        Some("feature gate")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_yaml_with_defaults_and_typos_rejected() {
        let c: HollowNodeConfig = serde_yaml_ng::from_str(
            "{name: a, cpu: 2, memory: 4Gi, reservedCpu: 70m, reservedMemory: 1Gi}",
        )
        .unwrap();
        assert_eq!(c, HollowNodeConfig::t3_medium("a"));
        assert_eq!(
            c.expected_allocatable().unwrap(),
            (1930, 3 * 1024 * 1024 * 1024 * 1000)
        );
        assert_eq!(c.pods, 110);
        let full: HollowNodeConfig = serde_yaml_ng::from_str(
            "name: b\ncpu: 4\nmemory: 8Gi\npods: 30\nlabels: {zone: b}\ntaints: [\"dedicated=batch:NoSchedule\"]\n\
             featureGates: [\"InPlacePodLevelResourcesVerticalScaling=false\"]\npodMemoryUsage: 200Mi\n",
        )
        .unwrap();
        full.validate().unwrap();
        let args = full.args(Path::new("/w"), Path::new("/k"));
        assert!(args.contains(&"--node-labels=zone=b".to_owned()));
        assert!(args.contains(&"--register-with-taints=dedicated=batch:NoSchedule".to_owned()));
        assert!(
            args.contains(
                &"--feature-gates=InPlacePodLevelResourcesVerticalScaling=false".to_owned()
            )
        );
        assert!(args.contains(&"--pod-memory-usage=200Mi".to_owned()));
        assert!(args.contains(&"--max-pods=30".to_owned()));
        let typo = serde_yaml_ng::from_str::<HollowNodeConfig>(
            "{name: a, cpu: 2, memory: 4Gi, reservedCPU: 1}",
        );
        assert!(typo.unwrap_err().to_string().contains("reservedCPU"));
    }

    #[test]
    fn validation_names_the_field() {
        let err = |c: HollowNodeConfig| c.validate().unwrap_err().to_string();
        assert!(err(HollowNodeConfig::new("a", 2, "lots")).contains("memory"));
        assert!(err(HollowNodeConfig::new("a", 0, "1Gi")).contains("cpu"));
        assert!(err(HollowNodeConfig::new("A_b", 1, "1Gi")).contains("name"));
        assert!(
            err(HollowNodeConfig::new("a", 1, "1Gi").reserved("1", "0")).contains("no allocatable")
        );
        assert!(err(HollowNodeConfig::new("a", 1, "1Gi").label("k", "a,b")).contains("comma"));
        HollowNodeConfig::t3_medium("n-1.x").validate().unwrap();
    }
}
