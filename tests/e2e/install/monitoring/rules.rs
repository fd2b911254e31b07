//! The chart's PrometheusRule where no cluster is needed (`helm template` and `promtool` only):
//! every alert carries a `runbook_url` to its page in `docs/src/runbooks/` and every page there is
//! an alert's; the latency and Deferred thresholds, the series selector and the runbook base
//! follow the chart's values, as `promtool test rules` shows on synthetic series; "no controller
//! leading" stays quiet when nothing (or no controller) is scraped, where the down alerts fire
//! instead; and `ResizeGuardAdmissionBypassed` fires on the controller's probe gauge only after
//! five minutes of bypassed probes (synthetic series: the probe is not scraped by
//! `super::scraped`).

use std::collections::BTreeSet;

use resize_guard_harness::install::repo_root;
use resize_guard_harness::text::assert_contains_all;
use serde_json::{Value, json};

use super::{JOB, NAMESPACE, RuleFile, alerts, firing, rendered_rule, series, silent, target};

/// The runbook base the chart derives from Chart.yaml's `home`.
const RUNBOOKS: &str = "https://github.com/resize-guard/resize-guard/blob/main/docs/src/runbooks/";
/// kube-apiserver's buckets of `apiserver_admission_webhook_admission_duration_seconds`
/// (k8s.io/apiserver pkg/admission/metrics/metrics.go).
const API_BUCKETS: [&str; 9] = [
    "0.005", "0.025", "0.1", "0.5", "1", "2.5", "10", "25", "+Inf",
];
const API_DURATION: &str = "apiserver_admission_webhook_admission_duration_seconds_bucket";

/// The API server's call-duration buckets for the mutating webhook, every call of each minute
/// (10) taking between `above` and the next bucket bound.
fn calls_above(above: f64) -> Vec<Value> {
    API_BUCKETS
        .iter()
        .map(|le| {
            let bound = if *le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            let per_minute = if bound <= above { 0 } else { 10 };
            series(
                API_DURATION,
                &[
                    ("name", "mutate.resize-guard.io"),
                    ("type", "admit"),
                    ("le", le),
                ],
                format!("0+{per_minute}x30"),
            )
        })
        .collect()
}

fn test_group(name: &str, input: Vec<Value>, expected: Vec<Value>) -> Value {
    json!({
        "name": name,
        "interval": "1m",
        "input_series": input,
        "alert_rule_test": expected,
    })
}

#[test]
fn every_alert_has_a_runbook_and_every_runbook_an_alert() {
    let rule = rendered_rule(&[]);
    let alerts = alerts(&rule);
    let dir = repo_root().join("docs/src/runbooks");
    let index = std::fs::read_to_string(repo_root().join("docs/src/alerts.md")).unwrap();
    for (name, alert) in &alerts {
        let url = alert["annotations"]["runbook_url"].as_str().unwrap_or("");
        assert_eq!(url, format!("{RUNBOOKS}{name}.md"), "{name}'s runbook_url");
        let page = std::fs::read_to_string(dir.join(format!("{name}.md")))
            .unwrap_or_else(|e| panic!("{name}: docs/src/runbooks/{name}.md: {e}"));
        assert!(
            page.starts_with(&format!("# {name}\n")),
            "{name}.md's title"
        );
        let parts = [
            "## What it means",
            "## Confirm",
            "## Fix",
            "## Silence safely",
        ];
        assert_contains_all(&page, &parts);
        let severity = alert["labels"]["severity"].as_str().unwrap();
        assert!(
            page.contains(&format!("**Severity:** {severity}.")),
            "{name}.md names its severity, {severity}"
        );
        assert!(
            index.contains(&format!(
                "| {name} | {severity} | [{name}](runbooks/{name}.md) |"
            )),
            "docs/src/alerts.md lists {name}"
        );
    }
    let pages: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let wanted: BTreeSet<String> = alerts.keys().map(|a| format!("{a}.md")).collect();
    assert_eq!(pages, wanted, "docs/src/runbooks/ holds one page per alert");
}

#[test]
fn thresholds_selector_and_runbook_base_follow_the_values() {
    let rule = rendered_rule(&[
        "webhooks.timeoutSeconds=10",
        "prometheusRule.reviewLatencyPercent=80",
        "prometheusRule.deferredMinutes=30",
        "prometheusRule.selector=job=\"platform-rg\"",
        "prometheusRule.runbookBaseURL=https://runbooks.example/rg/",
    ]);
    for (name, alert) in alerts(&rule) {
        assert_eq!(
            alert["annotations"]["runbook_url"],
            format!("https://runbooks.example/rg/{name}.md")
        );
        let expr = alert["expr"].as_str().unwrap();
        assert!(!expr.contains(&format!("job=\"{JOB}\"")), "{name}: {expr}");
    }
    let file = RuleFile::checked(&rule);
    let ct = [
        ("job", "platform-rg"),
        ("namespace", NAMESPACE),
        ("pod", "c-0"),
    ];
    let ns: &[(&str, &str)] = &[("namespace", NAMESPACE)];
    file.test(vec![
        // 80% of 10 s: calls of 1–2.5 s (past the default 1.5 s) are quiet, 2.5–10 s fire.
        test_group(
            "calls under 80% of a 10 s timeout",
            calls_above(1.0),
            vec![silent("ResizeGuardReviewLatencyNearTimeout", "15m")],
        ),
        test_group(
            "calls near a 10 s timeout",
            calls_above(2.5),
            vec![firing(
                "ResizeGuardReviewLatencyNearTimeout",
                "15m",
                "warning",
                &[&[("name", "mutate.resize-guard.io")]],
            )],
        ),
        // 30 minutes: Deferred from the start, 1740 s old at minute 29, 1800 at 30, past it at 31.
        test_group(
            "a resize Deferred past 30 minutes",
            vec![series(
                "resize_guard_deferred_oldest_seconds",
                &ct,
                "0+60x40".into(),
            )],
            vec![
                silent("ResizeGuardResizeDeferredTooLong", "30m"),
                firing("ResizeGuardResizeDeferredTooLong", "31m", "warning", &[ns]),
            ],
        ),
    ]);
}

#[test]
fn no_controller_leading_stays_quiet_when_nothing_is_scraped() {
    let rule = rendered_rule(&[]);
    let file = RuleFile::checked(&rule);
    let wh = target("resize-guard-webhook-0", "webhook");
    let ct = target("resize-guard-controller-0", "controller");
    let every: Vec<String> = alerts(&rule).into_keys().collect();
    let quiet_but = |firing_ones: &[&str], at: &str| -> Vec<Value> {
        every
            .iter()
            .filter(|a| !firing_ones.contains(&a.as_str()))
            .map(|a| silent(a, at))
            .collect()
    };
    let down = |alert: &str| firing(alert, "10m", "critical", &[&[]]);
    let mut nothing = quiet_but(
        &["ResizeGuardWebhookDown", "ResizeGuardControllerDown"],
        "10m",
    );
    nothing.extend([
        down("ResizeGuardWebhookDown"),
        down("ResizeGuardControllerDown"),
    ]);
    let mut no_controller = quiet_but(&["ResizeGuardControllerDown"], "10m");
    no_controller.push(down("ResizeGuardControllerDown"));
    file.test(vec![
        // A Prometheus that scrapes nothing of resize-guard (its API server's series only).
        test_group(
            "nothing of resize-guard scraped",
            vec![series(
                "apiserver_admission_webhook_fail_open_count",
                &[("name", "mutate.resize-guard.io"), ("type", "admit")],
                "0x20".into(),
            )],
            nothing,
        ),
        // The webhook scraped; the controller's target down, so none of its series.
        test_group(
            "the controller's target down",
            vec![
                series("up", &wh, "1x20".into()),
                series("up", &ct, "0x20".into()),
                series(
                    "resize_guard_policy_in_force",
                    &[&wh[..], &[("origin", "configmap")]].concat(),
                    "1x20".into(),
                ),
            ],
            no_controller,
        ),
    ]);
}

#[test]
fn admission_bypassed_fires_after_five_minutes_of_bypassed_probes() {
    let rule = rendered_rule(&[]);
    let file = RuleFile::checked(&rule);
    let leader = target("resize-guard-controller-0", "controller");
    let follower = target("resize-guard-controller-1", "controller");
    let bypassed = |replica: &[(&str, &str)], values: &str| {
        series(
            "resize_guard_admission_probe_bypassed",
            replica,
            values.into(),
        )
    };
    let ns: &[(&str, &str)] = &[("namespace", NAMESPACE)];
    file.test(vec![
        test_group(
            "probes reach the webhook",
            vec![bypassed(&leader, "0x30"), bypassed(&follower, "0x30")],
            vec![silent("ResizeGuardAdmissionBypassed", "25m")],
        ),
        // Bypassed at minutes 5-8 (4 minutes: pending, never firing), reached at 9-12, bypassed
        // from minute 13 on: firing from minute 18. The follower's 0 does not hide it.
        test_group(
            "probes bypass the webhook",
            vec![
                bypassed(&leader, "0x4 1x3 0x3 1x20"),
                bypassed(&follower, "0x30"),
            ],
            vec![
                silent("ResizeGuardAdmissionBypassed", "8m"),
                silent("ResizeGuardAdmissionBypassed", "17m"),
                firing("ResizeGuardAdmissionBypassed", "20m", "critical", &[ns]),
            ],
        ),
    ]);
}
