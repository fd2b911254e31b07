//! The `resize-guard-controller` binary without a cluster: its version, its flags, a clear usage
//! error for a bad value, and a clear failure (no panic) when no cluster can be reached. Being an
//! integration test of this crate, it also makes `cargo test` build the binary the end-to-end
//! suites run (`tests/e2e`), with the `testing` feature they need.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Command, Output};

fn controller(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resize-guard-controller"))
        .args(args)
        .env_clear()
        .env("HOME", "/nonexistent")
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
fn version_and_help_name_the_program_and_its_flags() {
    let out = controller(&["--version"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(env!("CARGO_PKG_VERSION")),
        "{}",
        text(&out)
    );
    let help = controller(&["--help"]);
    assert!(help.status.success(), "{}", text(&help));
    for flag in ["--lease-duration", "--certificates", "--identity"] {
        assert!(
            text(&help).contains(flag),
            "{flag} missing:\n{}",
            text(&help)
        );
    }
}

#[test]
fn a_bad_duration_is_a_usage_error_naming_the_flag() {
    let out = controller(&["--lease-duration", "soon"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--lease-duration"), "{}", text(&out));
}

#[test]
fn no_cluster_is_a_clear_error_not_a_panic() {
    let out = controller(&["--identity", "cli-test"]);
    assert!(!out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(!all.contains("panicked"), "{all}");
    assert!(
        all.to_lowercase().contains("kubeconfig") || all.contains("cluster"),
        "{all}"
    );
}
