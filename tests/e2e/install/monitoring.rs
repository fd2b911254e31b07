//! Monitoring as an operator's Prometheus sees it, against a real kube-apiserver v1.37.2 and both
//! programs installed from `deploy/` (`installed::Installed`):
//!
//! - `/metrics` of the webhook and the controller is labelled OpenMetrics and parses with
//!   Prometheus's own scrape parser (`scrapeparse`: `model/textparse.New` with the response's
//!   Content-Type, built from github.com/prometheus/prometheus by `scripts/build-promtool.sh`),
//!   with `resize_guard_build_info`, the `process_*` metrics, `resize_guard_policy_mode`
//!   (`enforce` 1, `audit` 0), `resize_guard_policy_in_force` (`configmap` 1) and the
//!   `resize_guard_kubernetes_*` metrics (v1.37, supported) present with their types;
//! - the chart's PrometheusRule (`helm template --set prometheusRule.enabled=true`) passes
//!   `promtool check rules`, and `promtool test rules` evaluates each alert against input series
//!   made of the values scraped here — the programs' and the real API server's
//!   `apiserver_admission_webhook_fail_open_count` after the webhook was stopped and a resize
//!   really failed open — firing when it should and not on the healthy install (annotations are
//!   left out of the evaluated copy: they are templates `check rules` validates);
//! - the Grafana dashboard's ConfigMap renders, its JSON parses, and every metric its panels
//!   query is among those scraped.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::install::repo_root;
use resize_guard_harness::installed::Installed;
use resize_guard_harness::objects::cpu_resize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const NAMESPACE: &str = "resize-guard";

/// `promtool` and `scrapeparse`, from `RESIZE_GUARD_PROMTOOL_BIN` (never skipped).
fn tool(name: &str) -> PathBuf {
    let hint = "build them with scripts/build-promtool.sh and run the tests with \
                RESIZE_GUARD_PROMTOOL_BIN=\"$(scripts/build-promtool.sh | tail -n 1)/promtool\" \
                (make unit does)";
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
            "RESIZE_GUARD_HELM_BIN is not set: RESIZE_GUARD_HELM_BIN=\"$(scripts/build-helm.sh | tail -n 1)/helm\""
        );
    };
    PathBuf::from(bin)
}

/// `GET path` on a loopback health port: (Content-Type, body).
async fn scrape(port: u16, path: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .expect("a Content-Type");
    (content_type, body.to_owned())
}

/// One parsed exposition: family types and samples (name, labels text, value).
#[derive(Debug, Default)]
struct Parsed {
    types: BTreeMap<String, String>,
    samples: Vec<(String, String, f64)>,
}

impl Parsed {
    fn names(&self) -> BTreeSet<String> {
        self.samples.iter().map(|(n, _, _)| n.clone()).collect()
    }

    fn value(&self, name: &str, label: &str) -> Option<f64> {
        self.samples
            .iter()
            .find(|(n, l, _)| n == name && l.contains(label))
            .map(|s| s.2)
    }
}

/// Parses `body` as Prometheus's scrape loop would for `content_type`; panics with the parser's
/// error.
fn parse(content_type: &str, body: &str) -> Parsed {
    use std::io::Write;
    let mut child = std::process::Command::new(tool("scrapeparse"))
        .arg(content_type)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "Prometheus's parser refused the body ({content_type}): {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut parsed = Parsed::default();
    for line in stdout.lines() {
        let mut f = line.splitn(4, ' ');
        match (f.next(), f.next(), f.next(), f.next()) {
            (Some("TYPE"), Some(name), Some(typ), None) => {
                parsed.types.insert(name.to_owned(), typ.to_owned());
            }
            (Some("SAMPLE"), Some(name), Some(value), Some(labels)) => {
                parsed
                    .samples
                    .push((name.to_owned(), labels.to_owned(), value.parse().unwrap()))
            }
            _ => panic!("unexpected scrapeparse line {line:?}"),
        }
    }
    parsed
}

fn run(program: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap();
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

fn template(show: &str, set: &[&str]) -> serde_yaml_ng::Value {
    let chart = repo_root()
        .join("charts/resize-guard")
        .display()
        .to_string();
    let mut args = vec![
        "template",
        "rg",
        &chart,
        "-n",
        NAMESPACE,
        "--show-only",
        show,
    ];
    for s in set {
        args.extend(["--set", s]);
    }
    serde_yaml_ng::from_str(&run(&helm(), &args)).unwrap()
}

fn check_program(what: &str, (content_type, body): &(String, String), program: &str) -> Parsed {
    assert_eq!(content_type, OPENMETRICS, "{what} /metrics Content-Type");
    let parsed = parse(content_type, body);
    for (family, typ) in [
        ("resize_guard_build_info", "gauge"),
        ("resize_guard_policy_mode", "gauge"),
        ("resize_guard_policy_in_force", "gauge"),
        ("resize_guard_kubernetes_info", "gauge"),
        ("resize_guard_kubernetes_feature", "gauge"),
        ("resize_guard_kubernetes_version_errors", "counter"),
        ("resize_guard_kubernetes_version_changes", "counter"),
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ] {
        assert_eq!(
            parsed.types.get(family).map(String::as_str),
            Some(typ),
            "{what}: the type of {family}\n{body}"
        );
    }
    let build = parsed
        .value("resize_guard_build_info", &format!("program=\"{program}\""))
        .unwrap_or_else(|| panic!("{what}: no build_info for {program}\n{body}"));
    assert_eq!(build, 1.0);
    assert!(parsed.value("process_resident_memory_bytes", "").unwrap() > 1e6);
    assert!(parsed.value("process_open_fds", "").unwrap() >= 3.0);
    // deploy/base/policy.yaml is in force, read from the ConfigMap (both programs are ready,
    // so their views have listed it).
    for (family, label, want) in [
        ("resize_guard_policy_mode", "mode=\"enforce\"", 1.0),
        ("resize_guard_policy_mode", "mode=\"audit\"", 0.0),
        ("resize_guard_policy_in_force", "origin=\"configmap\"", 1.0),
        ("resize_guard_policy_in_force", "origin=\"last-good\"", 0.0),
        ("resize_guard_policy_in_force", "origin=\"none\"", 0.0),
        ("resize_guard_kubernetes_info", "minor=\"1.37\"", 1.0),
        ("resize_guard_kubernetes_version_changes_total", "", 0.0),
    ] {
        assert_eq!(
            parsed.value(family, label),
            Some(want),
            "{what}: {family}{{{label}}}\n{body}"
        );
    }
    assert!(
        parsed
            .value("resize_guard_kubernetes_info", "support=\"supported\"")
            .is_some(),
        "{what}: v1.37 is supported\n{body}"
    );
    assert!(
        parsed
            .value("resize_guard_kubernetes_version_errors_total", "")
            .is_some(),
        "{what}: resize_guard_kubernetes_version_errors_total missing\n{body}"
    );
    assert_eq!(
        parsed.value("resize_guard_process_metrics_errors_total", ""),
        Some(0.0),
        "{what}: /proc read errors"
    );
    parsed
}

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

/// A promtool input series: `name{labels}` with `values`.
fn series(name: &str, labels: &[(&str, &str)], values: String) -> Value {
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    json!({"series": format!("{name}{{{}}}", labels.join(",")), "values": values})
}

#[tokio::test]
async fn prometheus_parses_both_programs_and_the_rules_fire_on_real_failures_only() {
    let env = shared(EnvOptions::default());
    let (mut installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
    // One judged resize (dry run), so the review metrics have series.
    let (ns, _, _) = env.field_test("mon").await;
    let judged = env
        .kubectl()
        .resize_dry_run(&ns, "app", &cpu_resize("275m"))
        .await
        .unwrap();
    assert!(judged.success, "{}", judged.stderr);

    // 1. Both programs' /metrics, as Prometheus parses them.
    let webhook = check_program(
        "webhook",
        &scrape(installed.webhook_health, "/metrics").await,
        "resize-guard-webhook",
    );
    let controller = check_program(
        "controller",
        &scrape(installed.controller_health, "/metrics").await,
        "resize-guard-controller",
    );
    let leader = controller.value("resize_guard_leader", "").unwrap();
    assert_eq!(leader, 1.0, "the only controller leads");
    let fenced = controller
        .value("resize_guard_fenced_writes_total", "")
        .unwrap();
    let not_after = webhook
        .value(
            "resize_guard_certificate_expiry_timestamp_seconds",
            "certificate=\"serving\"",
        )
        .expect("the webhook reports its serving certificate");

    // 2. The API server fails open for real: the webhook stops, a resize is admitted unjudged.
    let apiserver_before = parse(
        "text/plain; version=0.0.4; charset=utf-8",
        &env.cp.get_blocking("/metrics").unwrap(),
    );
    let fail_open = "apiserver_admission_webhook_fail_open_count";
    let mutate = "name=\"mutate.resize-guard.io\"";
    let before = apiserver_before.value(fail_open, mutate).unwrap_or(0.0);
    installed.webhook.stop(Duration::from_secs(10));
    env.resize_cpu(&ns, "app", "300m").await;
    let apiserver = parse(
        "text/plain; version=0.0.4; charset=utf-8",
        &env.cp.get_blocking("/metrics").unwrap(),
    );
    assert_eq!(
        apiserver.types.get(fail_open).map(String::as_str),
        Some("counter")
    );
    let after = apiserver.value(fail_open, mutate).unwrap();
    assert!(after > before, "{fail_open}: {before} → {after}");

    // 3. The PrometheusRule: promtool check rules, then test rules on the scraped values.
    let rule = template(
        "templates/prometheus-rule.yaml",
        &["prometheusRule.enabled=true", "podMonitor.enabled=true"],
    );
    let groups = rule["spec"]["groups"].clone();
    let dir = tempfile::tempdir().unwrap();
    let rules_path = dir.path().join("rules.yaml");
    std::fs::write(
        &rules_path,
        serde_yaml_ng::to_string(&json!({"groups": groups})).unwrap(),
    )
    .unwrap();
    run(
        &tool("promtool"),
        &["check", "rules", &rules_path.display().to_string()],
    );
    let mut evaluated: Value = serde_json::to_value(&groups).unwrap();
    for group in evaluated.as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            rule.as_object_mut().unwrap().remove("annotations");
        }
    }
    let evaluated_path = dir.path().join("evaluated.yaml");
    std::fs::write(
        &evaluated_path,
        serde_yaml_ng::to_string(&json!({"groups": evaluated})).unwrap(),
    )
    .unwrap();

    let wh = [
        ("namespace", NAMESPACE),
        ("pod", "resize-guard-webhook-0"),
        ("container", "webhook"),
    ];
    let ct = [
        ("namespace", NAMESPACE),
        ("pod", "resize-guard-controller-0"),
        ("container", "controller"),
    ];
    let days = 7.0;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let alerts = [
        "ResizeGuardFailingOpen",
        "ResizeGuardCertificateExpiringSoon",
        "ResizeGuardNoControllerLeading",
        "ResizeGuardFencedWrites",
        "ResizeGuardCircuitBreakerOpen",
        "ResizeGuardWebhookDown",
    ];
    let quiet: Vec<Value> = alerts
        .iter()
        .map(|a| json!({"eval_time": "20m", "alertname": a, "exp_alerts": []}))
        .collect();
    let healthy = json!({
        "name": "healthy: the values scraped from the running install",
        "interval": "1m",
        "start_timestamp": format!("{}", now as i64),
        "input_series": [
            series(fail_open, &[("name", "mutate.resize-guard.io"), ("type", "admit")], format!("{before}x30")),
            series("resize_guard_certificate_expiry_timestamp_seconds", &[&wh[..], &[("certificate", "serving")]].concat(), format!("{not_after}x30")),
            series("resize_guard_leader", &ct, format!("{leader}x30")),
            series("resize_guard_fenced_writes_total", &ct, format!("{fenced}x30")),
            series("resize_guard_preemptions_total", &[&ct[..], &[("outcome", "started")]].concat(), "0+1x30".into()),
            series("up", &wh, "1x30".into()),
        ],
        "alert_rule_test": quiet,
    });
    let failing = json!({
        "name": "failing: the webhook stopped (fail-open as the API server counted it), no controller, a fence, the breaker, the certificate near notAfter",
        "interval": "1m",
        // The evaluation starts (days - 1) days before the served certificate's notAfter.
        "start_timestamp": format!("{}", (not_after - (days - 1.0) * 86_400.0) as i64),
        "input_series": [
            series(fail_open, &[("name", "mutate.resize-guard.io"), ("type", "admit")], format!("{before}x10 {after}x20")),
            series("resize_guard_certificate_expiry_timestamp_seconds", &[&wh[..], &[("certificate", "serving")]].concat(), format!("{not_after}x30")),
            series("resize_guard_leader", &ct, format!("{leader}x5 0x25")),
            series("resize_guard_fenced_writes_total", &ct, format!("{fenced}x10 {fenced}+1x20")),
            series("resize_guard_preemptions_total", &[&ct[..], &[("outcome", "breaker_opened")]].concat(), "0x10 0+1x20".into()),
            series("up", &wh, "1x5 0x25".into()),
        ],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "ResizeGuardFailingOpen", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "ResizeGuardFailingOpen", "exp_alerts": [
                {"exp_labels": {"severity": "critical", "name": "mutate.resize-guard.io"}}]},
            {"eval_time": "1m", "alertname": "ResizeGuardCertificateExpiringSoon", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": NAMESPACE, "pod": "resize-guard-webhook-0"}}]},
            {"eval_time": "7m", "alertname": "ResizeGuardNoControllerLeading", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "ResizeGuardNoControllerLeading", "exp_alerts": [
                {"exp_labels": {"severity": "critical"}}]},
            {"eval_time": "9m", "alertname": "ResizeGuardFencedWrites", "exp_alerts": []},
            {"eval_time": "15m", "alertname": "ResizeGuardFencedWrites", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": NAMESPACE, "pod": "resize-guard-controller-0"}}]},
            {"eval_time": "9m", "alertname": "ResizeGuardCircuitBreakerOpen", "exp_alerts": []},
            {"eval_time": "15m", "alertname": "ResizeGuardCircuitBreakerOpen", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": NAMESPACE}}]},
            {"eval_time": "8m", "alertname": "ResizeGuardWebhookDown", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "ResizeGuardWebhookDown", "exp_alerts": [
                {"exp_labels": {"severity": "critical"}}]},
        ],
    });
    let tests_path = dir.path().join("tests.yaml");
    std::fs::write(
        &tests_path,
        serde_yaml_ng::to_string(&json!({
            "rule_files": [evaluated_path.display().to_string()],
            "evaluation_interval": "1m",
            "tests": [healthy, failing],
        }))
        .unwrap(),
    )
    .unwrap();
    run(
        &tool("promtool"),
        &["test", "rules", &tests_path.display().to_string()],
    );

    // 4. The dashboard: every metric a panel queries is one scraped above.
    let cm = template(
        "templates/grafana-dashboard.yaml",
        &["grafanaDashboard.enabled=true"],
    );
    let text = cm["data"]["resize-guard.json"].as_str().unwrap();
    let dashboard: Value = serde_json::from_str(text).unwrap();
    // A family declared with no series yet (no preemption happened here) counts as exported:
    // its sample names are the family's with the type's suffixes.
    let mut known: BTreeSet<String> = [webhook.names(), controller.names(), apiserver.names()]
        .into_iter()
        .flatten()
        .collect();
    for parsed in [&webhook, &controller] {
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
    assert!(panels.len() >= 8, "{} panels", panels.len());
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
