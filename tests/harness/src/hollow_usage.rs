//! What each container of a hollow node "uses": [`UsageFile`], `usage-<node>.json` next to the
//! control-plane logs, `{"<ns>/<pod>/<container>": {"memory": "150Mi", "cpu": "200m"}}`, which the
//! node re-reads on change (`third_party/control-plane/cmd/hollow-node/usage.go`). The kubelet then
//! reports it in its CRI container stats and cAdvisor pod cgroups, so `/metrics/resource`
//! (metrics-server, [`crate::metrics_server`]) and the kubelet's own check before lowering a memory
//! limit see the same numbers; a pod with no entry keeps the node's `podMemoryUsage` for its cgroup
//! and has no container stats. Set it through [`crate::hollow_node::HollowNode::set_usage`],
//! [`crate::env::Env::usage_file`] or [`UsageFile::of`] by node name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::control_plane::ControlPlane;
use crate::quantity::parse_milli;

/// A hollow node's usage file: `{"<namespace>/<pod>/<container>": {"memory": "<quantity>",
/// "cpu": "<quantity>"}}`, re-read by the node whenever it changes (format and semantics:
/// `third_party/control-plane/cmd/hollow-node/usage.go`). Writes are atomic (a temporary file moved
/// over it) and serialised within the test binary, so tests sharing a node keep each other's
/// entries.
#[derive(Debug, Clone)]
pub struct UsageFile {
    path: PathBuf,
}

/// Serialises read-modify-write of usage files within this process.
static USAGE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl UsageFile {
    /// The usage file of node `node` of `cp` (whether or not it runs yet): `usage-<node>.json`
    /// in the control plane's directory, so it survives a restart of the node.
    pub fn of(cp: &ControlPlane, node: &str) -> UsageFile {
        UsageFile {
            path: cp.dir().join(format!("usage-{node}.json")),
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets container `namespace/pod/container`'s memory (bytes quantity) and CPU (cores
    /// quantity, a rate); both must be non-negative quantities.
    pub fn set(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        memory: &str,
        cpu: &str,
    ) -> anyhow::Result<()> {
        for (what, value) in [("memory", memory), ("cpu", cpu)] {
            let v = parse_milli(value).with_context(|| format!("usage {what} {value:?}"))?;
            anyhow::ensure!(v >= 0, "usage {what} {value} is negative");
        }
        let key = usage_key(namespace, pod, container)?;
        self.update(|entries| {
            entries.insert(key, serde_json::json!({"memory": memory, "cpu": cpu}));
        })
    }

    /// Removes container `namespace/pod/container`'s entry: it reports no container stats again.
    pub fn remove(&self, namespace: &str, pod: &str, container: &str) -> anyhow::Result<()> {
        let key = usage_key(namespace, pod, container)?;
        self.update(|entries| {
            entries.remove(&key);
        })
    }

    fn update(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, serde_json::Value>),
    ) -> anyhow::Result<()> {
        let _guard = USAGE_LOCK
            .lock()
            .map_err(|_| anyhow::anyhow!("usage file lock poisoned"))?;
        let mut entries: BTreeMap<String, serde_json::Value> = match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("usage file {}", self.path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e).with_context(|| format!("read {}", self.path.display())),
        };
        change(&mut entries);
        let tmp = self
            .path
            .with_extension(format!("json.tmp-{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&entries)?)
            .with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("rename {} to {}", tmp.display(), self.path.display()))
    }
}

fn usage_key(namespace: &str, pod: &str, container: &str) -> anyhow::Result<String> {
    for (what, name) in [
        ("namespace", namespace),
        ("pod", pod),
        ("container", container),
    ] {
        anyhow::ensure!(
            !name.is_empty() && !name.contains('/'),
            "usage {what} {name:?}: want a non-empty name without '/'"
        );
    }
    Ok(format!("{namespace}/{pod}/{container}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_file_keeps_other_entries_and_refuses_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let file = UsageFile {
            path: dir.path().join("usage-n.json"),
        };
        file.set("ns", "p", "a", "150Mi", "200m").unwrap();
        file.set("ns", "p", "b", "1Gi", "0").unwrap();
        file.set("ns", "p", "a", "300Mi", "1").unwrap();
        let read = || -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap()
        };
        assert_eq!(
            read(),
            serde_json::json!({"ns/p/a": {"memory": "300Mi", "cpu": "1"},
                               "ns/p/b": {"memory": "1Gi", "cpu": "0"}})
        );
        file.remove("ns", "p", "b").unwrap();
        assert_eq!(read().as_object().unwrap().len(), 1);
        let err = |r: anyhow::Result<()>| format!("{:#}", r.unwrap_err());
        assert!(err(file.set("ns", "p", "a", "lots", "1")).contains("memory"));
        assert!(err(file.set("ns", "p", "a", "1Mi", "-1")).contains("negative"));
        assert!(err(file.set("ns", "p/q", "a", "1Mi", "1")).contains("pod"));
        assert!(err(file.set("ns", "p", "", "1Mi", "1")).contains("container"));
        assert_eq!(
            read()["ns/p/a"]["memory"],
            "300Mi",
            "a refused value changes nothing"
        );
    }
}
