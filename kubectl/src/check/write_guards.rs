//! Are the controller's writes narrowed to what its code sends? RBAC cannot name a field or exclude
//! a namespace, so `deploy/base/controller-pod-writes.yaml` and
//! `deploy/base/controller-writes.yaml` (and the chart's templates of the same names) install
//! ValidatingAdmissionPolicies and their bindings that let the controller's ServiceAccount change
//! nothing in a pod but the `resize-guard.io/preemption` annotation, add nothing to a pod's status
//! but `DisruptionTarget`, resize a pod only back to what the kubelet reports (and in its own
//! namespace only as the admission probe's dry run), evict or delete no pod in kube-system or its
//! own namespace, and change only `caBundle` of the webhook configurations. Without the binding a
//! policy does nothing; without `Deny` it only warns or audits; with `failurePolicy: Ignore` an
//! evaluation error lets the write through; a policy that no longer matches the writes it guards
//! guards nothing. Each of these is a ✗ here, since the permissions check above cannot see it.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::Api;

use super::{Line, fail, line};
use crate::connection::Connection;
use crate::table::Mark;

/// One shipped policy (and its binding, of the same name).
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    /// The policy's and the binding's name.
    pub name: &'static str,
    /// What it limits the controller's writes to (the ✓ line).
    pub limits: &'static str,
    /// What the controller may do without it (the ✗ line).
    pub unguarded: &'static str,
    /// The file under `deploy/base/` (and the chart's `templates/`) that installs it.
    pub file: &'static str,
    /// The (operation, API group, resource) writes it must match.
    pub matches: &'static [(&'static str, &'static str, &'static str)],
}

/// The pod-write guard's name, as shipped.
pub const POD_WRITES: &str = "resize-guard-controller-pod-writes";

/// Every guard `deploy/` ships.
pub const GUARDS: &[Guard] = &[
    Guard {
        name: POD_WRITES,
        limits: "pod writes to its plan annotation",
        unguarded: "may patch any field of any pod, not only its plan annotation",
        file: "controller-pod-writes.yaml",
        matches: &[("UPDATE", "", "pods")],
    },
    Guard {
        name: "resize-guard-controller-status-writes",
        limits: "pod status writes to adding DisruptionTarget",
        unguarded: "may set any field of any pod's status, not only DisruptionTarget",
        file: "controller-writes.yaml",
        matches: &[("UPDATE", "", "pods/status")],
    },
    Guard {
        name: "resize-guard-controller-resize-writes",
        limits: "resizes to the resources the kubelet reports",
        unguarded: "may resize any pod it can patch pods/resize of to any value",
        file: "controller-writes.yaml",
        matches: &[("UPDATE", "", "pods/resize")],
    },
    Guard {
        name: "resize-guard-admission-probe",
        limits: "resizes in its own namespace to the admission probe's dry runs",
        unguarded: "may really resize pods of its own namespace, not only dry-run its admission probe",
        file: "controller-writes.yaml",
        matches: &[("UPDATE", "", "pods/resize")],
    },
    Guard {
        name: "resize-guard-controller-removals",
        limits: "evictions and deletions to namespaces other than kube-system and its own",
        unguarded: "may evict (or, granted delete, delete) pods in kube-system and its own namespace",
        file: "controller-writes.yaml",
        matches: &[("DELETE", "", "pods"), ("CREATE", "", "pods/eviction")],
    },
    Guard {
        name: "resize-guard-controller-webhook-writes",
        limits: "webhook configuration writes to caBundle",
        unguarded: "may change rules, failurePolicy and the target of its webhook configurations, not only caBundle",
        file: "controller-writes.yaml",
        matches: &[
            (
                "UPDATE",
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
            ),
            (
                "UPDATE",
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
            ),
        ],
    },
];

const S: &str = "permissions";

/// Reads every guard's policy and binding and says, one line each, whether they hold.
pub async fn write_guards(conn: &Connection) -> Vec<Line> {
    let policies = Api::<ValidatingAdmissionPolicy>::all(conn.client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(conn.client.clone());
    let mut out = Vec::new();
    for guard in GUARDS {
        let found = (
            policies.get_opt(guard.name).await,
            bindings.get_opt(guard.name).await,
        );
        out.push(match found {
            (Ok(p), Ok(b)) => guard_line(guard, p.as_ref(), b.as_ref()),
            (Err(e), _) | (_, Err(e)) => line(
                S,
                Mark::Warn,
                format!(
                    "cannot read ValidatingAdmissionPolicy {} or its binding (needs get validatingadmissionpolicies, validatingadmissionpolicybindings): {e}",
                    guard.name
                ),
            ),
        });
    }
    out
}

/// Whether `policy`'s match constraints send it `operation` on `group`/`resource`.
fn matches(
    policy: &ValidatingAdmissionPolicy,
    operation: &str,
    group: &str,
    resource: &str,
) -> bool {
    let rules = policy
        .spec
        .as_ref()
        .and_then(|s| s.match_constraints.as_ref())
        .and_then(|m| m.resource_rules.as_ref());
    let has = |list: Option<&Vec<String>>, want: &str| {
        list.is_some_and(|l| l.iter().any(|x| x == want || x == "*"))
    };
    rules.into_iter().flatten().any(|r| {
        has(r.operations.as_ref(), operation)
            && has(r.api_groups.as_ref(), group)
            && has(r.resources.as_ref(), resource)
    })
}

/// The line for what was found of `guard` (`None`: absent).
pub fn guard_line(
    guard: &Guard,
    policy: Option<&ValidatingAdmissionPolicy>,
    binding: Option<&ValidatingAdmissionPolicyBinding>,
) -> Line {
    let name = guard.name;
    let fix = format!(
        "kubectl apply --server-side -f deploy/base/{file} (the Helm chart installs it too: templates/{file})",
        file = guard.file
    );
    let Some(policy) = policy else {
        return fail(
            S,
            format!(
                "no ValidatingAdmissionPolicy {name}: resize-guard-controller {}",
                guard.unguarded
            ),
            fix,
        );
    };
    let Some(binding) = binding else {
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicy {name} has no ValidatingAdmissionPolicyBinding {name}: the policy is not enforced"
            ),
            fix,
        );
    };
    let spec = &binding.spec;
    let bound_to = spec.policy_name.as_str();
    if bound_to != name {
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicyBinding {name} binds {bound_to:?}, not policy {name}"
            ),
            fix,
        );
    }
    let actions = &spec.validation_actions;
    if !actions.iter().any(|a| a == "Deny") {
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicyBinding {name} has validationActions [{}]: the controller's other writes are reported, not refused",
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
                "ValidatingAdmissionPolicy {name} has failurePolicy {failure}: a write it cannot evaluate goes through"
            ),
            fix,
        );
    }
    if let Some((op, group, resource)) = guard
        .matches
        .iter()
        .find(|(op, group, resource)| !matches(policy, op, group, resource))
    {
        let what = if group.is_empty() {
            (*resource).to_owned()
        } else {
            format!("{resource}.{group}")
        };
        return fail(
            S,
            format!(
                "ValidatingAdmissionPolicy {name} does not match {op} {what}: resize-guard-controller {}",
                guard.unguarded
            ),
            fix,
        );
    }
    line(
        S,
        Mark::Ok,
        format!(
            "ValidatingAdmissionPolicy {name} and its binding (Deny) limit resize-guard-controller's {}",
            guard.limits
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(guard: &Guard, failure: &str) -> ValidatingAdmissionPolicy {
        let rules: Vec<_> = guard
            .matches
            .iter()
            .map(|(op, group, resource)| {
                json!({"operations": [op], "apiGroups": [group], "apiVersions": ["v1"],
                    "resources": [resource]})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": guard.name},
            "spec": {"failurePolicy": failure, "matchConstraints": {"resourceRules": rules}},
        }))
        .unwrap()
    }

    fn binding(name: &str, bound: &str, actions: &[&str]) -> ValidatingAdmissionPolicyBinding {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"policyName": bound, "validationActions": actions},
        }))
        .unwrap()
    }

    #[test]
    fn each_write_guard_needs_its_policy_matching_its_writes_and_a_denying_binding() {
        for guard in GUARDS {
            let name = guard.name;
            let ok = guard_line(
                guard,
                Some(&policy(guard, "Fail")),
                Some(&binding(name, name, &["Deny"])),
            );
            assert_eq!(ok.mark, Mark::Ok, "{}", ok.text);
            assert!(ok.text.contains(guard.limits), "{}", ok.text);
            let mut narrowed = policy(guard, "Fail");
            narrowed
                .spec
                .as_mut()
                .unwrap()
                .match_constraints
                .as_mut()
                .unwrap()
                .resource_rules
                .as_mut()
                .unwrap()
                .remove(0);
            let cases = [
                (
                    None,
                    Some(binding(name, name, &["Deny"])),
                    "no ValidatingAdmissionPolicy",
                ),
                (
                    Some(policy(guard, "Fail")),
                    None,
                    "has no ValidatingAdmissionPolicyBinding",
                ),
                (
                    Some(policy(guard, "Fail")),
                    Some(binding(name, "other", &["Deny"])),
                    "binds \"other\"",
                ),
                (
                    Some(policy(guard, "Fail")),
                    Some(binding(name, name, &["Warn", "Audit"])),
                    "validationActions [Warn, Audit]",
                ),
                (
                    Some(policy(guard, "Ignore")),
                    Some(binding(name, name, &["Deny"])),
                    "failurePolicy Ignore",
                ),
                (
                    Some(narrowed),
                    Some(binding(name, name, &["Deny"])),
                    "does not match",
                ),
            ];
            for (p, b, says) in cases {
                let l = guard_line(guard, p.as_ref(), b.as_ref());
                assert_eq!(l.mark, Mark::Fail, "{name}: {says}");
                assert!(l.text.contains(says), "{name}: {says}: {}", l.text);
                assert!(
                    l.fix
                        .as_deref()
                        .unwrap()
                        .contains(&format!("deploy/base/{}", guard.file)),
                    "{name}: {says}"
                );
            }
        }
    }

    #[test]
    fn the_pod_write_guard_reads_as_before() {
        let guard = &GUARDS[0];
        let ok = guard_line(
            guard,
            Some(&policy(guard, "Fail")),
            Some(&binding(POD_WRITES, POD_WRITES, &["Deny"])),
        );
        assert_eq!(
            ok.text,
            "ValidatingAdmissionPolicy resize-guard-controller-pod-writes and its binding (Deny) limit resize-guard-controller's pod writes to its plan annotation"
        );
    }

    #[test]
    fn every_shipped_guard_is_in_deploy_and_the_chart() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        for guard in GUARDS {
            for dir in ["deploy/base", "charts/resize-guard/templates"] {
                let text = std::fs::read_to_string(format!("{root}/{dir}/{}", guard.file)).unwrap();
                assert!(
                    text.contains(&format!("name: {}\n", guard.name))
                        && text.contains(&format!("policyName: {}\n", guard.name)),
                    "{} in {dir}/{}",
                    guard.name,
                    guard.file
                );
            }
        }
    }
}
