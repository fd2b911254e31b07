//! `kubectl resize-guard check`: is resize-guard installed and working? One line per check,
//! `linkerd check` style — ✓ passed, ✗ failed (with the fix on the next line), ‼ worth a look —
//! and exit status 4 on any ✗ (`crate::exit::Exit::CheckFailed`). Each check asks the cluster
//! the question the failure would otherwise surface as at 3 a.m., one submodule each:
//! [`kubernetes`] (a minor with `pods/resize`), [`webhook`] (configurations and their targets),
//! [`certificate`] (`caBundle` against the certificate actually served, expiry), [`admission`]
//! (a real dry-run resize whose decision comes back), [`controller`] (a leader), [`policy`] (the
//! ConfigMap parses), [`permissions`] (the ServiceAccounts hold what the programs need and
//! nothing more) and [`write_guards`] (the ValidatingAdmissionPolicies that narrow the
//! controller's writes are bound and match them).

mod admission;
mod certificate;
mod controller;
mod kubernetes;
mod permissions;
mod policy;
mod rbac;
mod tls;
mod webhook;
mod write_guards;

use serde::Serialize;

use crate::args::CheckArgs;
use crate::connection::Connection;
use crate::facts::policy;
use crate::table::{Mark, bold};

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// The group it belongs to.
    pub section: &'static str,
    /// Passed, failed, or worth a look.
    pub mark: Mark,
    /// What was found.
    pub text: String,
    /// What to do, when it failed.
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

/// Runs every check; an error when the cluster cannot be reached at all.
pub async fn run(conn: &Connection, args: &CheckArgs) -> anyhow::Result<Vec<Line>> {
    let mut out = vec![kubernetes::version(conn).await?];
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
    Ok(out)
}

/// The text form: sections with underlined headings, one line per check, the fix under a
/// failure, and the verdict.
pub fn render_text(lines: &[Line]) -> String {
    let mut out = String::new();
    let mut section = "";
    for l in lines {
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
    let failed = lines.iter().filter(|l| l.mark == Mark::Fail).count();
    if failed == 0 {
        out.push_str(&format!(
            "\nStatus check results are {}\n",
            Mark::Ok.symbol()
        ));
    } else {
        out.push_str(&format!(
            "\nStatus check results are {}: {failed} check(s) failed\n",
            Mark::Fail.symbol()
        ));
    }
    out
}
