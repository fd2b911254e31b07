//! The `kubectl-resize_guard` binary without a cluster: its version, a usage error (exit 2), and
//! exit 3 with a clear message when no cluster can be reached. Being an integration test of this
//! crate, it also makes `cargo test` build the plugin the end-to-end suites run (`tests/e2e`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

/// The plugin's exit status and everything it printed (stdout, then stderr), run with no
/// environment but `KUBECONFIG`.
fn plugin(args: &[&str], kubeconfig: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-resize_guard"))
        .args(args)
        .env_clear()
        .env("HOME", "/nonexistent")
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap();
    let mut printed = String::from_utf8_lossy(&out.stdout).into_owned();
    printed.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code(), printed)
}

#[test]
fn version_names_the_release() {
    let (code, printed) = plugin(&["--version"], "");
    assert_eq!(code, Some(0), "{printed}");
    assert!(printed.contains(env!("CARGO_PKG_VERSION")), "{printed}");
}

#[test]
fn an_unknown_command_is_a_usage_error() {
    let (code, printed) = plugin(&["resize-everything"], "");
    assert_eq!(code, Some(2), "{printed}");
    assert!(printed.contains("resize-everything"), "{printed}");
}

#[test]
fn no_cluster_exits_3_naming_the_kubeconfig() {
    let (code, printed) = plugin(&["explain", "app"], "/nonexistent/kubeconfig");
    assert_eq!(code, Some(3), "{printed}");
    assert!(printed.contains("/nonexistent/kubeconfig"), "{printed}");
    assert!(!printed.contains("panicked"), "{printed}");
}

#[test]
fn an_unknown_output_format_is_a_usage_error_naming_the_formats() {
    let (code, printed) = plugin(&["status", "-o", "xml"], "");
    assert_eq!(code, Some(2), "{printed}");
    assert!(
        printed.contains("invalid value 'xml'")
            && printed.contains("[possible values: text, wide, json, yaml]"),
        "{printed}"
    );
}

#[test]
fn the_completion_helper_hands_the_words_to_the_plugin_beside_it() {
    // As the release archive unpacks them: both files in one directory, which is not on PATH.
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl_complete-resize_guard"))
        .args(["status", "-o", ""])
        .env_clear()
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "json\tJSON, for scripts\ntext\tHuman-readable\nwide\tHuman-readable, with more \
         columns\nyaml\tYAML, for scripts\n:4\n"
    );
}
