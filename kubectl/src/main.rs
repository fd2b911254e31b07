//! `kubectl-resize_guard`: run as `kubectl resize-guard …` (see the library docs).

use clap::Parser;
use resize_guard_kubectl::args::Cli;

fn main() {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let code = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt
            .block_on(resize_guard_kubectl::run(cli))
            .unwrap_or_else(|e| {
                eprintln!("error: {e:#}");
                1
            }),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            1
        }
    };
    std::process::exit(code);
}
