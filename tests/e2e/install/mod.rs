//! Installing from `deploy/` as a user would: kustomize, the Helm chart, the monitoring rules, and
//! the webhook running as its ServiceAccount under the installed RBAC.

mod admission_probe;
mod grants;
mod helm;
mod kustomize;
mod monitoring;
mod privileges;
mod webhook;

/// `kubectl <verb> --dry-run=server -f <file>` as admin on `text` written to a temporary file:
/// what the API server (and its admission, Pod Security included) says to it.
async fn dry_run(
    env: &resize_guard_harness::env::Env,
    verb: &str,
    text: &str,
) -> resize_guard_harness::kubectl::KubectlOutput {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    env.kubectl()
        .run([
            verb,
            "--dry-run=server",
            "-f",
            &file.path().display().to_string(),
        ])
        .await
        .unwrap()
}

/// `kubectl <args>` as admin; panics unless it succeeds.
async fn kubectl(
    env: &resize_guard_harness::env::Env,
    args: &[&str],
) -> resize_guard_harness::kubectl::KubectlOutput {
    let out = env.kubectl().run(args).await.unwrap();
    assert!(
        out.success,
        "kubectl {}:\n{}\n{}",
        args.join(" "),
        out.stdout,
        out.stderr
    );
    out
}
