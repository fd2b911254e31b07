//! Shell completion through kubectl (v1.26+). kubectl completes its own words; for a plugin it
//! runs the executable `kubectl_complete-resize_guard` from `PATH` with the plugin's words typed
//! so far, the last being the one to complete (`""` for a new word), and reads Cobra's
//! `__complete` answer: one candidate a line, each optionally followed by a tab and a
//! description, then `:<directive>` (k8s.io/kubectl `pkg/cmd/plugin/plugin_completion.go`). The
//! same binary answers when it is run under that name (a link to `kubectl-resize_guard`, which
//! survives `kubectl krew upgrade`), as `kubectl-resize_guard __complete WORDS…` (the Cobra
//! spelling; `__completeNoDesc` without descriptions), and through the small
//! `kubectl_complete-resize_guard` binary that ships beside it (`src/bin/complete.rs`).
//!
//! It completes what clap knows ([`words`]): subcommands, flags and their described values
//! (`-o`), and from outside the line ([`lookup`]): contexts, clusters and users from the
//! kubeconfig; namespaces (`-n`, `--install-namespace`), pods (`explain`, `what-if`), running
//! `NAMESPACE/NAME` pods (`check --probe-pod`) and a pod's containers (`what-if -c`) from the
//! cluster, read within a few seconds. `--kubeconfig` completes file names (the shell's own).
//! Candidates are filtered by the typed prefix here: kubectl passes them on as they are.
//!
//! Completion never fails the shell: a read that fails gives no candidates, and the reason goes
//! to stderr (which kubectl passes through and shells discard), as Cobra's `CompErrorln` does.

pub mod lookup;
pub mod words;

use std::ffi::OsString;

use clap::{Arg, Command, CommandFactory, Parser};

use crate::args::{Cli, Global};
use crate::output::write_stdout;
use lookup::{ClusterNames, KubeconfigNames};
use words::{Parsed, Want, command_at};

/// Cobra's `ShellCompDirectiveNoSpace`: no space after the candidate.
pub const NO_SPACE: u32 = 2;
/// Cobra's `ShellCompDirectiveNoFileComp`: no file names when there is no candidate.
pub const NO_FILE_COMP: u32 = 4;
/// Cobra's `ShellCompDirectiveDefault`: the shell's own completion (file names) if nothing.
pub const DEFAULT: u32 = 0;

/// The prefix of the completion executable's name kubectl runs for a plugin.
pub const HELPER_PREFIX: &str = "kubectl_complete-";

/// The answer: candidates and Cobra's directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completions {
    /// Each candidate and its description (may be empty).
    pub candidates: Vec<(String, String)>,
    /// Cobra's `ShellCompDirective`.
    pub directive: u32,
}

impl Completions {
    fn none(directive: u32) -> Completions {
        Completions {
            candidates: Vec::new(),
            directive,
        }
    }

    /// The `__complete` answer; without `descriptions`, names only (`__completeNoDesc`).
    pub fn render(&self, descriptions: bool) -> String {
        let mut out = String::new();
        for (value, description) in &self.candidates {
            out.push_str(value);
            if descriptions && !description.is_empty() {
                out.push('\t');
                out.push_str(description);
            }
            out.push('\n');
        }
        out.push_str(&format!(":{}\n", self.directive));
        out
    }
}

/// The words to complete and whether to describe them, when this run is a completion request:
/// run as `kubectl_complete-…`, or with `__complete` / `__completeNoDesc` first.
pub fn requested(args: &[OsString]) -> Option<(Vec<String>, bool)> {
    let text = |a: &OsString| a.to_string_lossy().into_owned();
    let program = args.first().map(std::path::Path::new)?;
    let stem = program
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    if stem.is_some_and(|s| s.starts_with(HELPER_PREFIX)) {
        return Some((args[1..].iter().map(text).collect(), true));
    }
    let descriptions = match args.get(1)?.to_str()? {
        "__complete" => true,
        "__completeNoDesc" => false,
        _ => return None,
    };
    Some((args[2..].iter().map(text).collect(), descriptions))
}

/// Answers a completion request for `words` on stdout; the exit status is always 0 (kubectl
/// ignores the answer of a failed run).
pub async fn run(words: &[String], descriptions: bool) -> i32 {
    let answer = complete(words).await;
    if let Err(e) = write_stdout(&answer.render(descriptions)) {
        eprintln!("error: {e:#}");
    }
    0
}

/// The candidates for the last of `words` (everything after `resize-guard`).
pub async fn complete(words: &[String]) -> Completions {
    let mut root = Cli::command();
    root.build();
    let parsed = words::parse(&root, words);
    let cmd = command_at(&root, &parsed.path);
    match &parsed.want {
        Want::Flag { typed } => filtered(flags(cmd, &parsed), typed, "", NO_FILE_COMP),
        Want::Word { positional, typed } => match positional {
            Some(id) => value(&root, &parsed, id, typed, "").await,
            None => filtered(subcommands(cmd), typed, "", NO_FILE_COMP),
        },
        Want::Value { id, typed, prefix } => value(&root, &parsed, id, typed, prefix).await,
    }
}

/// The candidates of `all` that start with `typed`, each after `prefix`, sorted.
fn filtered(all: Vec<(String, String)>, typed: &str, prefix: &str, directive: u32) -> Completions {
    let mut candidates: Vec<(String, String)> = all
        .into_iter()
        .filter(|(v, _)| v.starts_with(typed))
        .map(|(v, d)| (format!("{prefix}{v}"), d))
        .collect();
    candidates.sort();
    candidates.dedup();
    Completions {
        candidates,
        directive,
    }
}

/// A help text's first clause (up to a `:` or `;` outside parentheses), as a short
/// description, as Cobra shows a command's `Short`.
fn describe(help: Option<&clap::builder::StyledStr>) -> String {
    let text = help.map(|h| h.to_string()).unwrap_or_default();
    let first = text.lines().next().unwrap_or_default();
    let mut depth = 0i32;
    let end = first
        .char_indices()
        .find(|&(_, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            depth == 0 && (c == ':' || c == ';')
        })
        .map_or(first.len(), |(i, _)| i);
    first[..end].trim().trim_end_matches('.').to_owned()
}

/// The visible subcommands of `cmd`.
fn subcommands(cmd: &Command) -> Vec<(String, String)> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| (s.get_name().to_owned(), describe(s.get_about())))
        .collect()
}

/// The visible flags of `cmd` not given yet (a repeatable one always), long and short.
fn flags(cmd: &Command, parsed: &Parsed) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for arg in cmd.get_arguments() {
        if arg.is_positional() || arg.is_hide_set() {
            continue;
        }
        let repeatable = matches!(
            arg.get_action(),
            clap::ArgAction::Append | clap::ArgAction::Count
        );
        if parsed.values.contains_key(arg.get_id().as_str()) && !repeatable {
            continue;
        }
        let description = describe(arg.get_help());
        if let Some(long) = arg.get_long() {
            out.push((format!("--{long}"), description.clone()));
        }
        if let Some(short) = arg.get_short() {
            out.push((format!("-{short}"), description));
        }
    }
    out
}

/// The arg of `cmd` or its ancestors with id `id`.
fn find_arg<'a>(cmd: &'a Command, id: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| a.get_id() == id)
}

/// The candidates for the value of argument `id`.
async fn value(
    root: &Command,
    parsed: &Parsed,
    id: &str,
    typed: &str,
    prefix: &str,
) -> Completions {
    let cmd = command_at(root, &parsed.path);
    let global = || globals(root, parsed);
    let from_cluster = |what: ClusterNames| async move {
        let names = match global() {
            Ok(g) => lookup::cluster_names(&g, &what).await,
            Err(e) => Err(e),
        };
        described(names)
    };
    let from_kubeconfig = |what: KubeconfigNames| {
        described(global().and_then(|g| lookup::kubeconfig_names(&g, what)))
    };
    let found = match id {
        "kubeconfig" => return Completions::none(DEFAULT),
        "context" => from_kubeconfig(KubeconfigNames::Contexts),
        "cluster" => from_kubeconfig(KubeconfigNames::Clusters),
        "user" => from_kubeconfig(KubeconfigNames::Users),
        "namespace" | "install_namespace" => from_cluster(ClusterNames::Namespaces).await,
        "pod" => {
            let (kind, name) = match typed.split_once('/') {
                Some((kind @ ("pod" | "pods"), name)) => (format!("{kind}/"), name),
                _ => (String::new(), typed),
            };
            let pods = ClusterNames::Pods {
                namespace: None,
                running: false,
            };
            let all = from_cluster(pods).await;
            return filtered(all, name, &format!("{prefix}{kind}"), NO_FILE_COMP);
        }
        "probe_pod" => return probe_pod(global(), typed, prefix).await,
        "container" => match parsed.values.get("pod").and_then(|p| p.first()) {
            Some(pod) => from_cluster(ClusterNames::Containers { pod: pod.clone() }).await,
            None => Vec::new(),
        },
        _ => find_arg(cmd, id)
            .map(|a| {
                a.get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                    .map(|v| (v.get_name().to_owned(), describe(v.get_help())))
                    .collect()
            })
            .unwrap_or_default(),
    };
    filtered(found, typed, prefix, NO_FILE_COMP)
}

/// Names without descriptions; none, with the reason on stderr, when they could not be read.
fn described(names: anyhow::Result<Vec<String>>) -> Vec<(String, String)> {
    match names {
        Ok(names) => names.into_iter().map(|n| (n, String::new())).collect(),
        Err(e) => {
            eprintln!("resize-guard completion: {e:#}");
            Vec::new()
        }
    }
}

/// `--probe-pod NAMESPACE/NAME`: namespaces (then `/`, no space), then that namespace's running
/// pods.
async fn probe_pod(global: anyhow::Result<Global>, typed: &str, prefix: &str) -> Completions {
    let (what, namespace) = match typed.split_once('/') {
        Some((ns, _)) => (
            ClusterNames::Pods {
                namespace: Some(ns.to_owned()),
                running: true,
            },
            Some(ns),
        ),
        None => (ClusterNames::Namespaces, None),
    };
    let names = match global {
        Ok(g) => lookup::cluster_names(&g, &what).await,
        Err(e) => Err(e),
    };
    let names = match names {
        Ok(names) => names,
        Err(e) => {
            eprintln!("resize-guard completion: {e:#}");
            return Completions::none(NO_FILE_COMP);
        }
    };
    match namespace {
        Some(ns) => {
            let all = names
                .into_iter()
                .map(|n| (format!("{ns}/{n}"), String::new()));
            filtered(all.collect(), typed, prefix, NO_FILE_COMP)
        }
        None => {
            let all = names.into_iter().map(|n| (format!("{n}/"), String::new()));
            filtered(all.collect(), typed, prefix, NO_FILE_COMP | NO_SPACE)
        }
    }
}

/// The connection flags typed so far, as the command would read them; an error when they do
/// not parse (then no name is looked up: it could come from another cluster than meant).
fn globals(root: &Command, parsed: &Parsed) -> anyhow::Result<Global> {
    #[derive(Parser)]
    #[command(no_binary_name = true)]
    struct Globals {
        #[command(flatten)]
        global: Global,
    }
    let mut args: Vec<String> = Vec::new();
    for (id, values) in &parsed.values {
        let Some(arg) = find_arg(root, id).filter(|a| a.is_global_set()) else {
            continue;
        };
        let Some(long) = arg.get_long() else { continue };
        args.extend(values.iter().map(|v| format!("--{long}={v}")));
    }
    Globals::try_parse_from(&args)
        .map(|g| g.global)
        .map_err(|e| anyhow::anyhow!("the flags typed so far do not parse: {}", e.kind()))
}

#[cfg(test)]
mod tests {
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
}
