//! `-o json` and `-o yaml` of every command, through the real `kubectl` v1.37.2 against a real
//! kube-apiserver with resize-guard installed from `deploy/` and a resize the kubelet defers and
//! resize-guard cannot help (the only other pod on the node has the same priority): each command
//! prints one document with `apiVersion: resize-guard.io/v1alpha1`, its `kind` and an RFC 3339
//! `observedAt`, in the shape pinned here (keys and value types, not the volatile values); YAML
//! holds what JSON holds; and the text form shows every field the document holds for the same
//! state. An unknown `-o` is a usage error (exit 2) naming the formats.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::installed::Installed;
use resize_guard_harness::objects::{resize_pending, wait_pod};
use serde_json::{Value, json};

use super::command::{Run, rg_run};

const T: Duration = Duration::from_secs(60);

/// `v` with every scalar replaced by its type and every array by its first element's shape.
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => json!("null"),
    }
}

/// `kubectl resize-guard <args> -o json` and `-o yaml`: the JSON document, after checking the
/// envelope and that the YAML document has the same shape and stable values.
async fn document(env: &Env, args: &[&str], kind: &str) -> Value {
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let out = rg_run(env, &[], &json_args).await;
    assert!(matches!(out.code, 0 | 1), "{args:?}: {}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["apiVersion"], "resize-guard.io/v1alpha1", "{doc}");
    assert_eq!(doc["kind"], kind, "{doc}");
    let observed: Timestamp = doc["observedAt"].as_str().unwrap().parse().unwrap();
    assert!(doc["observedAt"].as_str().unwrap().ends_with('Z'));
    assert!(
        Timestamp::now().duration_since(observed).as_secs() < 120,
        "{doc}"
    );
    let mut yaml_args = args.to_vec();
    yaml_args.extend(["-o", "yaml"]);
    let out = rg_run(env, &[], &yaml_args).await;
    assert!(
        out.stdout.starts_with(&format!(
            "apiVersion: resize-guard.io/v1alpha1\nkind: {kind}\nobservedAt: "
        )),
        "{}",
        out.stdout
    );
    let yaml: Value = serde_yaml_ng::from_str(&out.stdout).unwrap();
    assert_eq!(shape(&yaml), shape(&doc), "{args:?}: YAML and JSON differ");
    doc
}

/// `kubectl resize-guard <args>` as text.
async fn text(env: &Env, args: &[&str]) -> Run {
    let out = rg_run(env, &[], args).await;
    assert!(matches!(out.code, 0 | 1), "{args:?}: {}", out.stderr);
    out
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn assert_shows(text: &str, want: &str) {
    assert!(text.contains(want), "{want:?} not in:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_prints_a_document_whose_fields_the_text_shows() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let (_installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
    let (ns, node, pods) = env
        .scenario(
            "docs",
            ("docs", "1930m", "3Gi"),
            &[
                ("filler", "high", "1500m", "256Mi"),
                ("app", "high", "250m", "256Mi"),
            ],
        )
        .await;
    env.resize_cpu(&ns, "app", "550m").await;
    wait_pod(&pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    // Until the webhook answers a probe through the API server (check --wait's own condition)
    // and the controller has said it cannot make room (the Event explain lists).
    let probe = format!("--probe-pod={ns}/app");
    let ready = rg_run(env, &[], &["check", "--wait=60s", &probe]).await;
    assert_eq!(ready.code, 0, "{}\n{}", ready.stdout, ready.stderr);
    let deadline = Instant::now() + T;
    while !text(env, &["explain", "app", "-n", &ns])
        .await
        .stdout
        .contains("ResizePreemptionFailed")
    {
        assert!(Instant::now() < deadline, "no ResizePreemptionFailed Event");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let decision = json!({
        "label": "string", "text": "string", "victims": [], "reason": "string", "short": "string",
    });
    let amount = json!({"cpu": "string", "memory": "string"});

    // status
    let doc = document(env, &["status", "-n", &ns], "Status").await;
    assert_eq!(
        shape(&doc),
        json!({
            "apiVersion": "string", "kind": "string", "observedAt": "string",
            "namespace": "string",
            "items": [{
                "namespace": "string", "name": "string", "node": "string", "priority": "number",
                "state": "string", "age": "string", "since": "string", "message": "string",
                "decision": decision,
            }],
            "notes": [],
            "versions": {
                "plugin": "string",
                "programs": [{"deployment": "string", "image": "string", "version": "string", "source": "string"}],
                "skew": "bool",
            },
        }),
        "{doc:#}"
    );
    let item = &doc["items"][0];
    assert_eq!((s(&item["name"]), s(&item["node"])), ("app", node.as_str()));
    let out = text(env, &["status", "-n", &ns, "-o", "wide"]).await;
    let row = out.stdout.lines().nth(1).unwrap();
    for key in ["name", "node", "state", "message"] {
        assert_shows(row, s(&item[key]));
    }
    assert_shows(row, &item["priority"].to_string());
    assert_shows(row, s(&item["decision"]["short"]));
    assert!(!out.stdout.contains("warning:"), "{}", out.stdout);

    // explain
    let doc = document(env, &["explain", "app", "-n", &ns], "Explanation").await;
    assert_eq!(
        shape(&doc),
        json!({
            "apiVersion": "string", "kind": "string", "observedAt": "string",
            "pod": "string", "node": "string", "priority": "number", "priorityClass": "string",
            "qos": {"class": "string", "why": "string"},
            "ledger": {
                "allocatable": amount, "thisPodHolds": amount, "thisPodWants": amount,
                "othersHold": amount, "terminating": amount, "free": amount,
            },
            "resize": {
                "condition": "string", "reason": "string", "message": "string", "age": "string",
                "since": "string",
            },
            "decision": decision,
            "memory": "null", "recordedPlan": "null", "controller": "string",
            "events": [{
                "age": "string", "lastSeen": "string", "type": "string", "reason": "string",
                "from": "string", "message": "string",
            }],
            "notes": [],
        }),
        "{doc:#}"
    );
    let out = text(env, &["explain", "app", "-n", &ns, "-o", "wide"]).await;
    let t = &out.stdout;
    assert_shows(t, &format!("Pod:        {}\n", s(&doc["pod"])));
    assert_shows(t, &format!("Node:       {}\n", s(&doc["node"])));
    assert_shows(
        t,
        &format!(
            "Priority:   {} (PriorityClass {})\n",
            doc["priority"],
            s(&doc["priorityClass"])
        ),
    );
    assert_shows(
        t,
        &format!(
            "QoS class:  {} — {}\n",
            s(&doc["qos"]["class"]),
            s(&doc["qos"]["why"])
        ),
    );
    for (_, a) in doc["ledger"].as_object().unwrap() {
        assert_shows(t, s(&a["cpu"]));
        assert_shows(t, s(&a["memory"]));
    }
    let r = &doc["resize"];
    assert_shows(
        t,
        &format!("Resize: {} ({})", s(&r["reason"]), s(&r["condition"])),
    );
    assert_shows(t, &format!("  kubelet: {}\n", s(&r["message"])));
    assert_shows(
        t,
        &format!("resize-guard: {}\n", s(&doc["decision"]["label"])),
    );
    for l in s(&doc["decision"]["text"]).lines() {
        assert_shows(t, &format!("  {l}\n"));
    }
    // How long ago the Lease was renewed moves between the two runs: compare what precedes it.
    let controller = s(&doc["controller"]);
    match controller.split_once(" renewed ") {
        Some((stable, _)) => assert_shows(t, &format!("  controller: {stable} renewed ")),
        None => assert_shows(t, &format!("  controller: {controller}\n")),
    }
    for e in doc["events"].as_array().unwrap() {
        for key in ["type", "reason", "from", "message"] {
            assert_shows(t, s(&e[key]));
        }
    }

    // what-if: a resize down, which fits.
    let doc = document(
        env,
        &["what-if", "app", "-n", &ns, "--cpu", "300m"],
        "WhatIf",
    )
    .await;
    assert_eq!(
        shape(&doc),
        json!({
            "apiVersion": "string", "kind": "string", "observedAt": "string",
            "pod": "string", "container": "string",
            "changes": [{"field": "string", "resource": "string", "from": "string", "to": "string"}],
            "apiServer": {
                "accepted": "bool", "code": "number", "message": "null", "warnings": [],
                "decisions": [{"stage": "string", "decision": "string"}],
            },
            "plan": {"label": "string", "text": "string", "victims": [], "reason": "null", "short": "string"},
            "command": "string",
        }),
        "{doc:#}"
    );
    let out = text(env, &["what-if", "app", "-n", &ns, "--cpu", "300m"]).await;
    let t = &out.stdout;
    assert_shows(
        t,
        &format!(
            "Resize pod {}, container {}: ",
            s(&doc["pod"]),
            s(&doc["container"])
        ),
    );
    for c in doc["changes"].as_array().unwrap() {
        assert_shows(
            t,
            &format!(
                "{} {} {} → {}",
                s(&c["resource"]),
                s(&c["field"]).trim_end_matches('s'),
                s(&c["from"]),
                s(&c["to"])
            ),
        );
    }
    assert_shows(t, "API server: accepted (dry run: nothing was changed)\n");
    for d in doc["apiServer"]["decisions"].as_array().unwrap() {
        assert_shows(
            t,
            &format!(
                "resize-guard's {} webhook decided: {}\n",
                s(&d["stage"]),
                s(&d["decision"])
            ),
        );
    }
    assert_shows(t, &format!("Plan: {}\n", s(&doc["plan"]["label"])));
    assert_shows(t, &format!("  {}\n", s(&doc["command"])));

    // check
    let doc = document(env, &["check", &probe], "Check").await;
    assert_eq!(
        shape(&doc),
        json!({
            "apiVersion": "string", "kind": "string", "observedAt": "string",
            "mode": "string",
            "checks": [{"section": "string", "mark": "string", "text": "string"}],
            "failed": "number", "warnings": "number", "notes": [],
            "versions": {
                "plugin": "string",
                "programs": [{"deployment": "string", "image": "string", "version": "string", "source": "string"}],
                "skew": "bool",
            },
        }),
        "{doc:#}"
    );
    assert_eq!(
        (doc["mode"].as_str(), doc["failed"].as_u64()),
        (Some("installed"), Some(0))
    );
    let out = text(env, &["check", &probe]).await;
    for c in doc["checks"].as_array().unwrap() {
        let mark = match s(&c["mark"]) {
            "ok" => "✓",
            "fail" => "✗",
            _ => "‼",
        };
        // The controller's line says how long ago its Lease was renewed, which moves between
        // the two runs; the rest of it does not.
        let text = s(&c["text"]);
        match text.split_once(" renewed ") {
            Some((stable, _)) => assert_shows(&out.stdout, &format!("{mark} {stable} renewed ")),
            None => assert_shows(&out.stdout, &format!("{mark} {text}\n")),
        }
    }
    assert_shows(&out.stdout, "\nStatus check results are ✓\n");

    // An unknown format.
    let out = rg_run(env, &[], &["status", "-o", "xml"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("invalid value 'xml'")
            && out
                .stderr
                .contains("[possible values: text, wide, json, yaml]"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}
