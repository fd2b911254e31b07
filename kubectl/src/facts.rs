//! What the plugin reads from the cluster, one request each (no watches, no caches): the pod,
//! its node's ledger, the PodDisruptionBudgets, resize-guard's policy, the Kubernetes minor, the
//! controller's Lease and a pod's Events. Everything is `get`/`list`; a read the caller's RBAC
//! forbids becomes a stated assumption ([`Judge::notes`]), not a failure, where the answer can
//! still be given.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use resize_guard_policy::Context;
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::policy::{POLICY_KEY, Policy};
use resize_guard_policy::usage::{Evidence, PodUsage, pod_metrics_path};
use resize_guard_policy::version::KubernetesVersion;

use crate::connection::Connection;

/// The policy ConfigMap's name and key (docs/src/reference/policy.md).
pub const POLICY_CONFIGMAP: &str = "resize-guard";
/// The controller's copy of the last policy that parsed
/// (`resize_guard_cluster::view::last_good_name` of [`POLICY_CONFIGMAP`]), which both programs run
/// on when the ConfigMap does not parse.
pub const LAST_GOOD_CONFIGMAP: &str = "resize-guard-last-good";
/// The controller's leader Lease (its `--lease-name` default).
pub const CONTROLLER_LEASE: &str = "resize-guard-controller";

/// Everything a decision reads besides the pod and its node: the same inputs the webhook and
/// the controller give `resize_guard_policy::classify`/`assess`.
pub struct Judge {
    /// The policy in force (or the defaults, with a note saying why).
    pub policy: Policy,
    /// PodDisruptionBudgets.
    pub budgets: Budgets,
    /// The cluster's version, if readable.
    pub version: Option<KubernetesVersion>,
    /// resize-guard's namespace.
    pub install_namespace: String,
    /// Assumptions made because something could not be read.
    pub notes: Vec<String>,
}

impl Judge {
    /// Reads the policy, the budgets and the version.
    pub async fn load(conn: &Connection) -> Judge {
        let mut notes = Vec::new();
        let why = match policy(conn).await {
            Ok(Some(p)) => Ok(p),
            Ok(None) => Err(format!(
                "ConfigMap {}/{POLICY_CONFIGMAP} not found",
                conn.install_namespace
            )),
            Err(e) => Err(format!("{e:#}")),
        };
        // As both programs choose (`resize_guard_cluster::policy_source`): the ConfigMap, else
        // the controller's last good copy, else none — never the defaults by omission.
        let policy = match why {
            Ok(p) => p,
            Err(why) => match last_good(conn).await {
                Some(p) => {
                    notes.push(format!(
                        "{why}: judged with the last good copy (ConfigMap {}/{LAST_GOOD_CONFIGMAP}), as both programs do",
                        conn.install_namespace
                    ));
                    p
                }
                None => {
                    notes.push(format!(
                        "{why} and no last good copy: both programs judge nothing; shown is what the default policy (mode: enforce) would do"
                    ));
                    Policy::default()
                }
            },
        };
        let budgets = match list_pages(
            &Api::<PodDisruptionBudget>::all(conn.client.clone()),
            ListParams::default(),
            |_| true,
        )
        .await
        {
            Ok(list) => Budgets::new(list.iter()),
            Err(e) => {
                notes.push(format!(
                    "PodDisruptionBudgets could not be listed ({e}): judged as if there were none"
                ));
                Budgets::default()
            }
        };
        let version = match conn.client.apiserver_version().await {
            Ok(info) => KubernetesVersion::parse(&info.major, &info.minor, &info.git_version),
            Err(e) => {
                notes.push(format!(
                    "the API server's version could not be read ({e}): judged by the newest rules"
                ));
                None
            }
        };
        Judge {
            policy,
            budgets,
            version,
            install_namespace: conn.install_namespace.clone(),
            notes,
        }
    }

    /// The decision context for a pod on `ledger`.
    pub fn context<'a>(&'a self, ledger: Option<&'a NodeLedger>) -> Context<'a> {
        Context {
            ledger,
            budgets: &self.budgets,
            policy: &self.policy,
            install_namespace: &self.install_namespace,
            minor: self.version.as_ref().map(|v| v.minor),
        }
    }
}

/// The names of `pod`'s containers, then its init containers (sidecars among them).
pub fn container_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .map(|c| c.name.clone())
        .collect()
}

/// The policy from its ConfigMap: `None` when there is no ConfigMap; an error when it does not
/// parse (with the parser's line-precise message).
pub async fn policy(conn: &Connection) -> anyhow::Result<Option<Policy>> {
    let api: Api<ConfigMap> = Api::namespaced(conn.client.clone(), &conn.install_namespace);
    let Some(cm) = api.get_opt(POLICY_CONFIGMAP).await.with_context(|| {
        format!(
            "reading ConfigMap {}/{POLICY_CONFIGMAP}",
            conn.install_namespace
        )
    })?
    else {
        return Ok(None);
    };
    Policy::from_config_map(cm.data.as_ref())
        .map(Some)
        .with_context(|| {
            format!(
                "ConfigMap {}/{POLICY_CONFIGMAP} key {POLICY_KEY} does not parse",
                conn.install_namespace
            )
        })
}

/// The controller's last good copy of the policy, when it exists, is readable and parses.
async fn last_good(conn: &Connection) -> Option<Policy> {
    let api: Api<ConfigMap> = Api::namespaced(conn.client.clone(), &conn.install_namespace);
    let cm = api.get_opt(LAST_GOOD_CONFIGMAP).await.ok()??;
    Policy::from_config_map(cm.data.as_ref()).ok()
}

/// Objects per page of a LIST (kubectl's `--chunk-size` default).
const PAGE: u32 = 500;

/// Every object `params` selects, read in pages of [`PAGE`] as kubectl does, keeping those
/// `keep` accepts (a large cluster is never held in memory whole).
pub async fn list_pages<K>(
    api: &Api<K>,
    params: ListParams,
    keep: impl Fn(&K) -> bool,
) -> Result<Vec<K>, kube::Error>
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut out = Vec::new();
    let mut params = params.limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items.into_iter().filter(|k| keep(k)));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// A pod by namespace and name, with a kubectl-like error when it does not exist.
pub async fn pod(conn: &Connection, namespace: &str, name: &str) -> anyhow::Result<Pod> {
    Api::<Pod>::namespaced(conn.client.clone(), namespace)
        .get_opt(name)
        .await
        .with_context(|| format!("reading pod {namespace}/{name}"))?
        .with_context(|| format!("pods \"{name}\" not found in namespace {namespace}"))
}

/// Pod `namespace/name`'s memory usage from `metrics.k8s.io` (metrics-server), as the webhook
/// reads it for the memory rule; a failure is the reason, never a usage.
pub async fn usage(conn: &Connection, namespace: &str, name: &str) -> Evidence {
    let path = pod_metrics_path(namespace, name);
    let request = match http::Request::get(&path).body(Vec::new()) {
        Ok(r) => r,
        Err(e) => return Evidence::Unavailable(format!("could not build the request: {e}")),
    };
    let read = tokio::time::timeout(Duration::from_secs(5), conn.client.request_text(request));
    match read.await {
        Ok(Ok(body)) => match PodUsage::from_pod_metrics(body.as_bytes(), Timestamp::now()) {
            Ok(u) => Evidence::Measured(u),
            Err(e) => Evidence::Unavailable(format!("metrics.k8s.io: {e}")),
        },
        Ok(Err(e)) => Evidence::Unavailable(format!("metrics.k8s.io: {e}")),
        Err(_) => Evidence::Unavailable("metrics.k8s.io did not answer within 5 s".to_owned()),
    }
}

/// The ledger of `node`: its allocatable and every pod bound to it.
pub async fn ledger(conn: &Connection, node: &str) -> anyhow::Result<Option<NodeLedger>> {
    let Some(n) = Api::<Node>::all(conn.client.clone())
        .get_opt(node)
        .await
        .with_context(|| format!("reading node {node}"))?
    else {
        return Ok(None);
    };
    let pods = list_pages(
        &Api::<Pod>::all(conn.client.clone()),
        ListParams::default().fields(&format!("spec.nodeName={node}")),
        |_| true,
    )
    .await
    .with_context(|| format!("listing the pods on node {node}"))?;
    Ok(Some(NodeLedger::new(&n, pods.iter())))
}

/// The ledger of the node `pod` is bound to; `None` for an unbound pod or an unknown node.
pub async fn pod_ledger(conn: &Connection, pod: &Pod) -> anyhow::Result<Option<NodeLedger>> {
    match resize_guard_policy::pod::node_name(pod) {
        Some(node) => ledger(conn, node).await,
        None => Ok(None),
    }
}

/// The Events about a pod (core/v1, as `kubectl events --for pod/NAME` lists them), oldest
/// first.
pub async fn events(conn: &Connection, pod: &Pod) -> anyhow::Result<Vec<Event>> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let mut fields = format!("involvedObject.kind=Pod,involvedObject.name={name}");
    if let Some(uid) = pod.metadata.uid.as_deref() {
        fields.push_str(&format!(",involvedObject.uid={uid}"));
    }
    let mut list = Api::<Event>::namespaced(conn.client.clone(), ns)
        .list(&ListParams::default().fields(&fields))
        .await
        .with_context(|| format!("listing the Events of pod {ns}/{name}"))?
        .items;
    list.sort_by_key(event_time);
    Ok(list)
}

/// When an Event last happened: its series, last timestamp, event time or creation.
pub fn event_time(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or_else(|| e.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Who holds the controller's Lease and how fresh it is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeaseState {
    /// `holderIdentity`, if set.
    pub holder: Option<String>,
    /// Time since `renewTime`.
    pub renewed_ago: Option<Duration>,
    /// `leaseDurationSeconds`.
    pub duration: Option<Duration>,
}

impl LeaseState {
    /// Reads `lease` at `now`.
    pub fn of(lease: &Lease, now: Timestamp) -> LeaseState {
        let spec = lease.spec.as_ref();
        LeaseState {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renewed_ago: spec
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| ago(t.0, now)),
            duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0))),
        }
    }

    /// A holder whose renewal is within the lease duration: a leader is acting.
    pub fn is_held(&self) -> bool {
        match (&self.holder, self.renewed_ago, self.duration) {
            (Some(_), Some(ago), Some(d)) => ago <= d,
            _ => false,
        }
    }
}

/// The controller's Lease, if it exists.
pub async fn lease(conn: &Connection) -> anyhow::Result<Option<Lease>> {
    Api::<Lease>::namespaced(conn.client.clone(), &conn.install_namespace)
        .get_opt(CONTROLLER_LEASE)
        .await
        .with_context(|| {
            format!(
                "reading Lease {}/{CONTROLLER_LEASE}",
                conn.install_namespace
            )
        })
}

/// `now - then`, zero when `then` is in the future (clock skew).
pub fn ago(then: Timestamp, now: Timestamp) -> Duration {
    now.duration_since(then)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

/// A pod argument as kubectl takes it: `NAME`, `pod/NAME` or `pods/NAME` (the namespace comes
/// from `-n`).
pub fn pod_name(arg: &str) -> anyhow::Result<&str> {
    let name = arg
        .strip_prefix("pod/")
        .or_else(|| arg.strip_prefix("pods/"))
        .unwrap_or(arg);
    anyhow::ensure!(
        !name.is_empty() && !name.contains('/'),
        "{arg:?} is not a pod name: pass NAME or pod/NAME, and the namespace with -n"
    );
    Ok(name)
}

/// Splits `NAMESPACE/NAME`.
pub fn split_name(arg: &str) -> anyhow::Result<(&str, &str)> {
    match arg.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => Ok((ns, n)),
        _ => anyhow::bail!("{arg:?} is not NAMESPACE/NAME"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    #[test]
    fn a_lease_is_held_while_its_holder_renews_within_the_duration() {
        let now = Timestamp::from_second(1_000).unwrap();
        let lease = |holder: Option<&str>, renewed: i64| Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
                lease_duration_seconds: Some(15),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(LeaseState::of(&lease(Some("c-1"), 990), now).is_held());
        let stale = LeaseState::of(&lease(Some("c-1"), 900), now);
        assert!(!stale.is_held());
        assert_eq!(stale.renewed_ago, Some(Duration::from_secs(100)));
        assert!(!LeaseState::of(&lease(None, 999), now).is_held());
        assert!(!LeaseState::of(&lease(Some(""), 999), now).is_held());
    }

    #[test]
    fn names_are_taken_like_kubectl_takes_them() {
        assert_eq!(pod_name("web").unwrap(), "web");
        assert_eq!(pod_name("pod/web").unwrap(), "web");
        assert_eq!(pod_name("pods/web").unwrap(), "web");
        assert!(pod_name("shop/web").is_err());
        assert!(pod_name("").is_err());
        assert_eq!(split_name("shop/web").unwrap(), ("shop", "web"));
        assert!(split_name("web").is_err());
    }
}
