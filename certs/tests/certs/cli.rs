//! The `resize-guard-certs` binary end to end: generate, check (exit 0 vs 10), renew keeping the
//! CA, and a clear failure when there is no CA to renew from.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use resize_guard_certs::volume::{CA_CERT_FILE, CA_KEY_FILE, CERT_FILE, DATA_DIR};

fn certs(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resize-guard-certs"))
        .args(args)
        .arg("--out-dir")
        .arg(dir)
        .env_remove("RESIZE_GUARD_CERTS_DIR")
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn generate_then_check_then_renew() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    let out = certs(&["generate", "--loopback"], dir);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("127.0.0.1"), "{}", stderr(&out));
    for name in [CERT_FILE, CA_CERT_FILE, CA_KEY_FILE, DATA_DIR] {
        assert!(dir.join(name).exists(), "{name}");
    }

    let fine = certs(&["check", "--within", "720h"], dir);
    assert_eq!(fine.status.code(), Some(0), "{}", stderr(&fine));
    let due = certs(&["check", "--within", "9000h"], dir);
    assert_eq!(due.status.code(), Some(10), "{}", stderr(&due));
    assert!(stderr(&due).contains("renew"), "{}", stderr(&due));

    let ca_before = fs::read_to_string(dir.join(CA_CERT_FILE)).unwrap();
    let leaf_before = fs::read_to_string(dir.join(CERT_FILE)).unwrap();
    let out = certs(&["renew", "--loopback"], dir);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(dir.join(CA_CERT_FILE)).unwrap(),
        ca_before
    );
    assert_ne!(
        fs::read_to_string(dir.join(CERT_FILE)).unwrap(),
        leaf_before
    );
}

#[test]
fn a_short_leaf_validity_is_due_for_renewal() {
    let tmp = tempfile::tempdir().unwrap();
    let out = certs(
        &[
            "generate",
            "--service",
            "rg",
            "--namespace",
            "ops",
            "--leaf-validity",
            "24h",
        ],
        tmp.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("rg.ops.svc"), "{}", stderr(&out));
    let due = certs(&["check", "--within", "48h"], tmp.path());
    assert_eq!(due.status.code(), Some(10), "{}", stderr(&due));
}

#[test]
fn renew_without_a_ca_fails_and_says_which_file_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = certs(&["renew", "--loopback"], tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(CA_CERT_FILE), "{}", stderr(&out));
}

#[test]
fn check_without_a_certificate_is_an_error_not_a_renewal() {
    let tmp = tempfile::tempdir().unwrap();
    let out = certs(&["check", "--within", "1h"], tmp.path());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}
