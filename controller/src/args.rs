//! Command-line and environment configuration of the controller.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

/// resize-guard preemption controller.
#[derive(Debug, Clone, Parser)]
#[command(name = "resize-guard-controller", version)]
pub struct Args {
    /// Plain HTTP address for `/livez`, `/readyz` and `/metrics`.
    #[arg(long, env = "RESIZE_GUARD_HEALTH_ADDR", default_value = "0.0.0.0:8081")]
    pub health_addr: SocketAddr,

    /// The namespace resize-guard runs in (policy ConfigMap, Lease; always excluded).
    #[arg(long, env = "POD_NAMESPACE", default_value = "resize-guard")]
    pub namespace: String,

    /// Name of the policy ConfigMap (key `policy.yaml`).
    #[arg(
        long,
        env = "RESIZE_GUARD_POLICY_CONFIGMAP",
        default_value = "resize-guard"
    )]
    pub policy_configmap: String,

    /// Name of the leader-election Lease.
    #[arg(
        long,
        env = "RESIZE_GUARD_LEASE",
        default_value = "resize-guard-controller"
    )]
    pub lease_name: String,

    /// Lease duration: a follower takes over this long after the leader stops renewing.
    #[arg(long, env = "RESIZE_GUARD_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,

    /// How often the leader renews (and followers retry).
    #[arg(long, env = "RESIZE_GUARD_RENEW_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    pub renew_interval: Duration,

    /// This replica's identity in the Lease (defaults to the host name).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// Log format.
    #[arg(long, env = "RESIZE_GUARD_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

pub use resize_guard_cluster::parse_duration;
