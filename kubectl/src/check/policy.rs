//! Does the policy ConfigMap parse? Both programs keep their last good policy when it does not,
//! so a bad edit is otherwise silent.

use resize_guard_policy::policy::Policy;

use super::{Line, fail, line};
use crate::connection::Connection;
use crate::facts::POLICY_CONFIGMAP;
use crate::table::Mark;

/// The policy ConfigMap: present, and parsing.
pub fn policy_line(conn: &Connection, policy: anyhow::Result<Option<Policy>>) -> Line {
    const S: &str = "policy";
    let cm = format!("ConfigMap {}/{POLICY_CONFIGMAP}", conn.install_namespace);
    match policy {
        Ok(Some(p)) => line(S, Mark::Ok, format!("{cm} parses: {}", summary(&p))),
        Ok(None) => line(
            S,
            Mark::Warn,
            format!(
                "{cm} does not exist: both programs run on the last good copy if there is one, else judge and preempt nothing"
            ),
        ),
        Err(e) => fail(
            S,
            format!("{e:#}"),
            format!(
                "fix the document (kubectl -n {} edit configmap {POLICY_CONFIGMAP}); the programs keep their last good policy meanwhile",
                conn.install_namespace
            ),
        ),
    }
}

fn summary(p: &Policy) -> String {
    format!(
        "mode {}, qos.onChange {}, preemption {}",
        if p.is_audit() { "audit" } else { "enforce" },
        format!("{:?}", p.qos.on_change).to_lowercase(),
        if p.preemption.enabled {
            format!("on (max {} victims)", p.preemption.max_victims_per_resize)
        } else {
            "off".to_owned()
        }
    )
}
