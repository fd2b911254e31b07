//! Monitoring as an operator's Prometheus sees it, with Prometheus's own tools (`promtool` and
//! `scrapeparse`: `model/textparse.New`, built from github.com/prometheus/prometheus by
//! `third_party/promtool/build.sh`) and upstream `helm` and `kubectl`:
//!
//! - [`scraped`]: both programs' `/metrics` against a real kube-apiserver v1.37.2, parsed as a
//!   scrape would; the chart's alerts evaluated by `promtool test rules` on series made of the
//!   values scraped there (quiet on the healthy install, firing on the real failures the test
//!   causes: the webhook stopped, the policy ConfigMap broken) and on failing series made from
//!   them ([`inputs`]); the dashboard's queries against the metrics really exported
//!   ([`dashboard`]); `/metrics` read as Prometheus reads it ([`exposition`]);
//! - [`rules`]: what needs no cluster — every alert has a runbook in `docs/src/runbooks/` and
//!   every runbook an alert, the thresholds follow the chart's values, "no controller leading"
//!   stays quiet when nothing is scraped, and the admission-bypass alert on synthetic series;
//! - [`component`]: `deploy/components/monitoring` is the chart's render (regenerated with
//!   `RESIZE_GUARD_BLESS=1`), and `kubectl kustomize` of `deploy/` with it, in place or moved to
//!   another namespace, holds those objects and rules `promtool` accepts.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod component;
mod dashboard;
mod exposition;
mod inputs;
mod rules;
mod scraped;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use resize_guard_harness::install::repo_root;
use serde_json::{Value, json};

const NAMESPACE: &str = "resize-guard";
/// The job label the chart's PodMonitor and ServiceMonitor give every series
/// (`prometheusRule.selector`).
const JOB: &str = "resize-guard";
/// The values that render every monitoring object of the chart.
const ALL_MONITORING: [&str; 3] = [
    "podMonitor.enabled=true",
    "prometheusRule.enabled=true",
    "grafanaDashboard.enabled=true",
];

/// `promtool` and `scrapeparse`, from `RESIZE_GUARD_PROMTOOL_BIN` (never skipped).
fn tool(name: &str) -> PathBuf {
    let hint = "build them with third_party/promtool/build.sh and run the tests with \
                RESIZE_GUARD_PROMTOOL_BIN=\"$(third_party/promtool/build.sh | tail -n 1)/promtool\" \
                (make e2e does)";
    let Some(promtool) = std::env::var_os("RESIZE_GUARD_PROMTOOL_BIN") else {
        panic!("RESIZE_GUARD_PROMTOOL_BIN is not set: {hint}");
    };
    let path = PathBuf::from(promtool).with_file_name(name);
    assert!(path.is_file(), "{} is missing: {hint}", path.display());
    path
}

fn helm() -> PathBuf {
    let Some(bin) = std::env::var_os("RESIZE_GUARD_HELM_BIN") else {
        panic!(
            "RESIZE_GUARD_HELM_BIN is not set: RESIZE_GUARD_HELM_BIN=\"$(third_party/helm/build.sh | tail -n 1)/helm\""
        );
    };
    PathBuf::from(bin)
}

fn run(program: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {}:\n{}\n{}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `helm template resize-guard charts/resize-guard -n resize-guard --show-only <show…> --set
/// <set…>`: the text Helm prints.
fn template_text(show: &[&str], set: &[&str]) -> String {
    let chart = repo_root()
        .join("charts/resize-guard")
        .display()
        .to_string();
    let mut args = vec!["template", "resize-guard", &chart, "-n", NAMESPACE];
    for s in show {
        args.extend(["--show-only", s]);
    }
    for s in set {
        args.extend(["--set", s]);
    }
    run(&helm(), &args)
}

/// One rendered template as a value.
fn template(show: &str, set: &[&str]) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(&template_text(&[show], set)).unwrap()
}

/// The chart's PrometheusRule rendered with `set` (and the PodMonitor, so every alert is there).
fn rendered_rule(set: &[&str]) -> Value {
    let mut all = vec!["prometheusRule.enabled=true", "podMonitor.enabled=true"];
    all.extend_from_slice(set);
    serde_json::to_value(template("templates/prometheus-rule.yaml", &all)).unwrap()
}

/// Every alerting rule of a PrometheusRule: (alert name, rule).
fn alerts(rule: &Value) -> BTreeMap<String, Value> {
    rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .filter_map(|r| Some((r["alert"].as_str()?.to_owned(), r.clone())))
        .collect()
}

/// A rule file for promtool, written from a PrometheusRule's groups: `promtool check rules`
/// passes on it as rendered, and `test` evaluates a copy without annotations (they are templates
/// `check rules` validates; promtool's tests would otherwise have to quote each expanded text).
struct RuleFile {
    dir: tempfile::TempDir,
    evaluated: PathBuf,
}

impl RuleFile {
    fn checked(rule: &Value) -> RuleFile {
        let groups = rule["spec"]["groups"].clone();
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join("rules.yaml");
        std::fs::write(
            &rules,
            serde_yaml_ng::to_string(&json!({"groups": groups})).unwrap(),
        )
        .unwrap();
        let checked = run(
            &tool("promtool"),
            &["check", "rules", &rules.display().to_string()],
        );
        let count = alerts(rule).len();
        assert!(
            checked.contains(&format!("SUCCESS: {count} rules found")),
            "{checked}"
        );
        let mut evaluated = groups;
        for group in evaluated.as_array_mut().unwrap() {
            for rule in group["rules"].as_array_mut().unwrap() {
                rule.as_object_mut().unwrap().remove("annotations");
            }
        }
        let path = dir.path().join("evaluated.yaml");
        std::fs::write(
            &path,
            serde_yaml_ng::to_string(&json!({"groups": evaluated})).unwrap(),
        )
        .unwrap();
        RuleFile {
            dir,
            evaluated: path,
        }
    }

    /// `promtool test rules` on `tests` (each a promtool test group); panics with its output.
    fn test(&self, tests: Vec<Value>) {
        let path = self.dir.path().join("tests.yaml");
        std::fs::write(
            &path,
            serde_yaml_ng::to_string(&json!({
                "rule_files": [self.evaluated.display().to_string()],
                "evaluation_interval": "1m",
                "tests": tests,
            }))
            .unwrap(),
        )
        .unwrap();
        run(
            &tool("promtool"),
            &["test", "rules", &path.display().to_string()],
        );
    }
}

/// A promtool input series: `name{labels}` with `values`.
fn series(name: &str, labels: &[(&str, &str)], values: String) -> Value {
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    json!({"series": format!("{name}{{{}}}", labels.join(",")), "values": values})
}

/// The target labels the Prometheus Operator gives a series of the pod `pod` scraped by the
/// chart's PodMonitor (`job` from the pod's app.kubernetes.io/name).
fn target(pod: &'static str, container: &'static str) -> [(&'static str, &'static str); 4] {
    [
        ("job", JOB),
        ("namespace", NAMESPACE),
        ("pod", pod),
        ("container", container),
    ]
}

/// `alert` quiet at `at`.
fn silent(alert: &str, at: &str) -> Value {
    json!({"eval_time": at, "alertname": alert, "exp_alerts": []})
}

/// Each alert quiet at `at`.
fn quiet(alerts: &[&str], at: &str) -> Vec<Value> {
    alerts.iter().map(|a| silent(a, at)).collect()
}

/// `alert` firing at `at` once for each label set of `instances` (its severity added to each).
fn firing(alert: &str, at: &str, severity: &str, instances: &[&[(&str, &str)]]) -> Value {
    let exp: Vec<Value> = instances
        .iter()
        .map(|labels| {
            let mut exp: serde_json::Map<String, Value> = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
                .collect();
            exp.insert("severity".into(), severity.into());
            json!({"exp_labels": exp})
        })
        .collect();
    json!({"eval_time": at, "alertname": alert, "exp_alerts": exp})
}
