//! Where the upstream binaries are: kube-apiserver, kube-scheduler, kube-controller-manager,
//! kubectl, etcd and hollow-node
//! (upstream's kubelet via kubemark's library, `third_party/control-plane/cmd/hollow-node`), all of
//! one Kubernetes minor (`RESIZE_GUARD_K8S_VERSION`: 1.33 … 1.37, default 1.37), built from Go
//! modules by `third_party/control-plane/build.sh`.
//!
//! Lookup order: `RESIZE_GUARD_K8S_BIN_DIR` (a directory holding all six, like
//! `KUBEBUILDER_ASSETS`), then the build script's stamp cache `k8s-v<minor>-current` under
//! `$RESIZE_GUARD_CACHE_DIR` (default `$HOME/.cache/resize-guard`). A missing binary is an error
//! that says how to build it — tests never skip silently.
//! [`crate::control_plane::ControlPlane::start`] checks that the API server it started is the minor
//! asked for.

use std::path::{Path, PathBuf};

use anyhow::Context;

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

/// Environment variable picking the Kubernetes minor, as `third_party/control-plane/build.sh` reads
/// it: `1.35`, `v1.35` or `1.35.4`.
pub const VERSION_ENV: &str = "RESIZE_GUARD_K8S_VERSION";

/// The minors the build script can build, oldest first (`third_party/control-plane/module.sh`).
pub const MINORS: [u32; 5] = [33, 34, 35, 36, 37];

/// The minor used when [`VERSION_ENV`] is unset.
pub const DEFAULT_MINOR: u32 = 37;

/// The Kubernetes minor asked for through [`VERSION_ENV`] (the `N` of `1.N`), or
/// [`DEFAULT_MINOR`].
pub fn requested_minor() -> anyhow::Result<u32> {
    match std::env::var(VERSION_ENV) {
        Ok(v) if !v.trim().is_empty() => parse_minor(&v)
            .filter(|m| MINORS.contains(m))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{VERSION_ENV}={v}: expected one of 1.33, 1.34, 1.35, 1.36, 1.37 (a leading v and a patch are accepted)"
                )
            }),
        _ => Ok(DEFAULT_MINOR),
    }
}

/// The minor of `1.N`, `v1.N`, `1.N.P` or `v1.N.P`.
pub fn parse_minor(version: &str) -> Option<u32> {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    let mut parts = v.split('.');
    if parts.next()? != "1" {
        return None;
    }
    let minor = parts.next()?.parse().ok()?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(minor),
        (Some(p), None) if p.parse::<u32>().is_ok() => Some(minor),
        _ => None,
    }
}

/// The path in `$<env>` if set, else `<cache root>/<cached>`: where an upstream part's build
/// script (`third_party/<part>/build.sh`) keeps its newest build. The cache root is the build
/// scripts' own (`third_party/stamp-cache.sh`): `$RESIZE_GUARD_CACHE_DIR`, else
/// `$HOME/.cache/resize-guard`.
pub fn cached_path(env: &str, cached: &str) -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Ok(PathBuf::from(p));
    }
    let root = match std::env::var_os("RESIZE_GUARD_CACHE_DIR") {
        Some(root) => PathBuf::from(root),
        None => PathBuf::from(
            std::env::var_os("HOME")
                .with_context(|| format!("{env}, RESIZE_GUARD_CACHE_DIR and HOME unset"))?,
        )
        .join(".cache/resize-guard"),
    };
    Ok(root.join(cached))
}

impl Binaries {
    /// Finds the binaries, or explains how to get them.
    pub fn locate() -> anyhow::Result<Binaries> {
        let minor = requested_minor()?;
        Binaries::in_dir(&cached_path(
            BIN_DIR_ENV,
            &format!("k8s-v1.{minor}-current"),
        )?)
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
                     `third_party/control-plane/build.sh` (first run ~10 min; {VERSION_ENV} picks the minor) or point {BIN_DIR_ENV} \
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

#[cfg(test)]
mod tests {
    use super::parse_minor;

    #[test]
    fn minors_parse_like_the_build_script() {
        for (v, want) in [
            ("1.35", Some(35)),
            ("v1.35", Some(35)),
            ("1.35.4", Some(35)),
            ("v1.33.13", Some(33)),
            (" 1.37 ", Some(37)),
            ("2.1", None),
            ("1", None),
            ("1.x", None),
            ("1.35.4.1", None),
            ("1.35.x", None),
        ] {
            assert_eq!(parse_minor(v), want, "{v}");
        }
    }
}
