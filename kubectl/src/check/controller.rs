//! Does a controller lead? Its Lease in the install namespace must have a holder that renewed it
//! within the lease duration; without one nobody preempts, injects `caBundle` or renews the
//! serving certificate.

use k8s_openapi::jiff::Timestamp;

use super::{Line, fail, line};
use crate::connection::Connection;
use crate::facts::{CONTROLLER_LEASE, LeaseState, lease};
use crate::table::{Mark, age};

/// Whether a controller holds and renews the leader Lease.
pub async fn controller(conn: &Connection) -> Line {
    const S: &str = "controller";
    let ns = &conn.install_namespace;
    let fix = format!(
        "kubectl -n {ns} get pods -l app.kubernetes.io/component=controller; kubectl -n {ns} logs deploy/resize-guard-controller"
    );
    match lease(conn).await {
        Ok(Some(l)) => lease_line(&LeaseState::of(&l, Timestamp::now()), ns, &fix),
        Ok(None) => fail(
            S,
            format!("no Lease {ns}/{CONTROLLER_LEASE}: the controller has never led"),
            fix,
        ),
        Err(e) => line(S, Mark::Warn, format!("{e:#}")),
    }
}

/// Whether a controller leads.
fn lease_line(state: &LeaseState, ns: &str, fix: &str) -> Line {
    let lease = format!("Lease {ns}/{CONTROLLER_LEASE}");
    match (&state.holder, state.is_held()) {
        (Some(h), true) => line(
            "controller",
            Mark::Ok,
            format!(
                "{h} leads ({lease} renewed {} ago)",
                state.renewed_ago.map(age).unwrap_or_default()
            ),
        ),
        (Some(h), false) => fail(
            "controller",
            format!(
                "no controller leads: {lease} was last renewed by {h} {} ago (lease duration {})",
                state.renewed_ago.map(age).unwrap_or_else(|| "?".into()),
                state.duration.map(age).unwrap_or_else(|| "?".into())
            ),
            fix,
        ),
        (None, _) => fail(
            "controller",
            format!("no controller leads: {lease} is released (no holder)"),
            fix,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_controller_leads_only_while_it_renews() {
        let held = LeaseState {
            holder: Some("c-1".into()),
            renewed_ago: Some(Duration::from_secs(2)),
            duration: Some(Duration::from_secs(15)),
        };
        assert_eq!(
            lease_line(&held, "resize-guard", "f").text,
            "c-1 leads (Lease resize-guard/resize-guard-controller renewed 2s ago)"
        );
        let stale = LeaseState {
            renewed_ago: Some(Duration::from_secs(40)),
            ..held.clone()
        };
        let l = lease_line(&stale, "resize-guard", "f");
        assert_eq!(l.mark, Mark::Fail);
        assert_eq!(
            l.text,
            "no controller leads: Lease resize-guard/resize-guard-controller was last renewed by c-1 40s ago (lease duration 15s)"
        );
        let released = LeaseState {
            holder: None,
            ..held
        };
        assert_eq!(
            lease_line(&released, "rg", "f").text,
            "no controller leads: Lease rg/resize-guard-controller is released (no holder)"
        );
    }
}
