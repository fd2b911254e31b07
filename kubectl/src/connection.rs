//! A client built the way kubectl builds one: the kubeconfig from `--kubeconfig`, `$KUBECONFIG`
//! or `~/.kube/config`, the context from `--context` or the current one, and the namespace from
//! `-n` or the context.

use anyhow::Context as _;
use kube::Client;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};

use crate::args::Global;

/// A connected client and the namespace commands default to.
#[derive(Clone)]
pub struct Connection {
    /// The client.
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// `--install-namespace`.
    pub install_namespace: String,
}

impl Connection {
    /// Connects as `global` says.
    pub async fn open(global: &Global) -> anyhow::Result<Connection> {
        let options = KubeConfigOptions {
            context: global.context.clone(),
            ..Default::default()
        };
        let config = match &global.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => Config::from_kubeconfig(&options).await,
        }
        .context("loading kubeconfig")?;
        let namespace = global
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).context("building the Kubernetes client")?;
        Ok(Connection {
            client,
            namespace,
            install_namespace: global.install_namespace.clone(),
        })
    }
}
