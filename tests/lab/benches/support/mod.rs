//! What the controller's end-to-end benches share: resize-guard (in process) and upstream
//! kube-scheduler's alpha preemption on one control plane, each kept away from the other's pods —
//! resize-guard's policy excludes the upstream namespace; resize-guard's pods use a
//! `schedulerName` kube-scheduler does not serve.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use resize_guard_harness::env::Env;
use resize_guard_harness::install::{apply_rbac, set_policy};

/// The controller running in this process.
pub struct Embedded {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Embedded {
    /// Stops the controller and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// An admin client built as the programs build theirs (`resize_guard_runtime::api_client` on
/// the harness's `program_config`: no read timeout on quiet watches).
pub async fn program_client(env: &Env) -> kube::Client {
    let config = env
        .cp
        .program_config(resize_guard_harness::control_plane::Identity::Admin)
        .await
        .expect("admin kubeconfig");
    resize_guard_runtime::api_client::build(config).expect("admin client")
}

/// Installs resize-guard with `policy` plus an exclusion of `upstream_ns` (created here), and
/// starts the controller in process as admin.
pub async fn side_by_side(env: &'static Env, upstream_ns: &str, policy: &str) -> Embedded {
    apply_rbac(env).await;
    set_policy(
        env,
        &format!("{policy}namespaces:\n  exclude: [kube-system, {upstream_ns}]\n"),
    )
    .await;
    let client = program_client(env).await;
    let args = <resize_guard_controller::args::Args as clap::Parser>::parse_from([
        "resize-guard-controller",
        &format!(
            "--health-addr=127.0.0.1:{}",
            resize_guard_harness::process::free_port().unwrap()
        ),
        "--identity=bench",
    ]);
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(resize_guard_controller::run::serve(
        args,
        client.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let mut ns = Namespace::default();
    ns.metadata.name = Some(upstream_ns.to_owned());
    let _ = Api::<Namespace>::all(client)
        .create(&PostParams::default(), &ns)
        .await;
    Embedded { stop, task }
}
