//! Running resize-guard's programs as a real ServiceAccount of any install namespace: a token
//! from the TokenRequest API (`kubectl create token`) in a kubeconfig of its own, as a pod's
//! projected token would authenticate it; RBAC then judges the namespace's own bindings.

use std::path::PathBuf;

use crate::env::Env;
use crate::install::spawn_with_kubeconfig;
use crate::process::{Process, free_port};

/// Who a program runs as: a ServiceAccount of `namespace`, through `kubeconfig` (a file holding
/// one of its tokens).
#[derive(Debug, Clone)]
pub struct Account {
    /// The install namespace (`--namespace`).
    pub namespace: String,
    /// The kubeconfig file the process reads.
    pub kubeconfig: PathBuf,
}

impl Account {
    /// ServiceAccount `namespace/name`, with a fresh 2-hour token.
    pub async fn of(env: &Env, namespace: &str, name: &str) -> anyhow::Result<Account> {
        let out = env
            .kubectl()
            .run(["create", "token", name, "-n", namespace, "--duration=2h"])
            .await?;
        anyhow::ensure!(
            out.success,
            "kubectl create token {name} -n {namespace}: {}",
            out.stderr
        );
        Ok(Account {
            namespace: namespace.to_owned(),
            kubeconfig: token_kubeconfig(env, &format!("{namespace}-{name}"), out.stdout.trim())?,
        })
    }

    /// Starts the controller binary `bin` as this account in its namespace (health on a free
    /// loopback port, Lease identity `name`), with `extra` flags; its log is `<name>.log`.
    pub fn spawn_controller(
        &self,
        env: &Env,
        bin: &str,
        name: &str,
        extra: &[&str],
    ) -> anyhow::Result<Process> {
        let mut args = vec![
            format!("--health-addr=127.0.0.1:{}", free_port()?),
            format!("--namespace={}", self.namespace),
            format!("--identity={name}"),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        Ok(spawn_with_kubeconfig(
            env,
            &self.kubeconfig,
            bin,
            name,
            &args,
        ))
    }
}

/// Writes a kubeconfig for the harness's API server that authenticates with `token`, into
/// the control plane's directory as `<name>.kubeconfig`.
pub fn token_kubeconfig(env: &Env, name: &str, token: &str) -> anyhow::Result<PathBuf> {
    token_kubeconfig_of(&env.cp, name, token)
}

/// [`token_kubeconfig`] for control plane `cp`.
pub fn token_kubeconfig_of(
    cp: &crate::control_plane::ControlPlane,
    name: &str,
    token: &str,
) -> anyhow::Result<PathBuf> {
    let path = cp.dir().join(format!("{name}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: harness\n  cluster:\n    server: {}\n    \
             insecure-skip-tls-verify: true\nusers:\n- name: {name}\n  user:\n    token: {token}\n\
             contexts:\n- name: harness\n  context:\n    cluster: harness\n    user: {name}\n\
             current-context: harness\n",
            cp.url()
        ),
    )?;
    Ok(path)
}
