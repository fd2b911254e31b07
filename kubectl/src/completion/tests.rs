//! Completion answers for command lines: clap's words, the kubeconfig's names, a silent
//! cluster.

use super::*;

fn words(line: &[&str]) -> Vec<String> {
    line.iter().map(|w| (*w).to_owned()).collect()
}

async fn names(line: &[&str]) -> (Vec<String>, u32) {
    let c = complete(&words(line)).await;
    (
        c.candidates.into_iter().map(|(v, _)| v).collect(),
        c.directive,
    )
}

#[tokio::test]
async fn subcommands_flags_and_output_formats() {
    let (subs, d) = names(&[""]).await;
    assert_eq!(subs, ["check", "explain", "help", "status", "what-if"]);
    assert_eq!(d, NO_FILE_COMP);
    assert_eq!(names(&["st"]).await.0, ["status"]);
    let (formats, _) = names(&["status", "-o", ""]).await;
    assert_eq!(formats, ["json", "text", "wide", "yaml"]);
    assert_eq!(names(&["status", "--output=y"]).await.0, ["--output=yaml"]);
    assert_eq!(names(&["status", "-oj"]).await.0, ["-ojson"]);
    let (check_flags, _) = names(&["check", "--"]).await;
    for f in ["--pre", "--wait", "--probe-pod", "--output", "--context"] {
        assert!(
            check_flags.contains(&f.to_owned()),
            "{f} in {check_flags:?}"
        );
    }
    // A flag given is not offered again; a repeatable one is.
    let (flags, _) = names(&["status", "-A", "--as", "x", "--as-group", "g", "-"]).await;
    assert!(!flags.contains(&"--all-namespaces".to_owned()), "{flags:?}");
    assert!(!flags.contains(&"-A".to_owned()), "{flags:?}");
    assert!(flags.contains(&"--as-group".to_owned()), "{flags:?}");
    // Nothing to add after the last positional.
    assert_eq!(
        names(&["explain", "web-0", ""]).await,
        (vec![], NO_FILE_COMP)
    );
    // --kubeconfig: the shell's file names.
    assert_eq!(names(&["--kubeconfig", ""]).await, (vec![], DEFAULT));
}

#[tokio::test]
async fn descriptions_are_one_line_after_a_tab_then_the_directive() {
    let c = complete(&words(&["-o", ""])).await;
    let text = c.render(true);
    assert!(text.contains("json\tJSON, for scripts\n"), "{text}");
    assert!(text.ends_with(":4\n"), "{text}");
    assert!(!c.render(false).contains('\t'));
    let c = complete(&words(&["ex"])).await;
    assert_eq!(
        c.candidates,
        [(
            "explain".to_owned(),
            "Why a pod's resize is where it is".to_owned()
        )]
    );
    let c = complete(&words(&["check", "--wa"])).await;
    assert_eq!(
        c.candidates[0].1,
        "Wait until every check passes, at most TIMEOUT (default 5m; as --request-timeout: 90, \
         30s, 2m)"
    );
}

#[test]
fn a_request_is_the_helper_name_or_double_underscore_complete() {
    let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    assert_eq!(
        requested(&os(&[
            "/home/u/.krew/bin/kubectl_complete-resize_guard",
            "-o",
            ""
        ])),
        Some((words(&["-o", ""]), true))
    );
    assert_eq!(
        requested(&os(&["kubectl-resize_guard", "__completeNoDesc", "st"])),
        Some((words(&["st"]), false))
    );
    assert_eq!(requested(&os(&["kubectl-resize_guard", "status"])), None);
    assert_eq!(requested(&os(&["kubectl-resize_guard"])), None);
}

#[tokio::test]
async fn kubeconfig_names_come_from_the_merged_kubeconfig() {
    let dir = std::env::temp_dir().join(format!("rg-completion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: {server: https://a}\n\
         contexts:\n- name: prod-admin\n  context: {cluster: prod, user: admin}\n\
         - name: staging\n  context: {cluster: prod, user: admin}\n\
         users:\n- name: admin\n  user: {}\n",
    )
    .unwrap();
    let path = file.display().to_string();
    assert_eq!(
        names(&["--kubeconfig", &path, "--context", "pr"]).await.0,
        ["prod-admin"]
    );
    assert_eq!(
        names(&["--kubeconfig", &path, "--user", ""]).await.0,
        ["admin"]
    );
    assert_eq!(
        names(&["--kubeconfig", &path, "--cluster="]).await.0,
        ["--cluster=prod"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_silent_cluster_gives_no_names_within_the_timeout() {
    let dir = std::env::temp_dir().join(format!("rg-completion-down-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config");
    // A server that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  \
             cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}\n\
             contexts:\n- name: c\n  context: {{cluster: k, user: u}}\nusers:\n- name: u\n  \
             user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let path = file.display().to_string();
    for line in [
        vec!["--kubeconfig", &path, "--request-timeout=1s", "explain", ""],
        vec!["--kubeconfig", &path, "-n", ""],
    ] {
        let start = std::time::Instant::now();
        assert_eq!(names(&line).await, (vec![], NO_FILE_COMP), "{line:?}");
        let took = start.elapsed();
        assert!(
            took < lookup::TIMEOUT + std::time::Duration::from_secs(1),
            "{line:?} took {took:?}"
        );
    }
    // Flags that do not parse look nothing up.
    let (pods, _) = names(&["--kubeconfig", &path, "--as-group", "g", "explain", ""]).await;
    assert!(pods.is_empty());
    drop(silent);
    std::fs::remove_dir_all(&dir).unwrap();
}
