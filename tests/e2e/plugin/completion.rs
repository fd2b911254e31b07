//! Shell completion of `kubectl resize-guard`, asked of the real `kubectl` v1.37.2 as a shell
//! asks it (`kubectl __complete resize-guard WORDS…`): kubectl runs `kubectl_complete-resize_guard`
//! from `PATH` and passes its answer on. Both ways the helper gets onto `PATH` are tried — the
//! shipped helper binary beside the plugin (the release archive's layout), and a link to the
//! plugin under the helper's name in a directory of links (krew's `~/.krew/bin`) — against a
//! real kube-apiserver with running pods on a hollow node: subcommands with descriptions, flags,
//! `-o` formats, namespaces, pods, `NAMESPACE/NAME` probe pods, a pod's containers and the
//! kubeconfig's contexts. Without the helper kubectl offers nothing, so the candidates are the
//! plugin's own.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::objects::create_all;

use super::command::plugin_dir;

/// kubectl's answer: the candidates (with descriptions) and the directive.
#[derive(Debug)]
struct Answer {
    candidates: Vec<(String, String)>,
    directive: String,
}

impl Answer {
    fn names(&self) -> Vec<&str> {
        self.candidates.iter().map(|(n, _)| n.as_str()).collect()
    }
}

/// `kubectl __complete resize-guard <words>` with `dir` (and the system's directories) on PATH.
async fn complete(env: &Env, dir: &Path, words: &[&str]) -> Answer {
    let k = env.kubectl();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let out = tokio::process::Command::new(&k.bin)
        .arg("__complete")
        .arg("resize-guard")
        .args(words)
        .env("KUBECONFIG", &k.kubeconfig)
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<&str> = stdout.lines().collect();
    let directive = lines.pop().unwrap_or_default().to_owned();
    assert!(directive.starts_with(':'), "no directive in {stdout:?}");
    let candidates = lines
        .into_iter()
        .map(|l| match l.split_once('\t') {
            Some((n, d)) => (n.to_owned(), d.to_owned()),
            None => (l.to_owned(), String::new()),
        })
        .collect();
    Answer {
        candidates,
        directive,
    }
}

/// A directory of links, as krew's `bin`: the plugin, and (`with_helper`) the plugin again under
/// the completion helper's name.
fn links(name: &str, with_helper: bool) -> PathBuf {
    let plugin = plugin_dir().join("kubectl-resize_guard");
    let dir = plugin_dir()
        .join("..")
        .join("completion-links")
        .join(format!("{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&plugin, dir.join("kubectl-resize_guard")).unwrap();
    if with_helper {
        std::os::unix::fs::symlink(
            "kubectl-resize_guard",
            dir.join("kubectl_complete-resize_guard"),
        )
        .unwrap();
    }
    dir
}

#[tokio::test]
async fn kubectl_completes_the_plugins_words_and_the_clusters_names() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let node = env.node("compl", "2", "4Gi").await;
    let ns = env.namespace("compl").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let pods_on_node = [
        ("web-0", "low", "100m", "64Mi"),
        ("db", "low", "100m", "64Mi"),
    ];
    create_all(&pods, &node, &pods_on_node).await.unwrap();

    // The control: no helper on PATH, no candidates (kubectl's default directive, file names).
    let bare = links("bare", false);
    let none = complete(env, &bare, &["status", "-o", ""]).await;
    assert!(none.candidates.is_empty(), "{none:?}");
    assert_eq!(none.directive, ":0");

    let shipped = plugin_dir();
    assert!(shipped.join("kubectl_complete-resize_guard").is_file());
    for dir in [shipped, links("krew", true)] {
        let at = dir.display().to_string();
        let subs = complete(env, &dir, &[""]).await;
        assert_eq!(
            subs.names(),
            ["check", "explain", "help", "status", "what-if"],
            "{at}"
        );
        assert_eq!(subs.directive, ":4", "{at}");
        assert!(
            subs.candidates
                .contains(&("explain".into(), "Why a pod's resize is where it is".into())),
            "{at}: {subs:?}"
        );

        let formats = complete(env, &dir, &["status", "-o", ""]).await;
        assert_eq!(formats.names(), ["json", "text", "wide", "yaml"], "{at}");
        assert!(
            formats
                .candidates
                .contains(&("json".into(), "JSON, for scripts".into()))
        );
        let formats = complete(env, &dir, &["status", "--output=y"]).await;
        assert_eq!(formats.names(), ["--output=yaml"], "{at}");

        let flags = complete(env, &dir, &["check", "--p"]).await;
        assert_eq!(flags.names(), ["--pre", "--probe-pod"], "{at}");

        // From the cluster, with -n typed before.
        let names = complete(env, &dir, &["-n", &ns, "explain", ""]).await;
        assert_eq!(names.names(), ["db", "web-0"], "{at}");
        assert_eq!(names.directive, ":4");
        let names = complete(env, &dir, &["explain", "-n", &ns, "pod/w"]).await;
        assert_eq!(names.names(), ["pod/web-0"], "{at}");
        let namespaces = complete(env, &dir, &["status", "-n", &ns[..ns.len() - 1]]).await;
        assert_eq!(namespaces.names(), [ns.as_str()], "{at}");
        let probe = complete(env, &dir, &["check", "--probe-pod", &ns]).await;
        assert_eq!(probe.names(), [format!("{ns}/").as_str()], "{at}");
        assert_eq!(probe.directive, ":6", "no space after the namespace");
        let probe = complete(env, &dir, &["check", "--probe-pod", &format!("{ns}/w")]).await;
        assert_eq!(probe.names(), [format!("{ns}/web-0").as_str()], "{at}");
        let containers = complete(env, &dir, &["what-if", "web-0", "-n", &ns, "-c", ""]).await;
        assert_eq!(containers.names(), ["app"], "{at}");

        // From the kubeconfig.
        let contexts = complete(env, &dir, &["--context", ""]).await;
        assert_eq!(contexts.names(), ["resize-guard"], "{at}");
    }
}
