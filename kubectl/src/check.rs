//! `kubectl resize-guard check`: is resize-guard installed and working? One line per check,
//! `linkerd check` style — ✓ passed, ✗ failed (with the fix on the next line), ‼ worth a look —
//! and exit status 4 on any ✗ (`crate::exit::Exit::CheckFailed`). Each check asks the cluster
//! the question the failure would otherwise surface as at 3 a.m., one submodule each:
//! [`kubernetes`] (a minor with `pods/resize`), [`release`] (the programs run this plugin's
//! release, `crate::versions`), [`webhook`] (configurations and their targets),
//! [`certificate`] (`caBundle` against the certificate actually served, expiry), [`admission`]
//! (a real dry-run resize whose decision comes back), [`controller`] (a leader), [`policy`] (the
//! ConfigMap parses), [`permissions`] (the ServiceAccounts hold what the programs need and
//! nothing more) and [`write_guards`] (the ValidatingAdmissionPolicies that narrow the
//! controller's writes are bound and match them).
//!
//! `check --pre` asks, before installing, what can be known from here ([`prerequisites`]);
//! `check --wait` runs the checks until they all pass or the time is up ([`readiness`]).

mod admission;
mod certificate;
mod controller;
mod install_rights;
mod kubernetes;
mod permissions;
mod policy;
mod prerequisites;
mod rbac;
mod readiness;
mod release;
mod tls;
mod webhook;
mod write_guards;

use std::time::Duration;

use serde::Serialize;

use crate::args::CheckArgs;
use crate::connection::Connection;
use crate::facts::policy;
use crate::output::Document;
use crate::table::{Mark, age, bold};
use crate::versions::{self, Versions};

/// What `check` prints: `kind: Check`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What was checked: the install (`installed`) or a cluster before installing
    /// (`preInstall`, `--pre`).
    pub mode: Mode,
    /// One entry per check, in order.
    pub checks: Vec<Line>,
    /// How many checks failed (✗): the exit status is 4 when any did.
    pub failed: usize,
    /// How many are worth a look (‼).
    pub warnings: usize,
    /// What the checks could not establish from here.
    pub notes: Vec<String>,
    /// The plugin's release and the installed programs' (`crate::versions`), when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<Versions>,
    /// `--wait`: how the wait went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
}

/// What `check` looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// The install's health.
    Installed,
    /// A cluster before installing (`--pre`).
    PreInstall,
}

/// How `--wait` went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    /// The most it would wait, in seconds.
    pub timeout_seconds: u64,
    /// How long it waited, in seconds.
    pub waited_seconds: u64,
    /// How many times the checks ran.
    pub attempts: u32,
    /// Whether it gave up with checks still failing.
    pub timed_out: bool,
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// The group it belongs to.
    pub section: &'static str,
    /// Passed, failed, or worth a look.
    pub mark: Mark,
    /// What was found.
    pub text: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn line(section: &'static str, mark: Mark, text: impl Into<String>) -> Line {
    Line {
        section,
        mark,
        text: text.into(),
        fix: None,
    }
}

fn fail(section: &'static str, text: impl Into<String>, fix: impl Into<String>) -> Line {
    Line {
        section,
        mark: Mark::Fail,
        text: text.into(),
        fix: Some(fix.into()),
    }
}

impl Report {
    /// The report of `checks`, counted.
    pub fn new(
        mode: Mode,
        checks: Vec<Line>,
        notes: Vec<String>,
        versions: Option<Versions>,
    ) -> Report {
        let count = |m: Mark| checks.iter().filter(|l| l.mark == m).count();
        Report {
            mode,
            failed: count(Mark::Fail),
            warnings: count(Mark::Warn),
            checks,
            notes,
            versions,
            wait: None,
        }
    }
}

/// Runs the checks `args` asks for; an error when the cluster cannot be reached at all.
pub async fn run(conn: &Connection, args: &CheckArgs) -> anyhow::Result<Report> {
    if args.pre {
        return prerequisites::run(conn).await;
    }
    match args.wait {
        Some(timeout) => {
            readiness::wait(timeout, readiness::INTERVAL, || installed(conn, args)).await
        }
        None => installed(conn, args).await,
    }
}

/// Every check of the install, once.
async fn installed(conn: &Connection, args: &CheckArgs) -> anyhow::Result<Report> {
    let mut out = vec![kubernetes::version(conn).await?];
    let versions = versions::read(conn).await;
    out.extend(release::lines(&versions));
    webhook::webhooks(conn, &mut out).await;
    // Read once: its line below, and the namespaces the probe must not pick.
    let policy = policy(conn).await;
    let excluding = policy.as_ref().ok().cloned().flatten().unwrap_or_default();
    out.push(admission::probe(conn, args, &excluding).await);
    out.push(controller::controller(conn).await);
    // The grants only some policies need (pdb: bestEffort, revertInfeasible) are asked for when
    // the policy in the ConfigMap asks for them.
    let controller_needs = rbac::controller_needs(policy.as_ref().ok().and_then(Option::as_ref));
    out.push(policy::policy_line(conn, policy));
    for (sa, needs, must_not) in [
        (
            "resize-guard-webhook",
            rbac::webhook_needs(),
            rbac::WEBHOOK_MUST_NOT,
        ),
        (
            "resize-guard-controller",
            controller_needs,
            rbac::CONTROLLER_MUST_NOT,
        ),
    ] {
        out.push(permissions::permissions(conn, sa, &needs, must_not).await);
    }
    out.extend(write_guards::write_guards(conn).await);
    Ok(Report::new(
        Mode::Installed,
        out,
        Vec::new(),
        Some(versions),
    ))
}

impl Document for Report {
    const KIND: &'static str = "Check";

    /// Sections with underlined headings, one line per check, the fix under it, the verdict,
    /// how a wait went, and the notes.
    fn text(&self, _wide: bool) -> String {
        let mut out = String::new();
        let mut section = "";
        for l in &self.checks {
            if l.section != section {
                if !section.is_empty() {
                    out.push('\n');
                }
                section = l.section;
                out.push_str(&format!(
                    "{}\n{}\n",
                    bold(section),
                    "-".repeat(section.len())
                ));
            }
            out.push_str(&format!("{} {}\n", l.mark.symbol(), l.text));
            if let Some(fix) = &l.fix {
                out.push_str(&format!("    fix: {fix}\n"));
            }
        }
        if self.failed == 0 {
            out.push_str(&format!(
                "\nStatus check results are {}\n",
                Mark::Ok.symbol()
            ));
        } else {
            out.push_str(&format!(
                "\nStatus check results are {}: {} check(s) failed\n",
                Mark::Fail.symbol(),
                self.failed
            ));
        }
        if let Some(w) = &self.wait {
            let waited = age(Duration::from_secs(w.waited_seconds));
            if w.timed_out {
                out.push_str(&format!(
                    "Gave up waiting after {waited} ({} attempts): the failed checks above did not pass within {}\n",
                    w.attempts,
                    age(Duration::from_secs(w.timeout_seconds))
                ));
            } else {
                out.push_str(&format!(
                    "Every check passed after {waited} ({} attempts)\n",
                    w.attempts
                ));
            }
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Output;
    use crate::output::render;
    use k8s_openapi::jiff::Timestamp;

    fn report() -> Report {
        let mut r = Report::new(
            Mode::Installed,
            vec![
                line("kubernetes", Mark::Ok, "Kubernetes v1.37.2 is supported"),
                line(
                    "release",
                    Mark::Warn,
                    "kubectl resize-guard is 0.2.0, but x runs 0.1.0",
                ),
                fail("controller", "no controller leads", "kubectl logs deploy/c"),
            ],
            vec!["not checked: the network".into()],
            None,
        );
        r.wait = Some(Wait {
            timeout_seconds: 120,
            waited_seconds: 120,
            attempts: 7,
            timed_out: true,
        });
        r
    }

    #[test]
    fn the_text_shows_what_the_json_holds() {
        let r = report();
        assert_eq!((r.failed, r.warnings), (1, 1));
        let at = Timestamp::UNIX_EPOCH;
        let text = render(Output::Text, &r, at).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&render(Output::Json, &r, at).unwrap()).unwrap();
        assert_eq!(json["kind"], "Check");
        assert_eq!(json["mode"], "installed");
        assert_eq!(json["failed"], 1);
        let symbol = |m: &str| match m {
            "ok" => "✓",
            "fail" => "✗",
            _ => "‼",
        };
        for c in json["checks"].as_array().unwrap() {
            let shown = format!(
                "{} {}\n",
                symbol(c["mark"].as_str().unwrap()),
                c["text"].as_str().unwrap()
            );
            assert!(text.contains(&shown), "{shown:?} in:\n{text}");
            let section = c["section"].as_str().unwrap();
            let heading = format!("{section}\n{}\n", "-".repeat(section.len()));
            assert!(text.contains(&heading), "{heading:?} in:\n{text}");
            if let Some(fix) = c["fix"].as_str() {
                assert!(text.contains(&format!("    fix: {fix}\n")), "{text}");
            }
        }
        assert!(
            text.contains("Status check results are ✗: 1 check(s) failed\n"),
            "{text}"
        );
        assert!(text.contains("note: not checked: the network\n"), "{text}");
        assert_eq!(
            json["wait"],
            serde_json::json!({"timeoutSeconds": 120, "waitedSeconds": 120, "attempts": 7, "timedOut": true})
        );
        assert!(
            text.contains("Gave up waiting after 2m (7 attempts): the failed checks above did not pass within 2m\n"),
            "{text}"
        );
    }
}
