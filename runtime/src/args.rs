//! The flags both programs take, one `clap` group flattened into each program's `Args`: where
//! resize-guard runs and reads its policy, where health is served, how failing watches affect
//! readiness, and the log format. Durations use [`crate::parse_duration`] (humantime's syntax).

use std::net::SocketAddr;
use std::time::Duration;

/// Flags shared by the webhook and the controller (`#[command(flatten)]`).
///
/// `--health-addr` defaults to the webhook's `0.0.0.0:8080`; the controller moves its default to
/// `:8081` with `#[command(mut_arg(...))]`, so the two can share a host network namespace.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Plain HTTP address for `/livez`, `/readyz` and `/metrics`; `[::]` takes IPv4 and IPv6
    /// (`listener`).
    #[arg(long, env = "RESIZE_GUARD_HEALTH_ADDR", default_value = "[::]:8080")]
    pub health_addr: SocketAddr,

    /// The namespace resize-guard runs in (always excluded; holds the policy ConfigMap and the
    /// controller's Lease).
    #[arg(long, env = "POD_NAMESPACE", default_value = "resize-guard")]
    pub namespace: String,

    /// Name of the policy ConfigMap (key `policy.yaml`).
    #[arg(
        long,
        env = "RESIZE_GUARD_POLICY_CONFIGMAP",
        default_value = "resize-guard"
    )]
    pub policy_configmap: String,

    /// How long a watch of the cluster view (pods, nodes, PodDisruptionBudgets, the policy
    /// ConfigMap) may keep failing before `/readyz` fails, naming it.
    #[arg(long, env = "RESIZE_GUARD_WATCH_UNHEALTHY_AFTER", default_value = "60s", value_parser = crate::parse_duration)]
    pub watch_unhealthy_after: Duration,

    /// How the pod and node watches get their first state: `streaming` (a streaming list,
    /// falling back to pages where the API server refuses one) or `paged` (paged LISTs only).
    #[arg(long, env = "RESIZE_GUARD_INITIAL_LIST", value_enum, default_value_t = InitialList::Streaming)]
    pub initial_list: InitialList,

    /// Log format.
    #[arg(long, env = "RESIZE_GUARD_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// How a watch of many objects asks for its first state (`--initial-list`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialList {
    /// A streaming list (`sendInitialEvents`), falling back to pages where the API server
    /// refuses one.
    #[default]
    Streaming,
    /// Paged LISTs only.
    Paged,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Program {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[derive(Debug, Parser)]
    #[command(mut_arg("health_addr", |a| a.default_value("[::]:8081")))]
    struct OtherPort {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn defaults_are_production_values() {
        let a = Program::try_parse_from(["p"]).unwrap().common;
        assert_eq!(a.health_addr.port(), 8080);
        assert_eq!(a.namespace, "resize-guard");
        assert_eq!(a.policy_configmap, "resize-guard");
        assert_eq!(a.watch_unhealthy_after, Duration::from_secs(60));
        assert_eq!(a.log_format, "text");
        assert_eq!(a.initial_list, InitialList::Streaming);
    }

    #[test]
    fn the_initial_list_is_streaming_or_paged() {
        let a = Program::try_parse_from(["p", "--initial-list=paged"]).unwrap();
        assert_eq!(a.common.initial_list, InitialList::Paged);
        assert!(Program::try_parse_from(["p", "--initial-list=all-at-once"]).is_err());
    }

    #[test]
    fn a_program_can_move_the_health_port_default() {
        let a = OtherPort::try_parse_from(["p"]).unwrap().common;
        assert_eq!(a.health_addr.port(), 8081);
        let given = OtherPort::try_parse_from(["p", "--health-addr=127.0.0.1:9"]).unwrap();
        assert_eq!(given.common.health_addr.port(), 9);
    }

    #[test]
    fn the_watch_threshold_takes_a_duration_and_the_log_format_is_checked() {
        let a = Program::try_parse_from(["p", "--watch-unhealthy-after=2m"]).unwrap();
        assert_eq!(a.common.watch_unhealthy_after, Duration::from_secs(120));
        assert!(Program::try_parse_from(["p", "--watch-unhealthy-after=soon"]).is_err());
        assert!(Program::try_parse_from(["p", "--log-format=xml"]).is_err());
    }
}
