//! The `kubectl-resize_guard` binary without a cluster: its version, a usage error (exit 2), and
//! exit 3 with a clear message when no cluster can be reached. Being an integration test of this
//! crate, it also makes `cargo test` build the plugin the end-to-end suites run (`tests/e2e`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Command, Output};

fn plugin(args: &[&str], kubeconfig: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-resize_guard"))
        .args(args)
        .env_clear()
        .env("HOME", "/nonexistent")
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn version_names_the_release() {
    let out = plugin(&["--version"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(env!("CARGO_PKG_VERSION")),
        "{}",
        text(&out)
    );
}

#[test]
fn an_unknown_command_is_a_usage_error() {
    let out = plugin(&["resize-everything"], "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("resize-everything"), "{}", text(&out));
}

#[test]
fn no_cluster_exits_3_naming_the_kubeconfig() {
    let out = plugin(&["explain", "app"], "/nonexistent/kubeconfig");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("/nonexistent/kubeconfig"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
}
