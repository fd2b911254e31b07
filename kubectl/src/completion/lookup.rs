//! The names completion offers from outside the command line: contexts, clusters and users from
//! the kubeconfig (a local read), and namespaces, pods and a pod's containers from the cluster.
//! The cluster is read as the command would read it — the kubeconfig, `--context`, `--as`, `-n`
//! typed so far — with `list`/`get` only (pods as metadata, no specs but the one pod a
//! container is completed for), and at most [`TIMEOUT`] in all (or `--request-timeout`, when
//! given): a shell waits for completion, so a cluster that does not answer gives no names
//! rather than a hung prompt.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;

use crate::args::{Global, RequestTimeout};
use crate::connection::{Connection, Source};

/// The longest completion waits for the cluster when `--request-timeout` is not given.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// What to name from the kubeconfig.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeconfigNames {
    /// `contexts[].name`.
    Contexts,
    /// `clusters[].name`.
    Clusters,
    /// `users[].name`.
    Users,
}

/// The names of `what` in the kubeconfig `global` selects (merged as the command merges it).
pub fn kubeconfig_names(global: &Global, what: KubeconfigNames) -> anyhow::Result<Vec<String>> {
    let source = Source::pick(
        global.kubeconfig.as_ref(),
        std::env::var_os("KUBECONFIG").as_deref(),
    );
    let config = source.read()?;
    Ok(match what {
        KubeconfigNames::Contexts => config.contexts.into_iter().map(|c| c.name).collect(),
        KubeconfigNames::Clusters => config.clusters.into_iter().map(|c| c.name).collect(),
        KubeconfigNames::Users => config.auth_infos.into_iter().map(|u| u.name).collect(),
    })
}

/// What to name from the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterNames {
    /// Every namespace.
    Namespaces,
    /// The pods of the namespace (`None`: the one `-n` or the context names); `running` only
    /// those in phase Running.
    Pods {
        /// The namespace, when not the command's.
        namespace: Option<String>,
        /// Only running pods.
        running: bool,
    },
    /// The containers (regular, then init and sidecar) of a pod in the command's namespace.
    Containers {
        /// The pod.
        pod: String,
    },
}

/// The names of `what`, read with `global`'s connection within the time allowed.
pub async fn cluster_names(global: &Global, what: &ClusterNames) -> anyhow::Result<Vec<String>> {
    let limit = global.request_timeout.0.unwrap_or(TIMEOUT);
    let mut global = global.clone();
    global.request_timeout = RequestTimeout(Some(limit));
    match tokio::time::timeout(limit, read(&global, what)).await {
        Ok(names) => names,
        Err(_) => anyhow::bail!("the cluster did not answer within {limit:?}"),
    }
}

async fn read(global: &Global, what: &ClusterNames) -> anyhow::Result<Vec<String>> {
    let conn = Connection::open(global).await?;
    let names = |list: Vec<PartialObjectMeta<Pod>>| -> Vec<String> {
        list.into_iter().filter_map(|p| p.metadata.name).collect()
    };
    Ok(match what {
        ClusterNames::Namespaces => {
            let api: Api<Namespace> = Api::all(conn.client.clone());
            let mut out = Vec::new();
            for page in pages(&api, ListParams::default()).await? {
                out.extend(page.into_iter().filter_map(|n| n.metadata.name));
            }
            out
        }
        ClusterNames::Pods { namespace, running } => {
            let ns = namespace.as_deref().unwrap_or(&conn.namespace);
            let api: Api<Pod> = Api::namespaced(conn.client.clone(), ns);
            let params = if *running {
                ListParams::default().fields("status.phase=Running")
            } else {
                ListParams::default()
            };
            pages(&api, params)
                .await?
                .into_iter()
                .flat_map(names)
                .collect()
        }
        ClusterNames::Containers { pod } => {
            let name = crate::facts::pod_name(pod)?;
            let p = crate::facts::pod(&conn, &conn.namespace, name).await?;
            crate::facts::container_names(&p)
        }
    })
}

/// Every page of `api`'s objects as metadata (names are all completion needs).
async fn pages<K>(
    api: &Api<K>,
    params: ListParams,
) -> Result<Vec<Vec<PartialObjectMeta<K>>>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut params = params.limit(500);
    loop {
        let page = api.list_metadata(&params).await?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        out.push(page.items);
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}
