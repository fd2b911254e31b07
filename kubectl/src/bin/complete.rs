//! `kubectl_complete-resize_guard`: the completion executable kubectl (v1.26+) runs from `PATH`
//! to complete `kubectl resize-guard …` (k8s.io/kubectl `pkg/cmd/plugin/plugin_completion.go`).
//! It only hands the words to the plugin: `kubectl-resize_guard __complete WORDS…`, found beside
//! this file (as the release archive unpacks them), else on `PATH`; the plugin answers
//! (`resize_guard_kubectl::completion`). Kept to the standard library so it stays small.
//!
//! When the plugin cannot be found or run, it prints no candidate and the directive kubectl reads
//! as "no file names" (`:4`), and says why on stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugin's file name on this platform.
fn plugin_name() -> String {
    format!("kubectl-resize_guard{}", std::env::consts::EXE_SUFFIX)
}

/// The plugin: beside this executable (not following a link to it), else the first on `PATH`.
fn find_plugin() -> Option<PathBuf> {
    let name = plugin_name();
    let beside = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .filter(|p| p.components().count() > 1)
        .and_then(|p| p.parent().map(|d| d.join(&name)));
    let current = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(&name)));
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(&name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    beside
        .into_iter()
        .chain(current)
        .chain(on_path)
        .find(|p| is_file(p))
}

fn is_file(p: &Path) -> bool {
    p.metadata().is_ok_and(|m| m.is_file())
}

fn main() {
    let words: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some(plugin) = find_plugin() else {
        eprintln!(
            "kubectl_complete-resize_guard: {} is neither beside this file nor on PATH",
            plugin_name()
        );
        println!(":4");
        return;
    };
    let mut cmd = Command::new(&plugin);
    cmd.arg("__complete").args(words);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        // Replaces this process: the plugin's output and exit status are kubectl's answer.
        let e = cmd.exec();
        eprintln!(
            "kubectl_complete-resize_guard: cannot run {}: {e}",
            plugin.display()
        );
        println!(":4");
    }
    #[cfg(not(unix))]
    match cmd.status() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => {
            eprintln!(
                "kubectl_complete-resize_guard: cannot run {}: {e}",
                plugin.display()
            );
            println!(":4");
        }
    }
}
