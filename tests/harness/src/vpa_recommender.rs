//! The real `vpa-recommender` of VPA v1.6.0 as its own ServiceAccount ([`Recommender`]), part of
//! [`crate::vpa`]: VPA's CRDs and RBAC applied as shipped, a TokenRequest kubeconfig, one of the
//! flag presets of [`super::intervals`], its log searched by tests. It reads usage from
//! `metrics.k8s.io` (so it recommends only where [`crate::metrics_server`] runs; otherwise it logs
//! [`super::RECOMMENDER_NO_METRICS_LOG`] every loop) and writes each VPA's
//! `status.recommendation` itself.

use std::time::Duration;

use super::{
    RECOMMENDER_ACCOUNT, RECOMMENDER_SYNCED_LOG, VpaBinaries, VpaIntervals, account_kubeconfig,
    apply_crds, apply_rbac, poll, read_log, spawn, wait_log,
};
use crate::control_plane::ControlPlane;
use crate::process::{Process, free_port};

/// The running `vpa-recommender`. Dropping it stops it.
#[derive(Debug)]
pub struct Recommender {
    process: Process,
    args: Vec<String>,
}

impl Recommender {
    /// Applies VPA's CRDs and [`RBAC_FILE`], gets a 2-hour token of ServiceAccount
    /// `kube-system/`[`RECOMMENDER_ACCOUNT`] from the TokenRequest API into a kubeconfig of its
    /// own, and starts `vpa-recommender` with it and the flags of `intervals` (then `extra_args`;
    /// a repeated flag's last value wins), logging at `--v=4` to `vpa-recommender.log` in the
    /// control plane's directory. Returns once its informers have synced
    /// ([`RECOMMENDER_SYNCED_LOG`]); its first loop follows one `--recommender-interval` later.
    /// It needs neither the updater nor the admission controller.
    pub async fn start(
        cp: &ControlPlane,
        intervals: VpaIntervals,
        extra_args: &[String],
    ) -> anyhow::Result<Recommender> {
        let binaries = VpaBinaries::locate()?;
        let client = cp.client().await?;
        apply_crds(&client, &binaries.crd).await?;
        apply_rbac(&client, &binaries.rbac).await?;
        let kubeconfig = account_kubeconfig(cp, &client, RECOMMENDER_ACCOUNT).await?;

        let port = free_port()?;
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--address=127.0.0.1:{port}"),
            "--v=4".to_owned(),
        ];
        args.extend(intervals.recommender().args());
        args.extend(extra_args.iter().cloned());
        let mut process = spawn(cp, "vpa-recommender", &binaries.recommender, &args)?;
        // Its metrics listener opens first; the informers (pods, VPAs, checkpoints, the targets'
        // controllers) sync after, and only with the RBAC above.
        let synced = poll("vpa-recommender synced", Duration::from_secs(60), || {
            anyhow::ensure!(process.is_running(), "vpa-recommender exited");
            anyhow::ensure!(
                read_log(&process).contains(RECOMMENDER_SYNCED_LOG),
                "not yet"
            );
            Ok(())
        })
        .await;
        if let Err(e) = synced {
            let tail = process.log_tail(6000);
            process.stop(Duration::from_secs(5));
            anyhow::bail!("{e:#}\n{tail}");
        }
        Ok(Recommender { process, args })
    }

    /// The flags it runs with.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Its whole log so far.
    pub fn log(&self) -> String {
        read_log(&self.process)
    }

    /// Waits until its log contains `needle`.
    pub async fn wait_log(&self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        wait_log(&self.process, needle, timeout).await
    }

    /// The tail of its log, for a failing test's output.
    pub fn dump_log(&self) -> String {
        format!(
            "--- vpa-recommender ({}) ---\n{}\n",
            self.process.log_path().display(),
            self.process.log_tail(6000)
        )
    }

    /// Stops it (SIGTERM, SIGKILL after 5 s).
    pub fn stop(&mut self) {
        self.process.stop(Duration::from_secs(5));
    }
}

impl Drop for Recommender {
    fn drop(&mut self) {
        self.stop();
    }
}
