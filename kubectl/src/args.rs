//! The command line, shaped like kubectl's: the global flags every kubectl user types
//! (`--kubeconfig`, `--context`, `-n`, `-o`) work the same here, before or after the subcommand.

use std::path::PathBuf;

use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};

/// `kubectl resize-guard`: why is this in-place resize stuck, and what would make it go?
#[derive(Debug, Parser)]
#[command(
    name = "kubectl resize-guard",
    bin_name = "kubectl resize-guard",
    version,
    about = "Explain, try and check in-place pod resizes with resize-guard's own judgement",
    after_help = "Read-only except `what-if`, which sends its resize as a server-side dry run."
)]
pub struct Cli {
    /// Connection and output flags, as kubectl has them.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's flags.
#[derive(Debug, Clone, ClapArgs)]
pub struct Global {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace (default: the context's namespace, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Output format: text (default), wide, json or yaml.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The namespace resize-guard is installed in (its policy ConfigMap, Lease, Secrets).
    #[arg(
        long,
        global = true,
        env = "RESIZE_GUARD_NAMESPACE",
        default_value = "resize-guard"
    )]
    pub install_namespace: String,
}

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable.
    Text,
    /// Human-readable, with more columns.
    Wide,
    /// JSON, for scripts.
    Json,
    /// YAML, for scripts.
    Yaml,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Why a pod's resize is where it is: QoS class, node ledger, pending resize, what
    /// resize-guard decides now, its recorded plan and its Events.
    Explain {
        /// The pod.
        pod: String,
    },
    /// Try a resize as a server-side dry run: the API server's answer and warnings, the local
    /// plan, and the `kubectl patch` command that applies it.
    WhatIf(WhatIf),
    /// Every pod with a pending resize (all namespaces, or `-n`), highest priority first.
    Status {
        /// Every namespace (the default unless `-n` is given).
        #[arg(short = 'A', long)]
        all_namespaces: bool,
    },
    /// Install health, one line per check with the fix; exits 1 on any failure.
    Check(CheckArgs),
}

/// `what-if`'s arguments.
#[derive(Debug, Clone, ClapArgs)]
pub struct WhatIf {
    /// The pod.
    pub pod: String,
    /// New cpu request, e.g. `550m`.
    #[arg(long)]
    pub cpu: Option<String>,
    /// New memory request, e.g. `1Gi`.
    #[arg(long)]
    pub memory: Option<String>,
    /// The container to resize (default: the pod's only container).
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// Change requests only, as VPA's `RequestsOnly` does; by default limits move with their
    /// requests, keeping each limit/request ratio (VPA's `RequestsAndLimits`).
    #[arg(long)]
    pub requests_only: bool,
}

/// `check`'s arguments.
#[derive(Debug, Clone, ClapArgs)]
pub struct CheckArgs {
    /// The pod (`NAMESPACE/NAME`) to send the dry-run probe resize for; default: the first
    /// running pod resize-guard judges.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub probe_pod: Option<String>,
}
