//! `resize-guard-controller`: see the library documentation.

use clap::Parser;
use resize_guard_controller::args::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube_client=warn,kube_runtime=warn".into());
    if args.log_format == "json" {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    resize_guard_controller::run::run(args).await
}
