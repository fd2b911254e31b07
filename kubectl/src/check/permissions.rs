//! Do resize-guard's ServiceAccounts hold what the programs need and nothing more? One line per
//! account, from the SubjectAccessReviews of [`super::rbac`].

use super::{Line, fail, line, rbac};
use crate::connection::Connection;
use crate::table::Mark;

/// What `sa` may do against what it needs and must not have.
pub async fn permissions(
    conn: &Connection,
    sa: &str,
    needs: &[rbac::Permission],
    must_not: &[rbac::Permission],
) -> Line {
    const S: &str = "permissions";
    let ns = &conn.install_namespace;
    match rbac::audit(conn, sa, needs, must_not).await {
        Ok((lacking, excess)) if lacking.is_empty() && excess.is_empty() => line(
            S,
            Mark::Ok,
            format!(
                "ServiceAccount {ns}/{sa} has the {} permissions it needs and none of {} it must not have",
                needs.len(),
                must_not.len()
            ),
        ),
        Ok((lacking, excess)) => {
            let list = |v: &[rbac::Permission]| {
                v.iter()
                    .map(|p| p.describe(ns))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut problems = Vec::new();
            if !lacking.is_empty() {
                problems.push(format!("lacks {}", list(&lacking)));
            }
            if !excess.is_empty() {
                problems.push(format!("may also {}", list(&excess)));
            }
            let mut fix = format!(
                "re-apply deploy/base/rbac-{}.yaml, and remove any other binding that grants more",
                sa.trim_start_matches("resize-guard-")
            );
            for (grant, component, value) in [
                (
                    rbac::DELETE_PODS,
                    "best-effort-deletes",
                    "rbac.controller.deletePods",
                ),
                (
                    rbac::RESIZE_PODS,
                    "revert-infeasible",
                    "rbac.controller.resizePods",
                ),
            ] {
                if lacking.contains(&grant) {
                    fix.push_str(&format!(
                        "; the policy needs {}: add deploy/components/{component} to your kustomization (Helm: {value}=true)",
                        grant.describe(ns)
                    ));
                }
            }
            fail(
                S,
                format!("ServiceAccount {ns}/{sa} {}", problems.join("; ")),
                fix,
            )
        }
        Err(e) => line(
            S,
            Mark::Warn,
            format!("cannot review {sa}'s permissions (needs create subjectaccessreviews): {e}"),
        ),
    }
}
