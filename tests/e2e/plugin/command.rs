//! `kubectl resize-guard` run as a user runs it — through the real `kubectl`, which finds the
//! plugin on `PATH` — and what it prints, read line by line and cell by cell.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use resize_guard_harness::env::Env;
use resize_guard_harness::kubectl::KubectlOutput;

/// How long [`rg_until`] waits.
const T: Duration = Duration::from_secs(60);

/// The directory holding the plugin binary cargo built for this test.
pub(super) fn plugin_dir() -> PathBuf {
    PathBuf::from(crate::scenario::program("kubectl-resize_guard"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `kubectl resize-guard <args>`.
pub(super) async fn rg(env: &Env, args: &[&str]) -> KubectlOutput {
    let mut all = vec!["resize-guard"];
    all.extend_from_slice(args);
    env.kubectl().plugin(&plugin_dir(), all).await.unwrap()
}

/// A finished plugin run with its exit status.
pub(super) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `kubectl resize-guard <args>` through the real kubectl (which `exec`s the plugin, so its exit
/// status is the plugin's), with `vars` set on top of the admin `KUBECONFIG`.
pub(super) async fn rg_run(env: &Env, vars: &[(&str, &str)], args: &[&str]) -> Run {
    let k = env.kubectl();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![plugin_dir()];
    dirs.extend(std::env::split_paths(&path));
    let out = tokio::process::Command::new(&k.bin)
        .arg("resize-guard")
        .args(args)
        .env("KUBECONFIG", &k.kubeconfig)
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .envs(vars.iter().copied())
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `kubectl resize-guard <args>` until its stdout contains `want` (the system has had its
/// chance once it does); panics with the last output after `T`.
pub(super) async fn rg_until(env: &Env, args: &[&str], want: &str) -> KubectlOutput {
    let deadline = Instant::now() + T;
    loop {
        let out = rg(env, args).await;
        if out.stdout.contains(want) {
            println!("{}", out.stdout);
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl resize-guard {args:?} never said {want:?}:\n{}\n{}",
            out.stdout,
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Asserts that `out` is the error for an API server at `server` that cannot be reached through
/// the kubeconfig context `context` (user `me`): exit 3, saying so on the first line.
pub(super) fn assert_unreachable(out: &Run, server: &str, context: &str) {
    assert_eq!(out.code, 3, "{}", out.stderr);
    let want =
        format!("error: cannot reach the API server {server} (context {context}, user me): ");
    assert!(out.stderr.starts_with(&want), "{}", out.stderr);
}

/// Asserts that `text` contains each of `want`.
pub(super) fn assert_has<S: AsRef<str>>(text: &str, want: &[S]) {
    for want in want {
        let want = want.as_ref();
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// The line of `text` that starts with `prefix` (after indentation).
pub(super) fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
}

/// Asserts, for each (prefix, line), that the first line of `text` starting with `prefix` is
/// `line`.
pub(super) fn assert_lines(text: &str, want: &[(&str, &str)]) {
    for (prefix, want) in want {
        assert_eq!(line(text, prefix), *want, "the line starting {prefix:?}");
    }
}

/// The cells of a table row (kubectl pads columns with at least three spaces).
pub(super) fn cells(row: &str) -> Vec<&str> {
    row.split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}
