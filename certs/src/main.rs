//! `resize-guard-certs`: issue, rotate and check the admission webhook's TLS material in a
//! directory laid out like a Kubernetes Secret volume (see the library docs).
//!
//! ```text
//! resize-guard-certs generate --out-dir DIR (--service S --namespace N | --loopback)
//! resize-guard-certs renew    --out-dir DIR (--service S --namespace N | --loopback)
//! resize-guard-certs check    --out-dir DIR --within 720h   # exit 0: fine, 10: renew now
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
// The duration syntax of every resize-guard command line (`720h`, `30d`, `1h30m`, `90s`).
use humantime::parse_duration;
use resize_guard_certs::{
    Bundle, CertSpec, expires_within, generate, not_after, read_dir, renew_leaf, write_dir,
};

/// Exit code of `check` when the serving certificate must be renewed.
const EXIT_RENEW: u8 = 10;

#[derive(Parser)]
#[command(
    name = "resize-guard-certs",
    version,
    about = "TLS material for the resize-guard webhook"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new CA and serving certificate and write them to DIR.
    Generate {
        #[command(flatten)]
        target: Target,
    },
    /// Issue a new serving certificate from the CA in DIR (ca.crt + ca.key); caBundle is unchanged.
    Renew {
        #[command(flatten)]
        target: Target,
    },
    /// Exit 0 if DIR/tls.crt is valid beyond --within, 10 if it must be renewed.
    Check {
        /// Directory holding the Secret-volume layout.
        #[arg(long, env = "RESIZE_GUARD_CERTS_DIR")]
        out_dir: PathBuf,
        /// Renewal window, e.g. 720h, 30d, 1h30m, 4w.
        #[arg(long, value_parser = parse_duration)]
        within: Duration,
    },
}

#[derive(Args)]
struct Target {
    /// Directory holding the Secret-volume layout.
    #[arg(long, env = "RESIZE_GUARD_CERTS_DIR")]
    out_dir: PathBuf,
    /// Service name kube-apiserver dials.
    #[arg(
        long,
        requires = "namespace",
        conflicts_with = "loopback",
        required_unless_present = "loopback"
    )]
    service: Option<String>,
    /// Namespace of the Service.
    #[arg(long, requires = "service")]
    namespace: Option<String>,
    /// Names for a loopback listener: localhost, 127.0.0.1, ::1.
    #[arg(long)]
    loopback: bool,
    /// Serving certificate lifetime (default 8760h).
    #[arg(long, value_parser = parse_duration)]
    leaf_validity: Option<Duration>,
    /// CA lifetime, for generate (default 87600h).
    #[arg(long, value_parser = parse_duration)]
    ca_validity: Option<Duration>,
}

impl Target {
    fn spec(&self) -> CertSpec {
        let mut spec = match (&self.service, &self.namespace) {
            (Some(service), Some(namespace)) if !self.loopback => {
                CertSpec::for_service(service, namespace)
            }
            _ => CertSpec::for_loopback(),
        };
        if let Some(v) = self.leaf_validity {
            spec.leaf_validity = v;
        }
        if let Some(v) = self.ca_validity {
            spec.ca_validity = v;
        }
        spec
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("resize-guard-certs: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Generate { target } => {
            let spec = target.spec();
            let bundle = generate(&spec).context("generating certificates")?;
            let expires = write(&bundle, &target.out_dir)?;
            eprintln!(
                "resize-guard-certs: wrote a new CA and serving certificate for {} to {} (leaf expires {expires})",
                names(&spec),
                target.out_dir.display(),
            );
        }
        Command::Renew { target } => {
            let spec = target.spec();
            let current = read_dir(&target.out_dir)?;
            let bundle = renew_leaf(&current.ca_cert_pem, &current.ca_key_pem, &spec)
                .context("renewing the serving certificate")?;
            let expires = write(&bundle, &target.out_dir)?;
            eprintln!(
                "resize-guard-certs: renewed the serving certificate for {} in {} (same CA; leaf expires {expires})",
                names(&spec),
                target.out_dir.display(),
            );
        }
        Command::Check { out_dir, within } => {
            let path = out_dir.join(resize_guard_certs::volume::CERT_FILE);
            let pem = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let expiry = rfc3339(not_after(&pem)?);
            if expires_within(&pem, within, SystemTime::now())? {
                eprintln!(
                    "resize-guard-certs: {} expires {expiry}, within {}: renew",
                    path.display(),
                    human(within),
                );
                return Ok(ExitCode::from(EXIT_RENEW));
            }
            eprintln!(
                "resize-guard-certs: {} expires {expiry}, not within {}: ok",
                path.display(),
                human(within),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bundle` into `dir` like a Secret volume; the leaf's expiry, for the report.
fn write(bundle: &Bundle, dir: &Path) -> anyhow::Result<String> {
    write_dir(bundle, dir)?;
    Ok(rfc3339(not_after(&bundle.cert_pem)?))
}

fn names(spec: &CertSpec) -> String {
    spec.dns_names
        .iter()
        .cloned()
        .chain(spec.ip_addresses.iter().map(ToString::to_string))
        .collect::<Vec<_>>()
        .join(", ")
}

fn human(d: Duration) -> String {
    match d.as_secs() {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s => format!("{s}s"),
    }
}

fn rfc3339(t: SystemTime) -> String {
    let t = time::OffsetDateTime::from(t);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn parses_the_shared_duration_syntax() {
        assert_eq!(
            parse_duration("720h").unwrap(),
            Duration::from_secs(720 * 3600)
        );
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_duration("4w").unwrap(),
            Duration::from_secs(28 * 86_400)
        );
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        let within =
            |w: &str| match Cli::try_parse_from(["x", "check", "--out-dir", "d", "--within", w]) {
                Ok(Cli {
                    command: Command::Check { within, .. },
                }) => Some(within),
                _ => None,
            };
        assert_eq!(within("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(within("soon"), None);
    }

    #[test]
    fn rejects_durations_without_units_or_with_unknown_ones() {
        for bad in ["", "720", "h", "5x", "1hh", "-1h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cli_requires_a_choice_of_names() {
        // (arguments, accepted)
        let cases = [
            ("x generate --out-dir d", false),
            ("x generate --out-dir d --service s", false),
            (
                "x generate --out-dir d --loopback --service s --namespace n",
                false,
            ),
            ("x renew --out-dir d --loopback", true),
            ("x generate --out-dir d --service s --namespace n", true),
        ];
        for (args, accepted) in cases {
            let parsed = Cli::try_parse_from(args.split(' '));
            assert_eq!(parsed.is_ok(), accepted, "{args}");
        }
    }
}
