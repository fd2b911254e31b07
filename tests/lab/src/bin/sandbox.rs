//! `resize-guard-sandbox FILE`: starts a real control plane and hollow nodes, prints how to
//! use them with kubectl, and runs until Ctrl-C.

use std::path::PathBuf;

use clap::Parser;
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::hollow_node::{HollowNode, UsageFile};
use resize_guard_harness::metrics_server::MetricsServer;
use resize_guard_harness::real_node::{self, RealNode};
use resize_guard_lab::sandbox::SandboxConfig;

/// Start a local Kubernetes v1.37.2 control plane with hollow nodes (upstream's kubelet).
#[derive(Debug, Parser)]
struct Args {
    /// Sandbox file (nodes, scheduler, feature gates).
    #[arg(default_value = "tests/lab/sandbox.yaml")]
    config: PathBuf,
    /// Also start a real node (kubelet, kube-proxy, containerd, runc; tests/node/README.md), with
    /// kube-controller-manager; needs root and the node's binaries (`make sandbox REAL_NODE=1`).
    #[arg(long)]
    real_node: bool,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    let cfg = SandboxConfig::load(&args.config)?;
    eprintln!("starting etcd and kube-apiserver …");
    let mut real = args.real_node.then(RealNode::prepare).transpose()?;
    let cp = ControlPlane::start(&Options {
        feature_gates: cfg.feature_gates.clone(),
        real_node_host: real.as_ref().map(|_| real_node::HOST.to_owned()),
    })?;
    if real.is_some() {
        cp.start_controller_manager()?;
    }
    if cfg.scheduler {
        let gates: Vec<&str> = cfg.feature_gates.iter().map(String::as_str).collect();
        cp.start_scheduler(&gates)?;
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        // The PriorityClasses the harness's environments have (the example pod names `high`).
        let client = cp.client().await?;
        for (name, value) in resize_guard_harness::env::PRIORITY_CLASSES {
            resize_guard_harness::objects::priority_class(&client, name, value, false).await?;
        }
        let nodes = HollowNode::start_all(&cp, &cfg.nodes).await?;
        let metrics = if cfg.metrics_server {
            eprintln!("starting metrics-server …");
            Some(MetricsServer::start(&cp).await?)
        } else {
            None
        };
        if let Some(node) = real.as_mut() {
            let ready = node.start(&cp).await?;
            println!(
                "real node {} Ready in {} ms (pods run {}; logs in {})",
                real_node::NAME,
                ready.as_millis(),
                real_node::PAUSE_IMAGE,
                node.work().join("logs").display()
            );
        }
        let kubectl = cp.binaries().kubectl.display().to_string();
        let kc = cp.kubeconfig_path().display().to_string();
        let node = &cfg.nodes[0].name;
        println!(
            "\nresize-guard sandbox is up ({} node(s){}).\n\n\
             export KUBECONFIG={kc}\n\
             alias kubectl={kubectl}\n\n\
             kubectl get nodes\n\
             kubectl apply -f - <<EOF\n\
             {{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"app\"}},\"spec\":{{\"nodeName\":\"{node}\",\"priorityClassName\":\"high\",\n  \
             \"containers\":[{{\"name\":\"app\",\"image\":\"registry.example/app:1\",\"resources\":{{\"requests\":{{\"cpu\":\"250m\",\"memory\":\"64Mi\"}},\"limits\":{{\"cpu\":\"250m\",\"memory\":\"64Mi\"}}}}}}]}}}}\n\
             EOF\n\
             kubectl patch pod app --subresource resize -p '{{\"spec\":{{\"containers\":[{{\"name\":\"app\",\"resources\":{{\"requests\":{{\"cpu\":\"550m\"}},\"limits\":{{\"cpu\":\"550m\"}}}}}}]}}}}'\n\
             kubectl get pod app -o jsonpath='{{.status.conditions}}'\n\
             kubectl events --for pod/app\n{}\n\
             Logs and audit log: {}\nPress Ctrl-C to stop (the control plane goes with it).",
            cfg.nodes.len(),
            if cfg.scheduler { ", kube-scheduler" } else { "" },
            usage_hint(&cp, &cfg, metrics.is_some()),
            cp.dir().display()
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        eprintln!("stopping …");
        drop(metrics);
        for n in nodes {
            n.stop();
        }
        anyhow::Ok(())
    })?;
    drop(cp);
    if let Some(node) = real {
        node.stop()?;
    }
    Ok(())
}

/// How to make a container use memory and see it with `kubectl top`, when metrics-server runs.
fn usage_hint(cp: &ControlPlane, cfg: &SandboxConfig, metrics: bool) -> String {
    let Some(node) = cfg.nodes.iter().find(|n| n.kubelet_api).filter(|_| metrics) else {
        return String::new();
    };
    let file = UsageFile::of(cp, &node.name);
    format!(
        "\n# metrics-server scrapes {node}'s kubelet; a pod there uses what its usage file says\n\
         # (re-read on change; metrics.k8s.io shows it 10-20 s later):\n\
         echo '{{\"default/app/app\": {{\"memory\": \"150Mi\", \"cpu\": \"200m\"}}}}' > {}\n\
         kubectl top pod app\n",
        file.path().display(),
        node = node.name
    )
}
