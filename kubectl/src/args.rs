//! The command line, shaped like kubectl's: the connection flags every kubectl user types
//! (`--kubeconfig`, `--context`, `--cluster`, `--user`, `--as`, `--as-group`, `--as-uid`,
//! `--request-timeout`, `-n`, `-o`) mean the same here, before or after the subcommand. The
//! examples and the exit statuses shown by `--help` live in [`crate::help`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};

use crate::help;

/// `kubectl resize-guard`: why is this in-place resize stuck, and what would make it go?
#[derive(Debug, Parser)]
#[command(
    name = "kubectl resize-guard",
    bin_name = "kubectl resize-guard",
    version,
    about = "Explain, try and check in-place pod resizes with resize-guard's own judgement",
    after_help = help::MAIN
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
    /// Path to one kubeconfig file; overrides $KUBECONFIG (a colon-separated list of files,
    /// merged as kubectl merges them: the first file to set a value wins), else ~/.kube/config.
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig cluster to use, instead of the context's.
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The kubeconfig user to use, instead of the context's.
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// Username to impersonate for the operation (a user or a ServiceAccount, e.g.
    /// system:serviceaccount:NAMESPACE:NAME).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate for the operation; repeat for several groups (needs --as).
    #[arg(long, global = true, value_name = "GROUP", requires = "as_user")]
    pub as_group: Vec<String>,
    /// UID to impersonate for the operation (needs --as).
    #[arg(long, global = true, value_name = "UID", requires = "as_user")]
    pub as_uid: Option<String>,
    /// How long to wait for each request to the API server: an integer number of seconds or a
    /// duration with its unit (1s, 2m, 1m30s, 500ms); 0 waits forever. As kubectl's.
    #[arg(long, global = true, value_name = "DURATION", default_value = "0", value_parser = request_timeout)]
    pub request_timeout: RequestTimeout,
    /// The namespace of the pod(s) to look at (default: the context's namespace, else
    /// `default`). Not where resize-guard is installed: that is --install-namespace.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Output format: text (default), wide, json or yaml (a document with apiVersion
    /// resize-guard.io/v1alpha1 and a kind per command: Explanation, WhatIf, Status, Check).
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The namespace resize-guard itself is installed in (its policy ConfigMap, controller
    /// Lease, Secrets and ServiceAccounts). Not the namespace of your pods: that is -n.
    #[arg(
        long,
        global = true,
        env = "RESIZE_GUARD_NAMESPACE",
        default_value = "resize-guard",
        value_name = "NAMESPACE"
    )]
    pub install_namespace: String,
}

/// `--request-timeout`: `None` waits forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTimeout(pub Option<Duration>);

/// Parses `--request-timeout` as kubectl does (client-go `clientcmd.ParseTimeout`): a
/// non-negative integer is seconds, anything else a Go duration (`time.ParseDuration`:
/// decimal numbers each with a unit, `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`); zero is no timeout.
pub fn request_timeout(text: &str) -> Result<RequestTimeout, String> {
    let bad = || {
        format!(
            "{text:?} is not a timeout: pass an integer number of seconds, or an integer followed \
             by a unit (e.g. 1s, 2m, 3h); 0 means no timeout"
        )
    };
    let total = if let Ok(secs) = text.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        go_duration(text).ok_or_else(bad)?
    };
    Ok(RequestTimeout((!total.is_zero()).then_some(total)))
}

/// Go's `time.ParseDuration` for non-negative values: `1h2m3.5s`, `300ms`, `0`.
fn go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * seconds;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
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
    #[command(after_help = help::EXPLAIN)]
    Explain {
        /// The pod: NAME or pod/NAME, in the namespace -n names.
        pod: String,
    },
    /// Try a resize as a server-side dry run: the API server's answer and warnings, the local
    /// plan, and the `kubectl patch` command that applies it. Exits 1 when it would be refused.
    #[command(after_help = help::WHAT_IF)]
    WhatIf(WhatIf),
    /// Every pod with a pending resize in the namespace (-n, else the context's), or in every
    /// namespace with -A, highest priority first.
    #[command(after_help = help::STATUS)]
    Status {
        /// Every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
    },
    /// Install health, one line per check with the fix; exits 4 on any failed check. --pre checks
    /// a cluster before installing; --wait waits until every check passes.
    #[command(after_help = help::CHECK)]
    Check(CheckArgs),
}

/// `what-if`'s arguments.
#[derive(Debug, Clone, ClapArgs)]
pub struct WhatIf {
    /// The pod: NAME or pod/NAME, in the namespace -n names.
    pub pod: String,
    /// New cpu request, e.g. `550m`.
    #[arg(long, required_unless_present = "memory")]
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
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct CheckArgs {
    /// The pod (`NAMESPACE/NAME`) to send the dry-run probe resize for; default: the first
    /// running pod resize-guard judges.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub probe_pod: Option<String>,
    /// Before installing: is this Kubernetes supported, may you install what deploy/ creates,
    /// and is there a node to run it on? Exits 4 on any failed check.
    #[arg(long, conflicts_with_all = ["probe_pod", "wait"])]
    pub pre: bool,
    /// Wait until every check passes, at most TIMEOUT (default 5m; as --request-timeout: 90,
    /// 30s, 2m); exits 4 with the checks still failing when it runs out.
    #[arg(
        long,
        value_name = "TIMEOUT",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "5m",
        value_parser = wait_timeout
    )]
    pub wait: Option<Duration>,
}

/// Parses `--wait=TIMEOUT` as [`request_timeout`] does, refusing zero (it would not wait).
pub fn wait_timeout(text: &str) -> Result<Duration, String> {
    request_timeout(text)?
        .0
        .ok_or_else(|| format!("--wait={text}: the timeout must be more than zero"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-resize_guard").chain(args.iter().copied()))
    }

    #[test]
    fn request_timeouts_parse_as_kubectl_parses_them() {
        let t = |s: &str| request_timeout(s).map(|t| t.0);
        assert_eq!(t("0"), Ok(None));
        assert_eq!(t("0s"), Ok(None));
        assert_eq!(t("30"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(t("30s"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(t("1m"), Ok(Some(Duration::from_secs(60))));
        assert_eq!(t("1m30s"), Ok(Some(Duration::from_secs(90))));
        assert_eq!(t("1.5h"), Ok(Some(Duration::from_secs(5400))));
        assert_eq!(t("250ms"), Ok(Some(Duration::from_millis(250))));
        for bad in ["", "s", "-1", "-5s", "1x", "1 s", "m1", "1.2.3s", "."] {
            assert!(t(bad).is_err(), "{bad:?}");
        }
        assert!(t("soon").unwrap_err().contains("\"soon\" is not a timeout"));
    }

    #[test]
    fn connection_flags_work_before_and_after_the_subcommand() {
        let cli = parse(&[
            "--context",
            "c",
            "status",
            "--cluster",
            "k",
            "--user",
            "u",
            "--as",
            "jane",
            "--as-group",
            "a",
            "--as-group",
            "b",
            "--as-uid",
            "42",
            "--request-timeout",
            "1m",
            "-n",
            "shop",
        ])
        .unwrap();
        let g = &cli.global;
        assert_eq!(g.context.as_deref(), Some("c"));
        assert_eq!(g.cluster.as_deref(), Some("k"));
        assert_eq!(g.user.as_deref(), Some("u"));
        assert_eq!(g.as_user.as_deref(), Some("jane"));
        assert_eq!(g.as_group, ["a", "b"]);
        assert_eq!(g.as_uid.as_deref(), Some("42"));
        assert_eq!(g.request_timeout.0, Some(Duration::from_secs(60)));
        assert_eq!(g.namespace.as_deref(), Some("shop"));
        assert_eq!(parse(&["status"]).unwrap().global.request_timeout.0, None);
    }

    #[test]
    fn check_waits_five_minutes_unless_told_and_only_with_equals() {
        let wait = |args: &[&str]| match parse(args).unwrap().command {
            Command::Check(c) => c.wait,
            _ => unreachable!(),
        };
        assert_eq!(wait(&["check"]), None);
        assert_eq!(wait(&["check", "--wait"]), Some(Duration::from_secs(300)));
        assert_eq!(wait(&["check", "--wait=90"]), Some(Duration::from_secs(90)));
        assert_eq!(
            wait(&["check", "--wait=2m", "-o", "json"]),
            Some(Duration::from_secs(120))
        );
        // Without `=`, the next word is not the timeout.
        assert_eq!(
            parse(&["check", "--wait", "30s"]).unwrap_err().kind(),
            ErrorKind::UnknownArgument
        );
        let pre = match parse(&["check", "--pre"]).unwrap().command {
            Command::Check(c) => c.pre,
            _ => unreachable!(),
        };
        assert!(pre);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        let kind = |args: &[&str]| parse(args).unwrap_err().kind();
        assert_eq!(
            kind(&["status", "--as-group", "g"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            kind(&["status", "--as-uid", "42"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            kind(&["status", "--request-timeout", "soon"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["what-if", "app"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(kind(&["status", "--nope"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["status", "-o", "xml"]), ErrorKind::InvalidValue);
        let e = parse(&["status", "-o", "xml"]).unwrap_err().to_string();
        assert!(
            e.contains("invalid value 'xml' for '--output <OUTPUT>'")
                && e.contains("[possible values: text, wide, json, yaml]"),
            "{e}"
        );
        assert_eq!(
            kind(&["check", "--pre", "--wait"]),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            kind(&["check", "--pre", "--probe-pod", "a/b"]),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(kind(&["check", "--wait=0"]), ErrorKind::ValueValidation);
        assert_eq!(kind(&["check", "--wait=soon"]), ErrorKind::ValueValidation);
        // clap exits 2 for every usage error; crate::exit keeps 2 for the same meaning.
        assert_eq!(parse(&["status", "--nope"]).unwrap_err().exit_code(), 2);
    }
}
