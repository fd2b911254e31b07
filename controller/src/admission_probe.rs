//! The admission probe: is resize-guard's webhook still in the admission path? With
//! `failurePolicy: Ignore` an unreachable webhook (a wrong caBundle, a NetworkPolicy, a wrong
//! port, no ready pods) lets every resize through unjudged, and only the API server's own
//! metrics would say so — metrics a managed control plane may not let anyone scrape. So each
//! controller replica asks the API server itself, every `--admission-probe-interval` (jittered,
//! one probe at a time): a server-side dry-run resize of its own pod that changes nothing
//! ([`request`]). The webhook configurations call resize-guard for exactly that request (their
//! `probe.resize-guard.io` entry: a dry run by resize-guard's own ServiceAccount in its own
//! namespace), and the webhook answers it with a warning naming itself
//! (`resize_guard_policy::admission_probe`). Admitted with the warning: reached; admitted without
//! it: bypassed — resizes fail open; anything else: an error, with its reason ([`outcome`]).
//!
//! [`findings`] turns outcomes into `resize_guard_admission_probe_total{result}`,
//! `resize_guard_admission_probe_bypassed`, a note on `/readyz`, log lines and a Warning Event.
//! `/readyz` stays 200 for it (`ok (degraded: …)`): the controller itself still works, and
//! failing readiness would only stall its own rollouts (the fix often is one) and make its
//! PodDisruptionBudget block node drains, without bringing the webhook back.
//!
//! `resize-guard-controller probe` ([`once`]) sends the same probe once, or until it reaches the
//! webhook within `--wait`, and exits by its outcome: the post-install check
//! (charts/resize-guard/templates/tests/, deploy/post-install-check/) runs it as its own
//! ServiceAccount, resize-guard-check.
//!
//! The RBAC it needs is `patch pods/resize` in resize-guard's namespace only
//! (deploy/base/rbac-controller.yaml), and ValidatingAdmissionPolicy resize-guard-admission-probe
//! (deploy/base/controller-writes.yaml) refuses either account any resize there that is not a
//! dry run.

pub mod findings;
pub mod outcome;
pub mod request;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use resize_guard_runtime::{Events, parse_duration};

use self::findings::Findings;
use self::outcome::Outcome;

/// The flags of the admission probe.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// How often this replica probes whether resizes reach the webhook (a dry-run resize of its
    /// own pod through the API server), jittered by up to a fifth; 0s turns the probe off.
    #[arg(
        long = "admission-probe-interval",
        env = "RESIZE_GUARD_ADMISSION_PROBE_INTERVAL",
        default_value = "60s",
        value_parser = parse_duration
    )]
    pub interval: Duration,

    /// The pod the probe resizes (as a dry run: nothing changes), in `--namespace`: this
    /// replica's own, from the downward API. Without one there is no probe.
    #[arg(long = "admission-probe-pod", env = "POD_NAME")]
    pub pod: Option<String>,

    /// How long one probe may wait for the API server's answer.
    #[arg(
        long = "admission-probe-timeout",
        env = "RESIZE_GUARD_ADMISSION_PROBE_TIMEOUT",
        default_value = "15s",
        value_parser = parse_duration
    )]
    pub timeout: Duration,
}

/// `resize-guard-controller probe`'s own flags.
#[derive(Debug, Clone, clap::Args)]
pub struct OnceArgs {
    /// Probe again (every 2s) until a probe reaches the webhook or this long has passed: a fresh
    /// install's webhook configuration takes a few seconds to be picked up.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub wait: Duration,
}

/// How long [`once`] waits between attempts.
const RETRY: Duration = Duration::from_secs(2);

/// Exit status of `probe` when the probe bypassed the webhook (an error exits 1, as any other).
pub const EXIT_BYPASSED: u8 = 3;

impl ProbeArgs {
    /// The pod to probe, or why there is no probe (`Ok(None)`: turned off; `Err`: a bad name).
    pub fn target(&self) -> Result<Option<&str>, String> {
        if self.interval.is_zero() {
            return Ok(None);
        }
        self.pod_name().map(Some)
    }

    /// The pod named by `--admission-probe-pod` / `POD_NAME`, checked.
    pub fn pod_name(&self) -> Result<&str, String> {
        let Some(pod) = self.pod.as_deref() else {
            return Err("no pod to probe: set --admission-probe-pod (or POD_NAME from the downward API, as deploy/ does)".to_owned());
        };
        if !request::valid_pod_name(pod) {
            return Err(format!(
                "--admission-probe-pod {pod:?} is not a pod name (a DNS-1123 subdomain)"
            ));
        }
        Ok(pod)
    }
}

/// Starts the probe loop of this replica, unless it is turned off (`--admission-probe-interval
/// 0s`) or has no pod to probe (said in the log); returns its findings for `/readyz`. The loop
/// ends when `stopped` completes.
pub fn start(
    client: kube::Client,
    namespace: &str,
    args: &ProbeArgs,
    events: Events,
    exposition: &resize_guard_runtime::exposition::Exposition,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> Option<Arc<Findings>> {
    if args.interval.is_zero() {
        tracing::info!("admission probe off (--admission-probe-interval=0s)");
        return None;
    }
    let pod = match args.pod_name() {
        Ok(p) => p.to_owned(),
        Err(why) => {
            tracing::warn!("admission probe off: {why}");
            return None;
        }
    };
    let findings = Arc::new(Findings::new(&format!("{namespace}/{pod}"), exposition));
    tracing::info!(pod = %format!("{namespace}/{pod}"), interval = ?args.interval,
        "admission probe: a dry-run resize of this pod through the API server, every interval");
    let (ns, interval, timeout) = (namespace.to_owned(), args.interval, args.timeout);
    let f = findings.clone();
    tokio::spawn(async move {
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                () = &mut stopped => return,
                () = tokio::time::sleep(jittered(interval)) => {}
            }
            let probed = tokio::select! {
                () = &mut stopped => return,
                p = request::probe(&client, &ns, &pod, timeout) => p,
            };
            if let Some(event) = f.record(probed.outcome, probed.pod) {
                events.record(event);
            }
        }
    });
    Some(findings)
}

/// `interval`, plus up to a fifth of it at random (apimachinery's `wait.Jitter(interval, 0.2)`),
/// so replicas started together do not probe together.
fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(1.0 + 0.2 * resize_guard_runtime::jitter::fraction())
}

/// `resize-guard-controller probe`: probes pod `pod` in `namespace` once, or every 2s until a
/// probe reaches the webhook or `wait` has passed; prints the outcome and exits 0 when reached,
/// [`EXIT_BYPASSED`] when bypassed, 1 on an error.
pub async fn once(
    client: kube::Client,
    namespace: &str,
    args: &ProbeArgs,
    wait: Duration,
) -> anyhow::Result<ExitCode> {
    let pod = args.pod_name().map_err(anyhow::Error::msg)?;
    let deadline = Instant::now() + wait;
    loop {
        let probed = request::probe(&client, namespace, pod, args.timeout).await;
        let last_try = Instant::now() + RETRY > deadline;
        match probed.outcome {
            Outcome::Reached(a) => {
                println!(
                    "admission probe reached resize-guard: webhook replica {} answered a dry-run resize of pod {namespace}/{pod} at /{}",
                    a.replica, a.stage
                );
                return Ok(ExitCode::SUCCESS);
            }
            Outcome::Bypassed if last_try => {
                println!(
                    "admission probe bypassed resize-guard: the API server admitted a dry-run resize of pod {namespace}/{pod} without its webhook (failurePolicy Ignore, or no webhook configuration calls it): resizes are not being judged"
                );
                return Ok(ExitCode::from(EXIT_BYPASSED));
            }
            Outcome::Error(why) if last_try => {
                anyhow::bail!("admission probe of pod {namespace}/{pod} failed: {why}");
            }
            other => {
                eprintln!(
                    "admission probe {}; trying again in {RETRY:?}",
                    match &other {
                        Outcome::Error(why) => format!("failed: {why}"),
                        _ => "bypassed the webhook".to_owned(),
                    }
                );
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct P {
        #[command(flatten)]
        probe: ProbeArgs,
    }

    #[test]
    fn on_every_minute_by_default_off_at_zero_and_a_bad_pod_is_refused() {
        let a = P::try_parse_from(["p", "--admission-probe-pod=c-0"])
            .unwrap()
            .probe;
        assert_eq!(a.interval, Duration::from_secs(60));
        assert_eq!(a.timeout, Duration::from_secs(15));
        assert_eq!(a.target(), Ok(Some("c-0")));
        let off = P::try_parse_from([
            "p",
            "--admission-probe-interval=0s",
            "--admission-probe-pod=c-0",
        ])
        .unwrap()
        .probe;
        assert_eq!(off.target(), Ok(None));
        let bad = P::try_parse_from(["p", "--admission-probe-pod=../secrets"])
            .unwrap()
            .probe;
        assert!(bad.target().unwrap_err().contains("not a pod name"));
        assert!(P::try_parse_from(["p", "--admission-probe-interval=60"]).is_err());
    }

    #[test]
    fn jitter_adds_up_to_a_fifth() {
        let i = Duration::from_secs(60);
        for _ in 0..100 {
            let j = jittered(i);
            assert!(j >= i && j < Duration::from_secs(72), "{j:?}");
        }
    }
}
