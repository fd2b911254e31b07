//! `kubectl-resize_guard`: run as `kubectl resize-guard …` (see the library docs). Exit
//! statuses: `resize_guard_kubectl::exit::Exit` (clap exits 2 on a usage error itself). Run as
//! `kubectl_complete-resize_guard`, or with `__complete` first, it answers kubectl's shell
//! completion instead (`resize_guard_kubectl::completion`).

use std::future::Future;

use clap::Parser;
use resize_guard_kubectl::args::Cli;
use resize_guard_kubectl::completion;
use resize_guard_kubectl::exit::Exit;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let code = match completion::requested(&args) {
        Some((words, descriptions)) => {
            block_on(async move { completion::run(&words, descriptions).await })
        }
        None => {
            let cli = Cli::parse_from(args);
            block_on(resize_guard_kubectl::run(cli))
        }
    };
    std::process::exit(code);
}

/// Runs `work` on a single-threaded runtime and returns its exit status.
fn block_on(work: impl Future<Output = i32>) -> i32 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(work),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            Exit::Cluster.code()
        }
    }
}
