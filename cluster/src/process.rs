//! What both programs do around their main loop: logging and the crypto provider at start,
//! SIGTERM/SIGINT as the shutdown signal, and the duration syntax of their flags.

use std::time::Duration;

/// Sets up logging (`text` or `json`, filter from `RUST_LOG`) and installs ring as the one
/// process-wide rustls crypto provider, chosen explicitly (kube's client and our server).
pub fn init(log_format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube_client=warn,kube_runtime=warn".into());
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

/// Parses the durations both programs take on the command line: `500ms`, `2s`, `1m` (a bare
/// number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("invalid duration unit in {s:?} (use ms, s or m)")),
    }
}
