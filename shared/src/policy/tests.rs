//! Parsing, defaults and line-precise errors of `policy.yaml`.

use super::*;

#[test]
fn an_empty_document_is_refused_not_the_defaults() {
    for doc in ["", "   \n", "# nothing\n---\n"] {
        let e = Policy::from_yaml(doc).unwrap_err().to_string();
        assert!(
            e.contains("the document is empty") && e.contains("mode: audit"),
            "{doc:?}: {e}"
        );
    }
}

#[test]
fn the_keys_that_decide_how_much_it_does_must_be_stated() {
    // Without `mode`: refused, whatever else is there (an edit that dropped `mode: audit`).
    for doc in [
        "qos:\n  onChange: repair\n",
        "preemption:\n  enabled: false\n",
        "memory:\n  decrease:\n    belowUsage: warn\n",
        "namespaces:\n  exclude: [kube-system]\n",
    ] {
        let e = Policy::from_yaml(doc).unwrap_err().to_string();
        assert!(e.contains("`mode` is not stated"), "{doc:?}: {e}");
    }
    // A preemption section that sets keys without `enabled`: refused, naming its line.
    let e = Policy::from_yaml("mode: audit\npreemption:\n  pdb: bestEffort\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(
        e.message.contains("preemption.enabled is not stated"),
        "{e}"
    );
    // Stated: accepted, and an empty or absent preemption section needs no `enabled`.
    for doc in [
        "mode: audit\n",
        "mode: enforce\npreemption:\n",
        "mode: enforce\npreemption: {}\n",
        "mode: enforce\npreemption:\n  enabled: false\n  pdb: bestEffort\n",
        "{mode: audit, preemption: {enabled: true, maxVictimsPerResize: 2}}",
    ] {
        Policy::from_yaml(doc).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
    }
    // What is logged and persisted as the last good policy always states both.
    let p = Policy::from_yaml("mode: audit\n").unwrap();
    Policy::from_yaml(&p.to_yaml()).unwrap();
}

#[test]
fn defaults_match_the_design() {
    let p = Policy::default();
    assert_eq!(p.mode, Mode::Enforce);
    assert_eq!(p.qos.on_change, OnQosChange::Reject);
    assert!(p.feasibility.reject_infeasible);
    assert!(!p.feasibility.reject_stuck_deferred);
    assert!(!p.feasibility.revert_infeasible);
    assert!(p.preemption.enabled);
    assert_eq!(p.preemption.pdb, PdbMode::Respect);
    assert_eq!(p.preemption.max_victims_per_resize, 5);
    assert_eq!(p.preemption.max_grace_period_seconds, None);
    assert_eq!(p.preemption.min_deferred_seconds, 0);
    assert!(p.preemption.protected_namespaces.is_empty());
    assert!(!p.preemption.allow_daemon_set_victims);
    assert!(!p.preemption.allow_bare_pod_victims);
    assert_eq!(
        p.preemption.protected_selector.0.to_string(),
        "resize-guard.io/protected=true"
    );
    assert_eq!(p.namespaces.exclude, vec!["kube-system"]);
    assert_eq!(p.memory.decrease.below_usage, BelowUsage::Reject);
    assert_eq!(p.memory.decrease.headroom_percent, 10);
    assert_eq!(p.memory.decrease.max_usage_age_seconds, 120);
}

#[test]
fn the_memory_rule_parses_and_refuses_bad_values() {
    let p = Policy::from_yaml(
        "mode: enforce\nmemory:\n  decrease:\n    belowUsage: warn\n    headroomPercent: 0\n    maxUsageAgeSeconds: 30\n",
    )
    .unwrap();
    assert_eq!(
        p.memory.decrease,
        MemoryDecrease {
            below_usage: BelowUsage::Warn,
            headroom_percent: 0,
            max_usage_age_seconds: 30
        }
    );
    assert_eq!(
        Policy::from_yaml("mode: enforce\nmemory:\n")
            .unwrap()
            .memory,
        MemoryPolicy::default()
    );
    for (doc, want) in [
        ("memory:\n  decrease:\n    belowUsage: deny\n", "belowUsage"),
        (
            "memory:\n  decrease:\n    headroomPercent: 1001\n",
            "between 0 and 1000",
        ),
        (
            "memory:\n  decrease:\n    maxUsageAgeSeconds: 0\n",
            "at least 1",
        ),
        (
            "memory:\n  decrease:\n    headroom: 5\n",
            "unknown field `headroom`",
        ),
        ("memory:\n  shrink: {}\n", "unknown field `shrink`"),
    ] {
        let e = Policy::from_yaml(doc).unwrap_err().to_string();
        assert!(e.contains(want) && e.contains("line"), "{doc}: {e}");
    }
}

#[test]
fn parses_the_full_design_example() {
    let doc = r#"
mode: audit
qos:
  onChange: repair
feasibility:
  rejectInfeasible: false
  rejectStuckDeferred: true
  revertInfeasible: true
preemption:
  enabled: true
  pdb: bestEffort
  maxVictimsPerResize: 3
  maxGracePeriodSeconds: 10
  minDeferredSeconds: 20
  protectedNamespaces: [kube-system, databases]
  protectedSelector: "tier in (db, cache)"
namespaces:
  exclude: [kube-system, monitoring]
"#;
    let p = Policy::from_yaml(doc).unwrap();
    assert_eq!(p.mode, Mode::Audit);
    assert_eq!(p.qos.on_change, OnQosChange::Repair);
    assert!(!p.feasibility.reject_infeasible && p.feasibility.reject_stuck_deferred);
    assert_eq!(p.preemption.pdb, PdbMode::BestEffort);
    assert_eq!(p.preemption.max_victims_per_resize, 3);
    assert_eq!(p.preemption.min_deferred_seconds, 20);
    assert_eq!(
        p.preemption.protected_namespaces,
        vec!["kube-system", "databases"]
    );
    assert_eq!(p.namespaces.exclude, vec!["kube-system", "monitoring"]);
}

#[test]
fn partial_sections_keep_the_other_defaults() {
    let p = Policy::from_yaml(
        "mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: 2\n",
    )
    .unwrap();
    assert_eq!(p.preemption.max_victims_per_resize, 2);
    assert_eq!(p.preemption.max_grace_period_seconds, None);
    assert!(p.feasibility.reject_infeasible);
}

#[test]
fn unknown_keys_are_errors_naming_the_key_and_line() {
    let e = Policy::from_yaml("mode: enforce\npreemption:\n  maxVictim: 3\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.message.contains("maxVictim"), "{e}");
    assert!(
        e.to_string()
            .starts_with("policy.yaml line 3, column 3: preemption: unknown field `maxVictim`"),
        "{e}"
    );
    let e = Policy::from_yaml("modes: audit\n").unwrap_err();
    assert_eq!(e.line, Some(1));
    assert!(e.message.contains("modes"), "{e}");
}

#[test]
fn bad_values_are_errors_naming_the_key_and_line() {
    let e = Policy::from_yaml("qos:\n  onChange: fix\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(
        e.message.contains("fix") && e.message.contains("onChange"),
        "{e}"
    );

    let e = Policy::from_yaml("preemption:\n  maxVictimsPerResize: 0\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.message.contains("maxVictimsPerResize"), "{e}");

    let e = Policy::from_yaml("preemption:\n  maxGracePeriodSeconds: -5\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");

    let e = Policy::from_yaml("feasibility:\n  rejectInfeasible: maybe\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");

    let e = Policy::from_yaml("preemption:\n  protectedSelector: \"env in prod\"\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.message.contains("env in prod"), "{e}");
}

#[test]
fn a_document_that_is_not_a_mapping_is_an_error() {
    assert!(Policy::from_yaml("- a\n- b\n").is_err());
    assert!(Policy::from_yaml("mode: [").is_err());
}

#[test]
fn a_key_with_nothing_after_it_is_the_default_section_or_an_empty_list() {
    let doc = "mode: enforce\nqos:\npreemption:\n  enabled: true\n  protectedNamespaces:\n  circuitBreaker:\nnamespaces:\n  exclude:\n";
    let p = Policy::from_yaml(doc).unwrap();
    assert_eq!(p.qos, QosPolicy::default());
    assert_eq!(p.preemption.circuit_breaker, CircuitBreaker::default());
    assert!(p.preemption.protected_namespaces.is_empty());
    assert!(p.namespaces.exclude.is_empty());
    // A key after the empty one is still read, and refused when unknown.
    let e =
        Policy::from_yaml("preemption:\n  protectedNamespaces:\n  maxVictims: 3\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
}

#[test]
fn yaml_round_trips_for_logging() {
    let p = Policy::from_yaml("mode: audit\npreemption:\n  enabled: true\n  pdb: bestEffort\n")
        .unwrap();
    assert_eq!(Policy::from_yaml(&p.to_yaml()).unwrap(), p);
}

#[test]
fn install_namespace_is_always_excluded() {
    let p = Policy::default();
    assert!(p.excludes_namespace("resize-guard", "resize-guard"));
    assert!(p.excludes_namespace("kube-system", "resize-guard"));
    assert!(!p.excludes_namespace("default", "resize-guard"));
}

/// Parses `doc`, prints how long that took, and returns the error it must give.
fn refused(what: &str, doc: &str) -> PolicyError {
    let start = std::time::Instant::now();
    let result = Policy::from_yaml(doc);
    println!(
        "{what} ({} bytes): {:?}: {:?}",
        doc.len(),
        start.elapsed(),
        result
            .as_ref()
            .map(|_| "accepted")
            .map_err(|e| e.to_string())
    );
    // The budget alone refuses it too, where no field's type would: any YAML is read.
    let start = std::time::Instant::now();
    let any = super::yaml::parse::<serde::de::IgnoredAny>(doc);
    println!("  budget alone: {:?}: {:?}", start.elapsed(), any);
    assert!(any.is_err(), "{what}: within the budget");
    match result {
        Ok(p) => panic!("{what} accepted as {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn deep_flow_nesting_is_refused_by_the_parser_budget() {
    // Found by `fuzz_policy` against libyaml, which parses nested flow collections in
    // quadratic time (16 000 nested `{a: ` took 1.5 s).
    for depth in [16_000, 50_000] {
        let doc = format!("mode: {}1{}\n", "{a: ".repeat(depth), "}".repeat(depth));
        let e = refused(&format!("{depth} nested {{a: "), &doc);
        assert_eq!(e.line, Some(1), "{e}");
    }
    refused("20 000 ['s", &format!("preemption: {}", "[".repeat(20_000)));
    // Deep block nesting too.
    let block: String = (0..500).map(|i| format!("{}a:\n", " ".repeat(i))).collect();
    refused("500 nested block mappings", &block);
    // A flow-style policy is far below the budget.
    let p = Policy::from_yaml(
        "{mode: audit, preemption: {enabled: true, protectedNamespaces: [a, b]}}",
    )
    .unwrap();
    assert!(p.is_audit());
}

#[test]
fn an_alias_bomb_is_refused_by_the_parser_budget() {
    // "Billion laughs": ten aliases per level, nine levels, 10^9 strings once expanded.
    let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        doc.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    refused("billion laughs at the top", &doc);
    // Under a real key, where the policy would read it.
    let nested = format!(
        "preemption:\n  protectedNamespaces: &n0 [a, a, a, a, a, a, a, a, a, a]\nnamespaces:\n  exclude: [{}]\n",
        vec!["*n0"; 5_000].join(", ")
    );
    refused("5 000 aliases of a list", &nested);
    // A few aliases are YAML a policy may use.
    let p = Policy::from_yaml(
        "mode: audit\npreemption:\n  enabled: true\n  protectedNamespaces: &ns [db, cache]\nnamespaces:\n  exclude: *ns\n",
    )
    .unwrap();
    assert_eq!(p.namespaces.exclude, vec!["db", "cache"]);
}

#[test]
fn a_document_far_larger_than_a_policy_is_refused_by_the_parser_budget() {
    const MIB: usize = 1024 * 1024;
    let mut comments = String::from("mode: audit\n");
    while comments.len() < MIB {
        comments.push_str("# a comment that goes on and on and on and on and on and on\n");
    }
    refused("1 MiB of comments", &comments);
    let mut list = String::from("namespaces:\n  exclude:\n");
    while list.len() < MIB {
        list.push_str("  - a-namespace-name\n");
    }
    refused("1 MiB block list", &list);
    let scalar = format!(
        "preemption:\n  protectedSelector: \"{}\"\n",
        "a".repeat(MIB)
    );
    refused("1 MiB scalar", &scalar);
    refused(
        "1 MiB of blank lines",
        &format!("mode: audit{}", "\n".repeat(MIB)),
    );
    // Within the size budget, a long document still parses in linear time.
    let mut long = String::from("mode: audit\n");
    while long.len() < 250 * 1024 {
        long.push_str("# a comment that goes on and on and on and on and on and on\n");
    }
    let start = std::time::Instant::now();
    assert!(Policy::from_yaml(&long).unwrap().is_audit());
    println!("250 KiB of comments, accepted: {:?}", start.elapsed());
    let mut list = String::from("namespaces:\n  exclude:\n");
    while list.len() < 250 * 1024 {
        list.push_str("  - a-namespace-name\n");
    }
    refused("250 KiB block list", &list);
}

#[test]
fn quoted_booleans_and_numbers_are_strings_not_values() {
    for doc in [
        "feasibility:\n  rejectInfeasible: \"true\"\n",
        "feasibility:\n  rejectInfeasible: yes\n",
        "preemption:\n  minDeferredSeconds: \"7\"\n",
        "preemption:\n  maxVictimsPerResize: '3'\n",
        "preemption:\n  maxGracePeriodSeconds: 1.5\n",
        "preemption:\n  circuitBreaker:\n    pauseSeconds: 4294967296\n",
    ] {
        let e = Policy::from_yaml(doc).unwrap_err();
        assert_eq!(e.line, Some(doc.lines().count()), "{doc:?}: {e}");
    }
    let p =
        Policy::from_yaml("mode: enforce\npreemption:\n  enabled: true\n  maxGracePeriodSeconds: ~\n  minDeferredSeconds: 0x10\n")
            .unwrap();
    assert_eq!(p.preemption.max_grace_period_seconds, None);
    assert_eq!(p.preemption.min_deferred_seconds, 16);
}

/// The block scalar under `key` (`key: |` then its indented lines) in a shipped file.
fn block_under(path: &str, key: &str) -> String {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut lines = text.lines().skip_while(|l| l.trim() != format!("{key}: |"));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("{path}: no `{key}: |`"));
    let outer = header.len() - header.trim_start().len();
    let body: Vec<&str> = lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > outer)
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    body.iter()
        .map(|l| l.get(indent..).unwrap_or("").to_owned() + "\n")
        .collect()
}

#[test]
fn every_shipped_policy_parses() {
    for (path, key) in [
        ("deploy/base/policy.yaml", "policy.yaml"),
        ("charts/resize-guard/values.yaml", "config"),
    ] {
        let doc = block_under(path, key);
        assert!(doc.contains("preemption:"), "{path}: read\n{doc}");
        let p = Policy::from_yaml(&doc).unwrap_or_else(|e| panic!("{path}: {e}\n{doc}"));
        assert_eq!(Policy::from_yaml(&p.to_yaml()).unwrap(), p, "{path}");
    }
}

#[test]
fn a_config_map_without_the_key_is_an_error_not_the_defaults() {
    let e = Policy::from_config_map(None).unwrap_err();
    assert!(e.to_string().contains("has no key policy.yaml"), "{e}");
    let other: std::collections::BTreeMap<String, String> =
        [("policy.yml".to_owned(), "mode: audit\n".to_owned())].into();
    assert!(Policy::from_config_map(Some(&other)).is_err());
    let empty: std::collections::BTreeMap<String, String> =
        [(POLICY_KEY.to_owned(), String::new())].into();
    assert!(Policy::from_config_map(Some(&empty)).is_err());
    let data: std::collections::BTreeMap<String, String> =
        [(POLICY_KEY.to_owned(), "mode: audit\n".to_owned())].into();
    assert!(Policy::from_config_map(Some(&data)).unwrap().is_audit());
    let bad: std::collections::BTreeMap<String, String> =
        [(POLICY_KEY.to_owned(), "mode: loud\n".to_owned())].into();
    assert!(Policy::from_config_map(Some(&bad)).is_err());
}

#[test]
fn kube_system_and_the_install_namespace_are_always_protected_and_the_list_adds() {
    let mut p = Policy::from_yaml(
        "mode: enforce\npreemption:\n  enabled: true\n  protectedNamespaces: [databases]\n",
    )
    .unwrap();
    for ns in ["kube-system", "resize-guard", "databases"] {
        assert!(p.protects_namespace(ns, "resize-guard"), "{ns}");
    }
    assert!(!p.protects_namespace("batch", "resize-guard"));
    p.preemption.protected_namespaces.clear();
    assert!(p.protects_namespace("kube-system", "resize-guard"));
}

#[test]
fn a_victim_keeps_its_own_grace_unless_a_cap_is_set() {
    let mut p = Policy::default();
    assert_eq!(p.victim_grace_seconds(Some(600)), 600);
    assert_eq!(p.victim_grace_seconds(None), 30);
    assert_eq!(p.victim_grace_seconds(Some(-5)), 0);
    p.preemption.max_grace_period_seconds = Some(20);
    assert_eq!(p.victim_grace_seconds(Some(600)), 20);
    assert_eq!(p.victim_grace_seconds(Some(5)), 5);
}

#[test]
fn the_brakes_have_safe_defaults_and_refuse_a_zero_rate() {
    let p = Policy::default();
    assert_eq!(p.preemption.max_evictions_per_minute, 20);
    assert_eq!(p.preemption.circuit_breaker.futile_plans, 3);
    let p = Policy::from_yaml(
        "mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: 2\n  maxEvictionsPerMinute: 12\n  circuitBreaker:\n    futilePlans: 0\n",
    )
    .unwrap();
    assert_eq!(p.preemption.max_evictions_per_minute, 12);
    assert_eq!(p.preemption.circuit_breaker.futile_plans, 0);
    assert_eq!(p.preemption.circuit_breaker.pause_seconds, 300);
    assert!(
        p.to_yaml().contains("maxEvictionsPerMinute: 12"),
        "{}",
        p.to_yaml()
    );
    let e = Policy::from_yaml("preemption:\n  maxEvictionsPerMinute: 0\n").unwrap_err();
    assert!(
        e.to_string()
            .contains("maxEvictionsPerMinute must be at least 1"),
        "{e}"
    );
    let e = Policy::from_yaml("preemption:\n  circuitBreaker:\n    futile: 1\n").unwrap_err();
    assert!(e.to_string().contains("futile"), "{e}");
}

#[test]
fn the_stall_timer_defaults_to_ten_minutes_and_refuses_values_out_of_range() {
    assert_eq!(Policy::default().preemption.stall_after_seconds, 600);
    let p =
        Policy::from_yaml("mode: enforce\npreemption:\n  enabled: true\n  stallAfterSeconds: 20\n")
            .unwrap();
    assert_eq!(p.preemption.stall_after_seconds, 20);
    assert!(
        p.to_yaml().contains("stallAfterSeconds: 20"),
        "{}",
        p.to_yaml()
    );
    for bad in ["0", "9", "86401", "-1", "'60'", "1.5"] {
        let e =
            Policy::from_yaml(&format!("preemption:\n  stallAfterSeconds: {bad}\n")).unwrap_err();
        assert!(
            e.to_string().contains("stallAfterSeconds") && e.line == Some(2),
            "{bad}: {e}"
        );
    }
    let edge = Policy::from_yaml(
        "mode: enforce\npreemption:\n  enabled: true\n  stallAfterSeconds: 86400\n",
    )
    .unwrap();
    assert_eq!(edge.preemption.stall_after_seconds, 86_400);
}

#[test]
fn the_tenant_brakes_default_to_a_namespace_budget_under_the_cluster_rate_and_a_namespace_breaker()
{
    let p = Policy::default();
    assert_eq!(p.preemption.max_evictions_per_namespace_per_minute, 6);
    assert!(
        p.preemption.max_evictions_per_namespace_per_minute < p.preemption.max_evictions_per_minute
    );
    assert_eq!(p.preemption.circuit_breaker.scope, BreakerScope::Namespace);
    let p = Policy::from_yaml(
        "mode: enforce\npreemption:\n  enabled: true\n  maxEvictionsPerNamespacePerMinute: 3\n  circuitBreaker:\n    scope: node\n",
    )
    .unwrap();
    assert_eq!(p.preemption.max_evictions_per_namespace_per_minute, 3);
    assert_eq!(p.preemption.circuit_breaker.scope, BreakerScope::Node);
    assert_eq!(p.preemption.circuit_breaker.futile_plans, 3);
    let yaml = p.to_yaml();
    assert!(
        yaml.contains("maxEvictionsPerNamespacePerMinute: 3") && yaml.contains("scope: node"),
        "{yaml}"
    );
    assert_eq!(Policy::from_yaml(&yaml).unwrap(), p);
    let p = Policy::from_yaml(
        "mode: enforce\npreemption:\n  enabled: true\n  circuitBreaker:\n    scope: cluster\n",
    )
    .unwrap();
    assert_eq!(p.preemption.circuit_breaker.scope, BreakerScope::Cluster);
    let e = Policy::from_yaml("preemption:\n  maxEvictionsPerNamespacePerMinute: 0\n").unwrap_err();
    assert!(
        e.to_string()
            .contains("maxEvictionsPerNamespacePerMinute must be at least 1"),
        "{e}"
    );
    assert_eq!(e.line, Some(2), "{e}");
    for bad in ["tenant", "\"\"", "[namespace]", "1"] {
        let doc = format!("preemption:\n  circuitBreaker:\n    scope: {bad}\n");
        let e = Policy::from_yaml(&doc).unwrap_err();
        assert!(e.to_string().contains("scope"), "{bad}: {e}");
    }
    let e =
        Policy::from_yaml("preemption:\n  maxEvictionsPerNamespacePerMinute: -1\n").unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
}
