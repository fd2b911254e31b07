//! The sandbox: a real control plane and hollow nodes (upstream's kubelet, see
//! [`resize_guard_harness::hollow_node`]) from a small YAML file, for trying resizes by hand with
//! the built `kubectl`.
//!
//! ```yaml
//! nodes:                      # HollowNodeConfig: machine cores and memory, minus reservations
//!   - {name: node-a, cpu: 2, memory: 4Gi, reservedCpu: 70m, reservedMemory: 1Gi}
//! scheduler: false            # start kube-scheduler v1.37.2
//! metricsServer: false        # start metrics-server v0.8.0 (needs a node with kubeletApi: true)
//! featureGates: []            # kube-apiserver (and scheduler) gates
//! ```

use std::path::Path;

use serde::Deserialize;

use resize_guard_harness::hollow_node::HollowNodeConfig;

/// The sandbox file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxConfig {
    /// Hollow nodes.
    pub nodes: Vec<HollowNodeConfig>,
    /// Start kube-scheduler.
    #[serde(default)]
    pub scheduler: bool,
    /// Start metrics-server ([`resize_guard_harness::metrics_server`]), scraping the nodes with
    /// `kubeletApi`.
    #[serde(default)]
    pub metrics_server: bool,
    /// Feature gates for kube-apiserver and kube-scheduler.
    #[serde(default)]
    pub feature_gates: Vec<String>,
}

impl SandboxConfig {
    /// Reads and validates a sandbox file.
    pub fn load(path: &Path) -> anyhow::Result<SandboxConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let cfg: SandboxConfig = serde_yaml_ng::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if cfg.nodes.is_empty() {
            anyhow::bail!("{}: at least one node is needed", path.display());
        }
        for n in &cfg.nodes {
            n.validate()
                .map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
        }
        if cfg.metrics_server && !cfg.nodes.iter().any(|n| n.kubelet_api) {
            anyhow::bail!(
                "{}: metricsServer: true needs a node with kubeletApi: true to scrape",
                path.display()
            );
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_default_file_and_rejects_typos() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.yaml");
        std::fs::write(
            &p,
            "nodes:\n- {name: a, cpu: 2, memory: 4Gi, reservedCpu: 70m}\nscheduler: true\n",
        )
        .unwrap();
        let c = SandboxConfig::load(&p).unwrap();
        assert_eq!(c.nodes[0].expected_allocatable().unwrap().0, 1930);
        assert!(c.scheduler);
        std::fs::write(&p, "nodes:\n- {name: a, cpu: 1, memory: 1Gi, gpu: 1}\n").unwrap();
        assert!(
            SandboxConfig::load(&p)
                .unwrap_err()
                .to_string()
                .contains("gpu")
        );
        std::fs::write(&p, "nodes: []\n").unwrap();
        assert!(SandboxConfig::load(&p).is_err());
        std::fs::write(
            &p,
            "nodes:\n- {name: a, cpu: 1, memory: 1Gi}\nmetricsServer: true\n",
        )
        .unwrap();
        let e = SandboxConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("kubeletApi: true"), "{e}");
        std::fs::write(
            &p,
            "nodes:\n- {name: a, cpu: 1, memory: 1Gi, kubeletApi: true}\nmetricsServer: true\n",
        )
        .unwrap();
        assert!(SandboxConfig::load(&p).unwrap().metrics_server);
    }
}
