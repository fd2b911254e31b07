//! Monitoring against a real kube-apiserver v1.37.2 and both programs installed from `deploy/`
//! (`installed::Installed`):
//!
//! - `/metrics` of the webhook and the controller is labelled OpenMetrics and parses with
//!   Prometheus's own scrape parser, with `resize_guard_build_info`, the `process_*` metrics,
//!   `resize_guard_policy_mode` (`enforce` 1, `audit` 0), `resize_guard_policy_in_force`
//!   (`configmap` 1), `resize_guard_policy_configmap_state` (`valid` 1; `invalid` 1 once the
//!   test really breaks the ConfigMap, `valid` again once it restores it) and the
//!   `resize_guard_kubernetes_*` metrics (v1.37, supported) present with their types;
//! - the chart's PrometheusRule passes `promtool check rules`, and `promtool test rules` evaluates
//!   each alert against input series made of the values scraped here: quiet on the healthy
//!   install (latency histograms as really observed, the policy ConfigMap valid, no Deferred
//!   pod, no shed, no certificate error, one leader), firing on real failures (the API server's
//!   own `apiserver_admission_webhook_fail_open_count` after the webhook was stopped and a resize
//!   really failed open, the policy ConfigMap state scraped while it was broken) and on failing
//!   series made from the scraped ones (every review slow in the buckets the API server and the
//!   webhook really export, shed reviews, certificate errors, a Deferred resize aging, no
//!   leader, no policy, the certificate near notAfter);
//! - the Grafana dashboard's ConfigMap renders, its JSON parses, and every metric its panels
//!   query is among those scraped from the programs (or registered by them) or from the real API
//!   server's `/metrics` (`apiserver_admission_webhook_admission_duration_seconds`).
//!
//! `ResizeGuardAdmissionBypassed` reads a probe metric this test does not scrape; its promtool
//! test is in `super::rules`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::installed::Installed;
use resize_guard_harness::objects::cpu_resize;
use serde_json::{Value, json};

use super::dashboard::check_dashboard;
use super::exposition::{OPENMETRICS, PROMETHEUS_TEXT, Parsed, parse, scrape};
use super::inputs::{API_DURATION, CONTROLLER_POD, MUTATE, REVIEW_DURATION, Scraped, WEBHOOK_POD};
use super::{NAMESPACE, RuleFile, alerts, quiet, rendered_rule, series, target};

/// The scraped `/metrics` of a program, checked for what every program exports.
fn check_program(what: &str, (content_type, body): &(String, String), program: &str) -> Parsed {
    assert_eq!(content_type, OPENMETRICS, "{what} /metrics Content-Type");
    let parsed = parse(content_type, body);
    for (family, typ) in [
        ("resize_guard_build_info", "gauge"),
        ("resize_guard_policy_mode", "gauge"),
        ("resize_guard_policy_in_force", "gauge"),
        ("resize_guard_policy_configmap_state", "gauge"),
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
        (
            "resize_guard_policy_configmap_state",
            "state=\"valid\"",
            1.0,
        ),
        (
            "resize_guard_policy_configmap_state",
            "state=\"invalid\"",
            0.0,
        ),
        (
            "resize_guard_policy_configmap_state",
            "state=\"missing\"",
            0.0,
        ),
        (
            "resize_guard_policy_configmap_state",
            "state=\"unread\"",
            0.0,
        ),
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

/// Sets the policy ConfigMap's `policy.yaml` (a merge patch, as an operator's edit).
async fn set_policy(env: &Env, yaml: &str) {
    let patch = json!({"data": {"policy.yaml": yaml}}).to_string();
    let args = ["patch", "configmap", "resize-guard", "-n", NAMESPACE];
    let out = env
        .kubectl()
        .run(args.into_iter().chain(["--type=merge", "-p", &patch]))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
}

/// Both programs' `/metrics` once both report `resize_guard_policy_configmap_state{state} 1`
/// (within 30 s).
async fn scrape_when(installed: &Installed, state: &str) -> [(String, String); 2] {
    let deadline = Instant::now() + Duration::from_secs(30);
    let marker = format!("resize_guard_policy_configmap_state{{state=\"{state}\"}} 1");
    loop {
        let scraped = [
            scrape(installed.webhook_health, "/metrics").await,
            scrape(installed.controller_health, "/metrics").await,
        ];
        if scraped.iter().all(|(_, body)| body.contains(&marker)) {
            return scraped;
        }
        assert!(Instant::now() < deadline, "no {marker} within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Breaks the policy ConfigMap for real, scrapes both programs once each reports it `invalid`,
/// and restores it (waiting for `valid` again): (webhook, controller) as scraped broken.
async fn scrape_with_a_broken_policy(env: &Env, installed: &Installed) -> (Parsed, Parsed) {
    let get = [
        "get",
        "configmap",
        "resize-guard",
        "-n",
        NAMESPACE,
        "-o",
        "json",
    ];
    let out = env.kubectl().run(get).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    let original: Value = serde_json::from_str(&out.stdout).unwrap();
    // An unknown key: the policy does not parse (an InvalidPolicy Event says so).
    set_policy(env, "mdoe: enforce\n").await;
    let [webhook, controller] = scrape_when(installed, "invalid").await;
    set_policy(env, original["data"]["policy.yaml"].as_str().unwrap()).await;
    scrape_when(installed, "valid").await;
    (
        parse(&webhook.0, &webhook.1),
        parse(&controller.0, &controller.1),
    )
}

#[tokio::test]
async fn prometheus_parses_both_programs_and_the_rules_fire_on_real_failures_only() {
    let env = shared(EnvOptions::default());
    let (mut installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
    // One judged resize (dry run), so the review metrics and the API server's have series.
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
    let oldest = controller
        .value("resize_guard_deferred_oldest_seconds", "")
        .expect("the controller reports its oldest Deferred resize");
    assert_eq!(oldest, 0.0, "no resize is Deferred here");
    let not_after = webhook
        .value(
            "resize_guard_certificate_expiry_timestamp_seconds",
            "certificate=\"serving\"",
        )
        .expect("the webhook reports its serving certificate");
    let reviews = webhook.buckets(REVIEW_DURATION, &[]);
    assert!(
        reviews.last().is_some_and(|b| b.1 >= 1.0),
        "the judged resize is in the webhook's histogram: {reviews:?}"
    );

    // 2. The policy ConfigMap broken for real, as both programs report it.
    let (webhook_broken, controller_broken) = scrape_with_a_broken_policy(env, &installed).await;

    // 3. The API server's own view: its calls' durations, then failing open for real (the
    //    webhook stops, a resize is admitted unjudged).
    let apiserver_before = parse(PROMETHEUS_TEXT, &env.cp.get_blocking("/metrics").unwrap());
    let mutate = format!("name=\"{MUTATE}\"");
    let calls = apiserver_before.buckets(API_DURATION, &[&mutate]);
    assert!(
        calls.last().is_some_and(|b| b.1 >= 1.0),
        "the API server timed its call to {MUTATE}: {calls:?}"
    );
    let fail_open = "apiserver_admission_webhook_fail_open_count";
    let before = apiserver_before.value(fail_open, &mutate).unwrap_or(0.0);
    installed.webhook.stop(Duration::from_secs(10));
    env.resize_cpu(&ns, "app", "300m").await;
    let apiserver = parse(PROMETHEUS_TEXT, &env.cp.get_blocking("/metrics").unwrap());
    assert_eq!(
        apiserver.types.get(fail_open).map(String::as_str),
        Some("counter")
    );
    let after = apiserver.value(fail_open, &mutate).unwrap();
    assert!(after > before, "{fail_open}: {before} → {after}");

    // 4. The PrometheusRule: promtool check rules, then test rules on the scraped values.
    let rule = rendered_rule(&[]);
    let file = RuleFile::checked(&rule);
    let scraped = Scraped {
        webhook: &webhook,
        controller: &controller,
        broken: (&webhook_broken, &controller_broken),
        calls: &calls,
        reviews: &reviews,
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut input = scraped.healthy();
    input.extend([
        series(
            fail_open,
            &[("name", MUTATE), ("type", "admit")],
            format!("{before}x30"),
        ),
        series(
            "resize_guard_leader",
            &target(CONTROLLER_POD, "controller"),
            format!("{leader}x30"),
        ),
        series(
            "resize_guard_fenced_writes_total",
            &target(CONTROLLER_POD, "controller"),
            format!("{fenced}x30"),
        ),
        series(
            "resize_guard_deferred_oldest_seconds",
            &target(CONTROLLER_POD, "controller"),
            format!("{oldest}x30"),
        ),
        series(
            "resize_guard_certificate_expiry_timestamp_seconds",
            &[
                &target(WEBHOOK_POD, "webhook")[..],
                &[("certificate", "serving")],
            ]
            .concat(),
            format!("{not_after}x30"),
        ),
    ]);
    // Every alert but the probe's (super::rules): its metric is not scraped here.
    let names: Vec<String> = alerts(&rule).into_keys().collect();
    let evaluated: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "ResizeGuardAdmissionBypassed")
        .collect();
    let healthy = json!({
        "name": "healthy: the values scraped from the running install",
        "interval": "1m",
        "start_timestamp": format!("{}", now as i64),
        "input_series": input,
        "alert_rule_test": quiet(&evaluated, "20m"),
    });
    let failing = scraped.failing(
        (before, after, fail_open),
        (leader, fenced),
        not_after,
        &rule,
    );
    file.test(vec![healthy, failing]);

    // 5. The dashboard: every metric a panel queries is one scraped above.
    check_dashboard(&[&webhook, &controller], &apiserver);
}
