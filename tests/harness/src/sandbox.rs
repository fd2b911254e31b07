//! The sandbox: a real control plane and simulated nodes from a small YAML file, for trying
//! resizes by hand with the built `kubectl`.
//!
//! ```yaml
//! nodes:
//!   - {name: node-a, cpu: 1930m, memory: 3Gi}
//! scheduler: false            # start kube-scheduler v1.37.2
//! featureGates: []            # kube-apiserver (and scheduler) gates
//! timeScale: 0.05             # grace periods × this
//! ```

use std::path::Path;

use serde::Deserialize;

use crate::kubelet::NodeConfig;

/// The sandbox file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxConfig {
    /// Simulated nodes.
    pub nodes: Vec<NodeConfig>,
    /// Start kube-scheduler.
    #[serde(default)]
    pub scheduler: bool,
    /// Feature gates for kube-apiserver and kube-scheduler.
    #[serde(default)]
    pub feature_gates: Vec<String>,
    /// Grace-period multiplier for the simulated kubelet.
    #[serde(default = "default_scale")]
    pub time_scale: f64,
}

fn default_scale() -> f64 {
    0.05
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
        if cfg.time_scale.is_nan() || cfg.time_scale <= 0.0 {
            anyhow::bail!("{}: timeScale must be positive", path.display());
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
            "nodes:\n- {name: a, cpu: 1930m, memory: 3Gi}\nscheduler: true\n",
        )
        .unwrap();
        let c = SandboxConfig::load(&p).unwrap();
        assert_eq!(c.nodes[0].cpu, "1930m");
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
    }
}
