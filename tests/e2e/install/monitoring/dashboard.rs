//! The Grafana dashboard's panels against what is really exported: every metric a panel queries
//! is scraped from a program (or registered by it with no series yet) or from the real API
//! server, and the panels operators look for are there.

use std::collections::BTreeSet;

use resize_guard_harness::install::repo_root;
use serde_json::Value;

use super::exposition::Parsed;
use super::template;

/// A metric the programs register whose family has no series yet here (prometheus_client
/// leaves an empty family out of the exposition: no preemption and no intake refusal happen in
/// this test), found by its registration in the program's metrics module.
fn registered_but_empty(metric: &str) -> bool {
    let Some(base) = metric.strip_prefix("resize_guard_") else {
        return false;
    };
    let base = ["_total", "_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| base.strip_suffix(s))
        .unwrap_or(base);
    ["webhook/src/metrics.rs", "controller/src/metrics.rs"]
        .iter()
        .any(|f| {
            std::fs::read_to_string(repo_root().join(f))
                .unwrap()
                .contains(&format!("\"{base}\","))
        })
}

/// Every metric a dashboard panel queries is exported by a program (scraped, or registered with
/// no series yet) or by the real API server.
pub(super) fn check_dashboard(programs: &[&Parsed], apiserver: &Parsed) {
    let cm = template(
        "templates/grafana-dashboard.yaml",
        &["grafanaDashboard.enabled=true"],
    );
    let text = cm["data"]["resize-guard.json"].as_str().unwrap();
    let dashboard: Value = serde_json::from_str(text).unwrap();
    // A family declared with no series yet (no preemption happened here) counts as exported:
    // its sample names are the family's with the type's suffixes.
    let mut known: BTreeSet<String> = programs
        .iter()
        .map(|p| p.names())
        .chain([apiserver.names()])
        .flatten()
        .collect();
    for parsed in programs {
        for (family, typ) in &parsed.types {
            let suffixes: &[&str] = match typ.as_str() {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            known.extend(suffixes.iter().map(|s| format!("{family}{s}")));
        }
    }
    let panels = dashboard["panels"].as_array().unwrap();
    let titles: BTreeSet<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    let wanted = [
        "Deferred pods",
        "Oldest Deferred resize",
        "Time to unblock p50 / p99",
        "API server → webhook call duration p50 / p99",
    ];
    let missing: Vec<&str> = wanted.into_iter().filter(|w| !titles.contains(w)).collect();
    assert!(missing.is_empty(), "no panels {missing:?}: {titles:?}");
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    for panel in panels {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let metrics: Vec<&str> = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .filter(|t| {
                    ["resize_guard_", "process_", "apiserver_"]
                        .iter()
                        .any(|p| t.starts_with(p))
                })
                .collect();
            assert!(!metrics.is_empty(), "{}: {expr}", panel["title"]);
            for m in metrics {
                assert!(
                    known.contains(m) || registered_but_empty(m),
                    "panel {}: {m} is not a scraped metric ({expr})",
                    panel["title"]
                );
            }
        }
    }
}
