//! The process around a program's work: logging and the crypto provider at start, SIGTERM/SIGINT
//! as the shutdown signal, and a runtime that does not wait for stuck blocking work at exit.

/// The log filter without `RUST_LOG`: info, and kube-runtime's own warnings (a watcher's 403,
/// for one); kube-client's info lines are noise.
pub const DEFAULT_LOG_FILTER: &str = "info,kube_client=warn";

/// Sets up logging (`text` or `json`, filter from `RUST_LOG`, else [`DEFAULT_LOG_FILTER`]) and
/// installs ring as the one process-wide rustls crypto provider, chosen explicitly (kube's
/// client and our server).
pub fn init(log_format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
    if log_format == "json" {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// How long blocking work may keep a finished process alive.
pub const SHUTDOWN_LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs a program's `main` on a multi-threaded runtime and, once it returns, gives blocking work
/// still running at most [`SHUTDOWN_LINGER`] instead of waiting for it: hyper resolves host names
/// on blocking threads, and with an unreachable resolver each lookup blocks for seconds, which
/// kept a stopped process alive long after SIGTERM (`#[tokio::main]` waits for every one).
pub fn block_on<F, T>(main: F) -> anyhow::Result<T>
where
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(main);
    runtime.shutdown_timeout(SHUTDOWN_LINGER);
    result
}

/// Completes on SIGTERM (what the kubelet sends) or Ctrl-C.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
}
