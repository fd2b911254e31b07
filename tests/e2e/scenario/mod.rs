//! The set-ups the suites share: the real webhook or controller started on a suite's control
//! plane as its ServiceAccount, and the scenarios several suites play.

pub mod controller;
pub mod webhook;

/// The path of the shipped program `name` (`resize-guard-webhook`, `resize-guard-controller`,
/// `kubectl-resize_guard`): the binary `cargo test --workspace` built beside this test binary
/// (each product crate's own CLI tests make cargo build it), or from `RESIZE_GUARD_BIN_DIR`.
pub fn program(name: &str) -> String {
    match resize_guard_harness::installed::bin(name) {
        Ok(path) => path.display().to_string(),
        Err(e) => panic!("{e:#}"),
    }
}
