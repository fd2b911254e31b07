//! Is the controller's `patch pods` narrowed to its plan annotation? RBAC cannot name a field, so
//! `deploy/base/controller-pod-writes.yaml` (and the chart's
//! `templates/controller-pod-writes.yaml`) install a ValidatingAdmissionPolicy and its binding
//! that let the controller's ServiceAccount change nothing in a pod but the
//! `resize-guard.io/preemption` annotation. Without the binding the policy does nothing; without
//! `Deny` it only warns or audits; with `failurePolicy: Ignore` an evaluation error lets the
//! write through. Each of these is a ✗ here, since the permissions check above cannot see it.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::Api;

use super::{Line, fail, line};
use crate::connection::Connection;
use crate::table::Mark;

/// The policy's and the binding's name, as shipped.
pub const POD_WRITES: &str = "resize-guard-controller-pod-writes";

const S: &str = "permissions";

/// Reads the policy and its binding and says whether they guard the controller's pod writes.
pub async fn pod_writes(conn: &Connection) -> Line {
    let policy = Api::<ValidatingAdmissionPolicy>::all(conn.client.clone())
        .get_opt(POD_WRITES)
        .await;
    let binding = Api::<ValidatingAdmissionPolicyBinding>::all(conn.client.clone())
        .get_opt(POD_WRITES)
        .await;
    match (policy, binding) {
        (Ok(p), Ok(b)) => pod_writes_line(p.as_ref(), b.as_ref()),
        (Err(e), _) | (_, Err(e)) => line(
            S,
            Mark::Warn,
            format!(
                "cannot read ValidatingAdmissionPolicy {POD_WRITES} or its binding (needs get validatingadmissionpolicies, validatingadmissionpolicybindings): {e}"
            ),
        ),
    }
}

/// The line for what was found (`None`: absent).
pub fn pod_writes_line(
    policy: Option<&ValidatingAdmissionPolicy>,
    binding: Option<&ValidatingAdmissionPolicyBinding>,
) -> Line {
    let fix = "kubectl apply --server-side -f deploy/base/controller-pod-writes.yaml (the Helm chart installs it too: templates/controller-pod-writes.yaml)";
    let Some(policy) = policy else {
        return fail(
            S,
            format!(
                "no ValidatingAdmissionPolicy {POD_WRITES}: resize-guard-controller may patch any field of any pod, not only its plan annotation"
            ),
            fix,
        );
    };
    let Some(binding) = binding else {
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicy {POD_WRITES} has no ValidatingAdmissionPolicyBinding {POD_WRITES}: the policy is not enforced"
            ),
            fix,
        );
    };
    let spec = &binding.spec;
    let bound_to = spec.policy_name.as_str();
    if bound_to != POD_WRITES {
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicyBinding {POD_WRITES} binds {bound_to:?}, not policy {POD_WRITES}"
            ),
            fix,
        );
    }
    let actions = &spec.validation_actions;
    if !actions.iter().any(|a| a == "Deny") {
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicyBinding {POD_WRITES} has validationActions [{}]: the controller's other pod writes are reported, not refused",
                actions.join(", ")
            ),
            fix,
        );
    }
    let failure = policy
        .spec
        .as_ref()
        .and_then(|s| s.failure_policy.as_deref())
        .unwrap_or("Fail");
    if failure != "Fail" {
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicy {POD_WRITES} has failurePolicy {failure}: a write it cannot evaluate goes through"
            ),
            fix,
        );
    }
    line(
        S,
        Mark::Ok,
        format!(
            "ValidatingAdmissionPolicy {POD_WRITES} and its binding (Deny) limit resize-guard-controller's pod writes to its plan annotation"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(failure: &str) -> ValidatingAdmissionPolicy {
        serde_json::from_value(json!({
            "metadata": {"name": POD_WRITES},
            "spec": {"failurePolicy": failure},
        }))
        .unwrap()
    }

    fn binding(name: &str, actions: &[&str]) -> ValidatingAdmissionPolicyBinding {
        serde_json::from_value(json!({
            "metadata": {"name": POD_WRITES},
            "spec": {"policyName": name, "validationActions": actions},
        }))
        .unwrap()
    }

    #[test]
    fn the_pod_write_guard_needs_its_policy_and_a_denying_binding() {
        let ok = pod_writes_line(Some(&policy("Fail")), Some(&binding(POD_WRITES, &["Deny"])));
        assert_eq!(ok.mark, Mark::Ok, "{}", ok.text);
        let cases = [
            (
                None,
                Some(binding(POD_WRITES, &["Deny"])),
                "no ValidatingAdmissionPolicy",
            ),
            (
                Some(policy("Fail")),
                None,
                "has no ValidatingAdmissionPolicyBinding",
            ),
            (
                Some(policy("Fail")),
                Some(binding("other", &["Deny"])),
                "binds \"other\"",
            ),
            (
                Some(policy("Fail")),
                Some(binding(POD_WRITES, &["Warn", "Audit"])),
                "validationActions [Warn, Audit]",
            ),
            (
                Some(policy("Ignore")),
                Some(binding(POD_WRITES, &["Deny"])),
                "failurePolicy Ignore",
            ),
        ];
        for (p, b, says) in cases {
            let l = pod_writes_line(p.as_ref(), b.as_ref());
            assert_eq!(l.mark, Mark::Fail, "{says}");
            assert!(l.text.contains(says), "{says}: {}", l.text);
            assert!(
                l.fix
                    .as_deref()
                    .unwrap()
                    .contains("deploy/base/controller-pod-writes.yaml"),
                "{says}"
            );
        }
    }
}
