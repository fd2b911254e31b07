//! Command-line and environment configuration of the controller: the flags it shares with the
//! webhook ([`CommonArgs`], health on `:8081` here) plus leader election and certificates.

use std::time::Duration;

use clap::Parser;
use resize_guard_runtime::{CommonArgs, parse_duration};

/// The certificate manager's flags, kept at this path.
pub use crate::certificates::{CertificateArgs, CertificateMode};

/// resize-guard preemption controller.
#[derive(Debug, Clone, Parser)]
#[command(name = "resize-guard-controller", version)]
#[command(mut_arg("health_addr", |a| a.default_value("[::]:8081")))]
pub struct Args {
    /// Namespace, policy ConfigMap, health address, watch threshold, log format.
    #[command(flatten)]
    pub common: CommonArgs,

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

    /// How long the leader keeps retrying a failed renewal before it steps down (and stops every
    /// write); shorter than the lease duration. Default: 2/3 of the lease duration.
    #[arg(long, env = "RESIZE_GUARD_RENEW_DEADLINE", value_parser = parse_duration)]
    pub renew_deadline: Option<Duration>,

    /// How often the leader renews (and, jittered, followers retry).
    #[arg(long, alias = "renew-interval", env = "RESIZE_GUARD_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,

    /// This replica's identity in the Lease (defaults to the host name).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// The webhook's serving certificate and the configurations' caBundle.
    #[command(flatten)]
    pub certificates: CertificateArgs,

    /// Whether resizes still reach the webhook (`crate::admission_probe`).
    #[command(flatten)]
    pub admission_probe: crate::admission_probe::ProbeArgs,

    /// Instead of running the controller: `probe` sends the admission probe once and exits by
    /// its outcome.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Test-only (feature `testing`, never in a release build): panic the reconcile loop or a
    /// watch task on a named object, `reconcile=<pod>`, `watch-pods=<pod>`, `watch-nodes=<node>`
    /// (`resize_guard_runtime::fault`).
    #[cfg(feature = "testing")]
    #[arg(long, hide = true)]
    pub inject_panic: Vec<String>,
}

/// What to run instead of the controller.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Send the admission probe (a dry-run resize of `--admission-probe-pod` in `--namespace`)
    /// and exit: 0 when it reached the webhook, 3 when the API server admitted it without the
    /// webhook, 1 on an error.
    Probe(crate::admission_probe::OnceArgs),
}

impl Args {
    /// The leader-election durations, checked as client-go checks them.
    pub fn lease_timing(&self) -> Result<crate::lease::elector::Timing, String> {
        let deadline = self
            .renew_deadline
            .unwrap_or_else(|| self.lease_duration.mul_f64(2.0 / 3.0));
        crate::lease::elector::Timing::new(self.lease_duration, deadline, self.retry_period)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_serves_health_on_8081_unlike_the_webhook() {
        let a = Args::try_parse_from(["resize-guard-controller"])
            .unwrap()
            .common;
        assert_eq!(a.health_addr.to_string(), "[::]:8081");
        assert_eq!(a.namespace, "resize-guard");
    }

    #[test]
    fn probe_is_a_subcommand_and_the_probe_flags_are_the_controllers() {
        let a = Args::try_parse_from(["resize-guard-controller"]).unwrap();
        assert!(a.command.is_none());
        let a = Args::try_parse_from([
            "resize-guard-controller",
            "--admission-probe-pod=check-x",
            "probe",
            "--wait=2m",
        ])
        .unwrap();
        assert_eq!(a.admission_probe.pod.as_deref(), Some("check-x"));
        match a.command {
            Some(Command::Probe(o)) => assert_eq!(o.wait, Duration::from_secs(120)),
            other => panic!("{other:?}"),
        }
        assert!(Args::try_parse_from(["resize-guard-controller", "probes"]).is_err());
    }

    #[test]
    fn certificates_are_self_managed_by_default() {
        let a = Args::try_parse_from(["resize-guard-controller"]).unwrap();
        let c = a.certificates;
        assert_eq!(c.mode, CertificateMode::SelfManaged);
        assert_eq!(c.webhook_service, "resize-guard-webhook");
        assert_eq!(c.webhook_configuration, "resize-guard");
        assert_eq!(c.tls_secret, "resize-guard-webhook-tls");
        assert_eq!(c.ca_secret, "resize-guard-ca");
        assert_eq!(c.leaf_validity, Duration::from_secs(2160 * 3600));
        assert_eq!(c.ca_validity, Duration::from_secs(87_600 * 3600));
        assert_eq!(c.ca_overlap, Duration::from_secs(3600));
        assert_eq!(c.cert_check_interval, Duration::from_secs(30));
        assert!(c.serving_hosts.is_empty());
    }

    #[test]
    fn serving_hosts_repeat_and_external_mode_parses() {
        let a = Args::try_parse_from([
            "resize-guard-controller",
            "--certificates=external",
            "--serving-host=127.0.0.1",
            "--serving-host",
            "hook.example",
            "--leaf-validity=30s",
        ])
        .unwrap();
        assert_eq!(a.certificates.mode, CertificateMode::External);
        assert_eq!(
            a.certificates.serving_hosts,
            vec!["127.0.0.1".to_owned(), "hook.example".to_owned()]
        );
        assert_eq!(a.certificates.leaf_validity, Duration::from_secs(30));
        assert!(Args::try_parse_from(["x", "--certificates=cert-manager"]).is_err());
    }

    #[test]
    fn lease_timing_defaults_to_client_gos_and_scales_with_the_lease() {
        let a = Args::try_parse_from(["resize-guard-controller"]).unwrap();
        let t = a.lease_timing().unwrap();
        assert_eq!(
            (t.lease_duration, t.renew_deadline, t.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        let short =
            Args::try_parse_from(["x", "--lease-duration=4s", "--renew-interval=1s"]).unwrap();
        let t = short.lease_timing().unwrap();
        assert_eq!(t.retry_period, Duration::from_secs(1));
        assert!(t.renew_deadline < t.lease_duration);
        let bad =
            Args::try_parse_from(["x", "--lease-duration=10s", "--renew-deadline=12s"]).unwrap();
        assert!(bad.lease_timing().unwrap_err().contains("renew deadline"));
    }
}
