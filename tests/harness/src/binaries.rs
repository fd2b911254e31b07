//! Where the upstream binaries are: kube-apiserver, kube-scheduler, kube-controller-manager,
//! kubectl, etcd and hollow-node
//! (upstream's kubelet through kubemark's library, `tests/control-plane/cmd/hollow-node`), all
//! v1.37.2, built from Go modules by `scripts/build-control-plane.sh`.
//!
//! Lookup order: `RESIZE_GUARD_K8S_BIN_DIR` (a directory holding all six, like
//! `KUBEBUILDER_ASSETS`), then the build script's stamp cache `$HOME/.cache/resize-guard/k8s-current`.
//! A missing binary is an error that says how to build it — tests never skip silently.

use std::path::{Path, PathBuf};

/// The six binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// kube-apiserver.
    pub apiserver: PathBuf,
    /// kube-scheduler.
    pub scheduler: PathBuf,
    /// kube-controller-manager.
    pub controller_manager: PathBuf,
    /// kubectl.
    pub kubectl: PathBuf,
    /// etcd.
    pub etcd: PathBuf,
    /// hollow-node: upstream's kubelet with fakes at the runtime boundary
    /// ([`crate::hollow_node`]).
    pub hollow_node: PathBuf,
}

/// Environment variable naming a directory of prebuilt binaries.
pub const BIN_DIR_ENV: &str = "RESIZE_GUARD_K8S_BIN_DIR";

impl Binaries {
    /// Finds the binaries, or explains how to get them.
    pub fn locate() -> anyhow::Result<Binaries> {
        let dir = match std::env::var_os(BIN_DIR_ENV) {
            Some(d) => PathBuf::from(d),
            None => {
                let home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_default();
                home.join(".cache/resize-guard/k8s-current")
            }
        };
        Binaries::in_dir(&dir)
    }

    /// The binaries in one directory.
    pub fn in_dir(dir: &Path) -> anyhow::Result<Binaries> {
        let pick = |name: &str| -> anyhow::Result<PathBuf> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                anyhow::bail!(
                    "control-plane binary {name} not found in {} — build them with \
                     `scripts/build-control-plane.sh` (first run ~20 min) or point {BIN_DIR_ENV} \
                     at a directory holding kube-apiserver, kube-scheduler, \
                     kube-controller-manager, kubectl, etcd and hollow-node",
                    dir.display()
                )
            }
        };
        Ok(Binaries {
            apiserver: pick("kube-apiserver")?,
            scheduler: pick("kube-scheduler")?,
            controller_manager: pick("kube-controller-manager")?,
            kubectl: pick("kubectl")?,
            etcd: pick("etcd")?,
            hollow_node: pick("hollow-node")?,
        })
    }
}
