//! `kubectl-resize_guard`: run as `kubectl resize-guard …` (see the library docs). Exit
//! statuses: `resize_guard_kubectl::exit::Exit` (clap exits 2 on a usage error itself).

use clap::Parser;
use resize_guard_kubectl::args::Cli;
use resize_guard_kubectl::exit::Exit;

fn main() {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let code = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(resize_guard_kubectl::run(cli)),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            Exit::Cluster.code()
        }
    };
    std::process::exit(code);
}
