//! `deploy/components/monitoring`, monitoring without Helm: its PodMonitor, PrometheusRule and
//! dashboard ConfigMap are generated from `helm template` of the chart (every monitoring object
//! enabled, Helm's labels left out) and must stay byte for byte what the chart renders;
//! `RESIZE_GUARD_BLESS=1` rewrites them instead of failing. `kubectl kustomize` of a user's
//! kustomization of `deploy/` with the component renders those objects unchanged (render
//! parity with the chart), and, moved to another namespace the documented way (`namespace:` plus
//! `deploy/follow-namespace` under `transformers:`), puts them in that namespace with a
//! PodMonitor that selects the moved pods there and rules that name no namespace; in both, the
//! rules pass `promtool check rules`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use resize_guard_harness::binaries::Binaries;
use resize_guard_harness::install::repo_root;
use serde_json::Value;

use crate::install::helm::objects;

use super::{ALL_MONITORING, NAMESPACE, RuleFile, alerts, run, template_text};

const COMPONENT: &str = "deploy/components/monitoring";
/// Each generated file and the chart template it is rendered from.
const FILES: [(&str, &str); 3] = [
    ("pod-monitor.yaml", "templates/pod-monitor.yaml"),
    ("prometheus-rule.yaml", "templates/prometheus-rule.yaml"),
    ("grafana-dashboard.yaml", "templates/grafana-dashboard.yaml"),
];
/// The labels Helm charts add by convention; the component leaves them out.
const HELM_LABELS: [&str; 3] = [
    "helm.sh/chart:",
    "app.kubernetes.io/managed-by:",
    "app.kubernetes.io/instance:",
];
const BLESS: &str = "RESIZE_GUARD_BLESS=1 make e2e SUITES=install::monitoring::component";

/// Held by the tests here: a blessing run rewrites the files the other renders.
static FILES_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A component file as generated from the chart's `template`.
fn generated(template: &str) -> String {
    let rendered = template_text(&[template], &ALL_MONITORING);
    let body: Vec<&str> = rendered
        .lines()
        .filter(|l| *l != "---" && !l.starts_with("# Source: "))
        .filter(|l| !HELM_LABELS.iter().any(|h| l.trim_start().starts_with(h)))
        .collect();
    format!(
        "# GENERATED from charts/resize-guard/{template} by `helm template` with\n\
         # podMonitor, prometheusRule and grafanaDashboard enabled, Helm's labels left out\n\
         # (tests/e2e/install/monitoring/component.rs). Do not edit: change the chart, then run\n\
         #   {BLESS}\n{}\n",
        body.join("\n")
    )
}

/// The monitoring objects of a render: (kind, namespace, name) of each, by kind.
fn monitoring(objs: &BTreeMap<(String, String, String), Value>) -> BTreeMap<String, Value> {
    objs.iter()
        .filter(|((kind, _, name), _)| {
            ["PodMonitor", "PrometheusRule"].contains(&kind.as_str())
                || (kind == "ConfigMap" && name == "resize-guard-dashboard")
        })
        .map(|((kind, _, _), v)| (kind.clone(), v.clone()))
        .collect()
}

/// A user's kustomization of `deploy/` with the component, `extra` added, written three levels
/// below the repository root; `kubectl kustomize` of it.
fn kustomize(name: &str, extra: &str) -> String {
    let dir = repo_root()
        .join("target/harness-overlays")
        .join(format!("{}-monitoring-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - ../../../deploy\ncomponents:\n  - ../../../{COMPONENT}\n{extra}"
        ),
    )
    .unwrap();
    let kubectl: PathBuf = Binaries::locate()
        .unwrap_or_else(|e| panic!("{e:#}"))
        .kubectl;
    let out = run(&kubectl, &["kustomize", &dir.display().to_string()]);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn the_component_is_the_charts_render() {
    let _files = FILES_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = repo_root().join(COMPONENT);
    let bless = std::env::var_os("RESIZE_GUARD_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (file, template) in FILES {
        let want = generated(template);
        let path = dir.join(file);
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have == want {
            continue;
        }
        if bless {
            std::fs::write(&path, &want).unwrap();
            eprintln!("wrote {}", path.display());
            continue;
        }
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        stale.push(format!(
            "{COMPONENT}/{file} differs from the chart's {template} from line {}:\n  \
             committed: {:?}\n  chart:     {:?}",
            line + 1,
            have.lines().nth(line).unwrap_or("(end)"),
            want.lines().nth(line).unwrap_or("(end)"),
        ));
    }
    assert!(
        stale.is_empty(),
        "{}\nregenerate the component with: {BLESS}",
        stale.join("\n")
    );
}

#[test]
fn kustomize_renders_the_charts_monitoring_in_place_and_moved() {
    let _files = FILES_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // The chart's objects, Helm's labels aside.
    let mut chart = monitoring(&objects(&template_text(
        &FILES.map(|(_, t)| t),
        &ALL_MONITORING,
    )));
    for v in chart.values_mut() {
        let labels = v["metadata"]["labels"].as_object_mut().unwrap();
        labels.retain(|k, _| {
            !HELM_LABELS
                .iter()
                .any(|h| h.strip_suffix(':') == Some(k.as_str()))
        });
    }
    assert_eq!(chart.len(), 3, "{chart:?}");

    let in_place = objects(&kustomize("in-place", ""));
    let found = monitoring(&in_place);
    for (kind, object) in &chart {
        assert_eq!(
            found.get(kind),
            Some(object),
            "{kind}: kubectl kustomize of deploy/ with {COMPONENT} differs from the chart"
        );
        assert_eq!(object["metadata"]["namespace"], NAMESPACE, "{kind}");
    }
    RuleFile::checked(&found["PrometheusRule"]);
    assert_selects_the_pods(&found["PodMonitor"], &in_place);

    let ns = "platform-rg";
    let moved = objects(&kustomize(
        "moved",
        &format!("namespace: {ns}\ntransformers:\n  - ../../../deploy/follow-namespace\n"),
    ));
    let found = monitoring(&moved);
    assert_eq!(found.len(), 3, "{found:?}");
    for (kind, object) in &found {
        assert_eq!(object["metadata"]["namespace"], ns, "{kind} moves");
        let mut unmoved = object.clone();
        unmoved["metadata"]["namespace"] = NAMESPACE.into();
        assert_eq!(
            Some(&unmoved),
            chart.get(kind),
            "{kind}: only its namespace moves"
        );
    }
    let rule = &found["PrometheusRule"];
    for (name, alert) in alerts(rule) {
        let expr = alert["expr"].as_str().unwrap();
        assert!(
            !expr.contains("namespace="),
            "{name} names a namespace, which kustomize does not move: {expr}"
        );
    }
    RuleFile::checked(rule);
    assert_selects_the_pods(&found["PodMonitor"], &moved);
}

/// The PodMonitor looks in its own namespace (no namespaceSelector) and its selector matches
/// the pod template of both Deployments there, by the labels the pods really carry.
fn assert_selects_the_pods(monitor: &Value, objs: &BTreeMap<(String, String, String), Value>) {
    let spec = &monitor["spec"];
    assert!(spec.get("namespaceSelector").is_none(), "{spec}");
    assert_eq!(spec["jobLabel"], "app.kubernetes.io/name");
    let ns = monitor["metadata"]["namespace"].as_str().unwrap();
    for deployment in ["resize-guard-webhook", "resize-guard-controller"] {
        let key = (
            "Deployment".to_owned(),
            ns.to_owned(),
            deployment.to_owned(),
        );
        let labels = &objs[&key]["spec"]["template"]["metadata"]["labels"];
        for expr in spec["selector"]["matchExpressions"].as_array().unwrap() {
            assert_eq!(expr["operator"], "In");
            let value = &labels[expr["key"].as_str().unwrap()];
            assert!(
                expr["values"].as_array().unwrap().contains(value),
                "{deployment}'s pods ({labels}) are not selected by {expr}"
            );
        }
        let port = spec["podMetricsEndpoints"][0]["port"].as_str().unwrap();
        let ports = &objs[&key]["spec"]["template"]["spec"]["containers"][0]["ports"];
        assert!(
            ports.as_array().unwrap().iter().any(|p| p["name"] == port),
            "{deployment} has no port {port}: {ports}"
        );
    }
}
