//! Webhook replicas behind the shipped Service, without a kubelet: each replica is a local
//! `resize-guard-webhook` process serving on this machine's address, published in an
//! EndpointSlice of `resize-guard/resize-guard-webhook` as the EndpointSlice controller would
//! publish its pod. kube-apiserver (run with `--enable-aggregator-routing`, as the harness runs
//! it) then calls a ready endpoint of the Service, verifying the certificate for the Service's
//! DNS name — exactly the path a cluster install takes. A replica runs as the harness's webhook
//! identity in `resize-guard`, or as a real ServiceAccount of another install namespace
//! ([`crate::account::Account`]).

use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use serde_json::json;

use crate::account::Account;
use crate::control_plane::Identity;
use crate::env::Env;
use crate::install::{spawn_as_service_account, wait_ready};
use crate::objects::force_apply;
use crate::process::{Process, free_port};

const NS: &str = "resize-guard";

/// One webhook replica: a process and the EndpointSlice that publishes it.
#[derive(Debug)]
pub struct Replica {
    /// Its name (log file, EndpointSlice suffix, `--instance`).
    pub name: String,
    /// The process.
    pub process: Process,
    /// Its TLS port on [`host_ip`].
    pub port: u16,
    /// Its health port on 127.0.0.1.
    pub health: u16,
    /// The namespace of the Service it is published under.
    pub namespace: String,
}

/// This machine's first non-loopback IPv4 address: EndpointSlices refuse loopback addresses, so
/// replicas serve on it (the API server verifies their certificate against the Service's DNS
/// name, not the address).
pub fn host_ip() -> anyhow::Result<String> {
    let out = std::process::Command::new("hostname").arg("-I").output()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|a| {
            a.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .map(str::to_owned)
        .ok_or_else(|| {
            anyhow::anyhow!("no non-loopback IPv4 address to publish in an EndpointSlice")
        })
}

impl Replica {
    /// Starts `webhook` (the binary) as its ServiceAccount, serving on [`host_ip`], reading its
    /// certificate from the serving Secret the controller keeps.
    pub fn start(env: &Env, webhook: &str, name: &str) -> anyhow::Result<Replica> {
        Replica::start_as(env, webhook, name, None)
    }

    /// [`Replica::start`], as `account` (None: the harness's webhook identity in `resize-guard`).
    pub fn start_as(
        env: &Env,
        webhook: &str,
        name: &str,
        account: Option<&Account>,
    ) -> anyhow::Result<Replica> {
        let (port, health) = (free_port()?, free_port()?);
        let ip = host_ip()?;
        let namespace = account.map_or(NS, |a| a.namespace.as_str()).to_owned();
        let args = [
            format!("--tls-addr={ip}:{port}"),
            format!("--health-addr=127.0.0.1:{health}"),
            format!("--namespace={namespace}"),
            format!("--instance={name}"),
        ];
        let process = match account {
            None => spawn_as_service_account(env, Identity::Webhook, webhook, name, &args),
            Some(a) => {
                crate::install::spawn_with_kubeconfig(env, &a.kubeconfig, webhook, name, &args)
            }
        };
        Ok(Replica {
            name: name.to_owned(),
            process,
            port,
            health,
            namespace,
        })
    }

    /// Starts a replica and publishes it once ready.
    pub async fn bring_up(
        env: &Env,
        webhook: &str,
        name: &str,
        timeout: Duration,
    ) -> anyhow::Result<Replica> {
        Replica::bring_up_as(env, webhook, name, None, timeout).await
    }

    /// [`Replica::bring_up`], as `account` (None: the harness's webhook identity).
    pub async fn bring_up_as(
        env: &Env,
        webhook: &str,
        name: &str,
        account: Option<&Account>,
        timeout: Duration,
    ) -> anyhow::Result<Replica> {
        let replica = Replica::start_as(env, webhook, name, account)?;
        wait_ready(replica.health, &replica.process, timeout).await;
        replica.publish(env, true, false).await?;
        Ok(replica)
    }

    fn slice_name(&self) -> String {
        format!("resize-guard-webhook-{}", self.name)
    }

    /// Publishes (or updates) the replica's EndpointSlice, as the EndpointSlice controller would
    /// for its pod: `ready` while the pod is ready and not terminating.
    pub async fn publish(&self, env: &Env, ready: bool, terminating: bool) -> anyhow::Result<()> {
        let api: Api<EndpointSlice> = Api::namespaced(env.client().await, &self.namespace);
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": self.slice_name(), "namespace": self.namespace,
                "labels": {"kubernetes.io/service-name": "resize-guard-webhook",
                           "endpointslice.kubernetes.io/managed-by": "resize-guard-harness"}},
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [host_ip()?],
                "conditions": {"ready": ready, "serving": !terminating || ready, "terminating": terminating}}],
        });
        force_apply(&api, &self.slice_name(), "resize-guard-harness", &slice).await?;
        Ok(())
    }

    /// Removes the replica's EndpointSlice.
    pub async fn unpublish(&self, env: &Env) -> anyhow::Result<()> {
        let api: Api<EndpointSlice> = Api::namespaced(env.client().await, &self.namespace);
        api.delete(&self.slice_name(), &Default::default()).await?;
        Ok(())
    }
}
