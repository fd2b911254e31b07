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
#[cfg(test)]
mod tests;
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
