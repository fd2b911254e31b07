//! Fidelity of resize-guard to kube-apiserver v1.37.2 on `pods/resize`: its mutating webhook
//! runs before the API server's own validation, so whatever it denies replaces upstream's
//! answer. It must never say something upstream would not: a resize upstream accepts is
//! accepted, one upstream refuses for the QoS rule gets upstream's own refusal (code, reason,
//! details, message) followed by resize-guard's QoS explanation (with upstream's classes), one
//! upstream refuses with NodeCapacity gets `PodResizeValidator`'s refusal word for word followed
//! by resize-guard's Infeasible explanation (`answer::shape`), and every other refusal reaches
//! the user word for word.
//!
//! Phase 1 (before the webhook is registered) creates every pod — the named disagreement
//! classes and a few hundred generated cases — and records upstream's answer to each resize on
//! dry run; phase 2 registers the real webhook binary (mutating + validating, default policy)
//! and sends the same resizes again. The named tests replay the issue's disagreement classes,
//! and two the generated cases found, with real (not dry-run) `kubectl` resizes; the property
//! test compares every generated case. `RESIZE_GUARD_FIDELITY_CASES` (default 300) and
//! `RESIZE_GUARD_FIDELITY_SEED` (default: from the clock, printed) control the generated cases;
//! run with `--nocapture` for the summary table.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

// The fidelity suite's machinery: a deterministic generator of pods and resizes ([`cases`],
// [`quantities`], [`rng`]),
// the named disagreement classes ([`scenarios`]), phase 1 — upstream's answers recorded before
// resize-guard is installed ([`baseline`]) — and how answers are read and compared ([`answer`]).
mod answer;
mod baseline;
mod cases;
mod quantities;
mod rng;
mod scenarios;
use crate::scenario::webhook as support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use answer::{Answer, Outcome, Upstream};
use baseline::{Baseline, Probe};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
use resize_guard_harness::kubectl::KubectlOutput;
use resize_guard_policy::upstream::node_features::{KUBELET_DEFAULTS_V1_37, POD_LEVEL_RESIZE};
use tokio::sync::OnceCell;

static BASELINE: OnceCell<Baseline> = OnceCell::const_new();
static HOOK: OnceCell<support::Webhook> = OnceCell::const_new();

/// Phase 1 once for the whole binary, then the webhook: no test sees resize-guard before every
/// upstream answer is recorded. The guard prints the control plane's logs if the test fails.
async fn setup() -> (&'static Env, &'static Baseline, LogGuard<'static>) {
    let env = shared(EnvOptions::default());
    let base = BASELINE.get_or_init(|| baseline::record(env)).await;
    HOOK.get_or_init(|| support::start(env, Webhooks::Mutating))
        .await;
    (env, base, env.guard())
}

/// The probe's real (not dry-run) resize through kubectl.
async fn kubectl_resize(env: &Env, p: &Probe) -> KubectlOutput {
    env.kubectl()
        .resize(&p.ns, &p.name, &p.patch.to_string())
        .await
        .unwrap()
}

/// The probe's pod as stored now.
async fn stored(env: &Env, p: &Probe) -> Pod {
    let pods: Api<Pod> = Api::namespaced(env.client().await, &p.ns);
    pods.get(&p.name).await.unwrap()
}

/// The baseline's scenario `name`, after asserting that the API server without resize-guard
/// refused it as an invalid spec with a message containing `says`.
fn invalid_upstream<'a>(base: &'a Baseline, name: &str, says: &str) -> &'a Probe {
    let p = base.named(name);
    assert_eq!(
        answer::upstream(&p.upstream),
        Upstream::InvalidSpec,
        "{name}"
    );
    assert!(
        p.upstream.message().contains(says),
        "{name}: {}",
        p.upstream
    );
    p
}

/// The baseline's scenario `name`, after asserting that the API server without resize-guard
/// refused it for the QoS rule only, from class `from`.
fn qos_only_upstream<'a>(base: &'a Baseline, name: &str, from: &str) -> &'a Probe {
    let p = base.named(name);
    let want = Upstream::QosOnly { from: from.into() };
    assert_eq!(
        answer::upstream(&p.upstream),
        want,
        "upstream: {}",
        p.upstream
    );
    p
}

/// The real (not dry-run) resize through kubectl must fail with exactly upstream's message,
/// and resize-guard must not be in it.
async fn assert_user_sees_upstreams_refusal(env: &Env, p: &Probe) {
    let Answer::Refused { message, .. } = &p.upstream else {
        panic!("{}: upstream accepted", p.label);
    };
    let out = kubectl_resize(env, p).await;
    assert!(!out.success, "{}: the resize went through", p.label);
    // kubectl prints `Error from server (Forbidden): <message>`, or `The <message>` for one
    // validation error and `The <subject>: ` with one `* <error>` line each for several (whose
    // order changes from request to request).
    let expected = match p.upstream.errors().as_slice() {
        [] | [_] => vec![message.clone()],
        errors => errors
            .iter()
            .map(|e| format!("* {e}\n"))
            .chain(
                message
                    .split_once(": ")
                    .map(|(subject, _)| subject.to_owned()),
            )
            .collect(),
    };
    for e in expected {
        assert!(
            out.stderr.contains(&e),
            "{}: kubectl printed\n{}\nbut upstream says\n{message}",
            p.label,
            out.stderr
        );
    }
    assert!(!out.stderr.contains("resize-guard"), "{}", out.stderr);
    assert_eq!(
        stored(env, p).await.metadata.generation,
        Some(1),
        "{}: nothing stored",
        p.label
    );
}

#[tokio::test]
async fn pod_level_limit_defaulting_qos_change_gets_resize_guards_message() {
    let (env, base, _g) = setup().await;
    let p = qos_only_upstream(base, "pod-level-defaulting", "Burstable");
    assert_eq!(
        p.qos_to,
        Some(Ok("Guaranteed".to_owned())),
        "upstream defaults the pod-level memory limit from the new container limit"
    );
    let out = kubectl_resize(env, p).await;
    assert!(!out.success);
    // kubectl prints a 422 Invalid from its causes: upstream's, then resize-guard's explanation.
    assert!(
        out.stderr.contains(r#"* spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing"#)
            && out.stderr.contains("* spec: resize-guard: this resize would change the pod's QoS class from Burstable to Guaranteed"),
        "{}",
        out.stderr
    );
}

/// The real resize through kube-apiserver with resize-guard installed: the answer as a client
/// reads it.
async fn with_resize_guard(env: &Env, p: &Probe) -> Answer {
    let api: Api<Pod> = Api::namespaced(env.client().await, &p.ns);
    answer::resize(&api, &p.name, &p.patch, false).await
}

/// Upstream's e2e `pod-resize-scheduler-tests` (k8s.io/kubernetes v1.37.2
/// `test/e2e/node/pod_resize.go`) resizes a pod beyond its node and expects a StatusError with
/// reason Forbidden, `node didn't have enough allocatable resources` in `Error()` and
/// `Details.Causes[0].Type == "NodeCapacity"`: resize-guard, which refuses it first, answers
/// exactly that, word for word as upstream without it, then its own explanation. On v1.33–v1.35
/// upstream stores it; resize-guard refuses it with the same code, reason and cause.
#[tokio::test]
async fn a_resize_beyond_allocatable_is_refused_in_pod_resize_validators_shape() {
    let (env, base, _g) = setup().await;
    let minor = env.cp.minor();
    for (key, upstream_says) in [
        (
            "beyond-allocatable",
            "cpu, requested: 40000, allocatable: 32000",
        ),
        (
            "beyond-allocatable-both",
            "cpu, requested: 40000, allocatable: 32000; memory, requested: 107374182400, allocatable: 68719476736",
        ),
    ] {
        let p = base.named(key);
        let with = with_resize_guard(env, p).await;
        let r = with.refusal(&format!("{key} with resize-guard installed"));
        assert_eq!((r.code, r.reason), (403, "Forbidden"), "{with}");
        assert_eq!(r.causes[0].0, "NodeCapacity", "{with}");
        assert_eq!(r.subject, &("pods".to_owned(), key.to_owned()));
        assert!(
            r.message
                .contains("resize-guard: this resize can never fit on node"),
            "{with}"
        );
        if minor >= 36 {
            assert_eq!(
                answer::upstream(&p.upstream).class(),
                "capacity",
                "{}",
                p.upstream
            );
            let up = format!(
                "pods \"{key}\" is forbidden: node didn't have enough allocatable resources: {upstream_says}"
            );
            assert_eq!(p.upstream.message(), up);
            assert!(
                r.message.starts_with(&format!(
                    "admission webhook \"mutate.resize-guard.io\" denied the request: {up}. resize-guard: "
                )),
                "{with}"
            );
        } else {
            assert_eq!(p.upstream, Answer::Accepted, "v1.{minor} stores it");
        }
        assert_eq!(answer::shape(&p.upstream, &with, minor), None);
        assert_eq!(
            stored(env, p).await.metadata.generation,
            Some(1),
            "{key}: nothing stored"
        );
    }
}

/// A QoS-changing resize: `ValidatePodResize`'s 422 Invalid, with upstream's details and
/// message word for word, then resize-guard's explanation (in the message and as the last
/// cause, which is what kubectl prints).
#[tokio::test]
async fn a_qos_change_is_refused_in_validations_shape_and_kubectl_prints_both() {
    let (env, base, _g) = setup().await;
    let p = qos_only_upstream(base, "qos-only", "Guaranteed");
    let with = with_resize_guard(env, p).await;
    let r = with.refusal("qos-only with resize-guard installed");
    let up = p.upstream.refusal("qos-only without resize-guard");
    assert_eq!((r.code, r.reason), (422, "Invalid"), "{with}");
    assert_eq!(r.subject, up.subject);
    assert_eq!(r.subject, &("Pod".to_owned(), "qos-only".to_owned()));
    assert_eq!(&r.causes[..1], up.causes, "{with}");
    assert_eq!(
        (r.causes[0].0.as_str(), r.causes[0].1.as_str()),
        ("FieldValueInvalid", "spec")
    );
    assert_eq!(r.causes[1].0, answer::EXPLANATION);
    assert!(
        r.message.starts_with(&format!(
            "admission webhook \"mutate.resize-guard.io\" denied the request: {}. resize-guard: this resize would change the pod's QoS class from Guaranteed to Burstable",
            p.upstream.message()
        )),
        "{with}"
    );
    assert_eq!(answer::shape(&p.upstream, &with, env.cp.minor()), None);
    let out = kubectl_resize(env, p).await;
    support::assert_qos_invalid(&out, "qos-only", &[]);
}

#[tokio::test]
async fn request_above_limit_per_container_gets_upstreams_message() {
    let (env, base, _g) = setup().await;
    let p = invalid_upstream(
        base,
        "per-container-qos",
        "must be less than or equal to memory limit",
    );
    assert!(!p.upstream.message().contains(answer::QOS_RULE));
    assert_user_sees_upstreams_refusal(env, p).await;
}

/// Invalid specs (larger than the node, or an empty pod-level object): upstream's words only.
#[tokio::test]
async fn invalid_resizes_get_upstreams_message_not_infeasible() {
    let (env, base, _g) = setup().await;
    for (key, upstream_says) in [
        (
            "huge-request-above-limit",
            "must be less than or equal to cpu limit",
        ),
        (
            "pod-request-below-aggregate",
            "must be greater than or equal to aggregate container requests",
        ),
        (
            "container-limit-above-pod-limit",
            "must be less than or equal to pod limits",
        ),
        (
            "empty-pod-level-resources",
            "only cpu and memory resources are mutable",
        ),
    ] {
        let p = invalid_upstream(base, key, upstream_says);
        assert_user_sees_upstreams_refusal(env, p).await;
    }
}

#[tokio::test]
async fn pod_level_resize_on_a_node_without_the_feature_gets_upstreams_message() {
    let (env, base, _g) = setup().await;
    let nodes: Api<Node> = Api::all(env.client().await);
    let declared = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.declared_features.clone())
            .unwrap_or_default()
    };
    let pods: Api<Pod> = Api::namespaced(
        env.client().await,
        &base.named("pod-level-on-default-node").ns,
    );
    let node_of = async |name: &str| {
        let pod = pods.get(name).await.unwrap();
        let node = pod.spec.unwrap().node_name.unwrap();
        nodes.get(&node).await.unwrap()
    };

    // A v1.37.2 kubelet declares what its gates enable (the node-declared-features registry's
    // `Discover`, k8s.io/component-helpers nodedeclaredfeatures): with
    // InPlacePodLevelResourcesVerticalScaling=false everything but that one, the init-container
    // feature included (locked on in v1.37).
    let off = base.named("pod-level-on-node-without-feature");
    let off_node = node_of(&off.name).await;
    let without_plr: Vec<String> = KUBELET_DEFAULTS_V1_37
        .iter()
        .filter(|f| **f != POD_LEVEL_RESIZE)
        .map(|f| (*f).to_owned())
        .collect();
    assert_eq!(declared(&off_node), without_plr);
    assert_eq!(answer::upstream(&off.upstream), Upstream::NodeFeatures);
    let expected = format!(
        "pod update requires features InPlacePodLevelResourcesVerticalScaling which are not available on node \"{}\"",
        off_node.metadata.name.unwrap()
    );
    assert!(
        off.upstream.message().contains(&expected),
        "{}",
        off.upstream
    );
    assert_user_sees_upstreams_refusal(env, off).await;

    let default = base.named("pod-level-on-default-node");
    assert_eq!(
        declared(&node_of(&default.name).await),
        KUBELET_DEFAULTS_V1_37,
        "a v1.37.2 kubelet with default gates"
    );
    assert_eq!(default.upstream, Answer::Accepted);
    let out = kubectl_resize(env, default).await;
    assert!(out.success, "{}", out.stderr);
    assert!(
        !out.stderr.contains(answer::NODE_FEATURES),
        "{}",
        out.stderr
    );
    assert_eq!(
        pods.get(&default.name).await.unwrap().metadata.generation,
        Some(2),
        "the resize was stored"
    );
}

/// Why the init-container variant of the node-features refusal is not replayed: a v1.37.2
/// kubelet cannot run without `InPlacePodVerticalScalingInitContainers` (GA, `LockToDefault` in
/// `pkg/features/kube_features.go`; `SetFromMap` in k8s.io/component-base
/// `featuregate/feature_gate.go` refuses "cannot set feature gate … feature is locked to true"),
/// so no v1.37 node omits it from `declaredFeatures`.
#[tokio::test]
async fn a_v1_37_kubelet_cannot_turn_the_init_container_resize_feature_off() {
    let (env, _, _g) = setup().await;
    let cfg = HollowNodeConfig::with_allocatable(&env.unique("fid-init-off"), "1", "1Gi")
        .unwrap()
        .feature_gate("InPlacePodVerticalScalingInitContainers=false");
    let err = match HollowNode::start(&env.cp, &cfg).await {
        Ok(node) => panic!("{} started with the gate off", node.name()),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        err.contains("InPlacePodVerticalScalingInitContainers") && err.contains("locked"),
        "{err}"
    );
}

#[tokio::test]
async fn adding_pod_level_resources_to_a_pod_with_overhead_is_accepted() {
    let (env, base, _g) = setup().await;
    let p = base.named("pod-level-added-with-overhead");
    assert_eq!(p.upstream, Answer::Accepted);
    let out = kubectl_resize(env, p).await;
    assert!(out.success, "{}", out.stderr);
    let stored = stored(env, p).await;
    assert_eq!(stored.metadata.generation, Some(2), "the resize was stored");
    assert_eq!(
        stored.status.and_then(|s| s.qos_class).as_deref(),
        Some("Guaranteed")
    );
}

/// A resize that adds pod-level `hugepages-2Mi` and changes no cpu or memory value: upstream
/// refuses it, resize-guard steps aside and says so on a dry run (decision `invalid`, as
/// `kubectl resize-guard what-if` reads it), and the user sees upstream's refusal word for word.
#[tokio::test]
async fn adding_pod_level_hugepages_is_upstreams_refusal_and_resize_guards_invalid() {
    let (env, base, _g) = setup().await;
    let p = invalid_upstream(
        base,
        "pod-level-hugepages-added",
        "spec: Forbidden: only cpu and memory resources are mutable at pod-level",
    );
    let dry = env
        .kubectl()
        .resize_dry_run(&p.ns, &p.name, &p.patch.to_string())
        .await
        .unwrap();
    assert!(!dry.success, "{}", dry.stderr);
    assert!(
        dry.stderr
            .contains("resize-guard (dry run): mutate decision invalid"),
        "{}",
        dry.stderr
    );
    assert_user_sees_upstreams_refusal(env, p).await;
}

/// One row of the summary: how often each outcome happened for one class of upstream answer.
#[derive(Default)]
struct Row {
    outcomes: BTreeMap<&'static str, usize>,
    disagreements: usize,
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Accepted => "accepted",
        Outcome::Same => "same refusal",
        Outcome::GuardQos => "rg QoS",
        Outcome::GuardInfeasible => "rg Infeasible",
        Outcome::Different => "other",
    }
}

fn report(base: &Baseline, p: &Probe, with: &Answer, why: &str) -> String {
    let mut s = format!(
        "{} — {why}\n  replay: RESIZE_GUARD_FIDELITY_SEED={} RESIZE_GUARD_FIDELITY_CASES={}\n  pod:      {}\n  patch:    {}\n  upstream: {}\n  with resize-guard: {}\n",
        p.label,
        base.seed,
        p.name[1..].parse::<usize>().map_or(0, |i| i + 1),
        p.pod,
        p.patch,
        p.upstream,
        with
    );
    if let Some(to) = &p.qos_to {
        let _ = writeln!(s, "  upstream QoS class after the resize: {to:?}");
    }
    s
}

/// The disagreements to print in full: the first of each kind, then the earliest others, ten
/// in all.
fn shown(disagreements: &[(usize, String)]) -> Vec<&(usize, String)> {
    let mut out: Vec<&(usize, String)> = Vec::new();
    for d in disagreements {
        if out.len() < 10 && !out.iter().any(|o| o.1 == d.1) {
            out.push(d);
        }
    }
    for d in disagreements {
        if out.len() < 10 && !out.iter().any(|o| o.0 == d.0) {
            out.push(d);
        }
    }
    out.sort_by_key(|d| d.0);
    out
}

#[tokio::test]
async fn resize_guard_never_contradicts_the_api_server_on_generated_resizes() {
    let (env, base, _g) = setup().await;
    let started = Instant::now();
    let client = env.client().await;
    let answers: BTreeMap<usize, Answer> = stream::iter(base.cases.iter().enumerate())
        .map(|(i, p)| {
            let api: Api<Pod> = Api::namespaced(client.clone(), &p.ns);
            async move { (i, answer::resize(&api, &p.name, &p.patch, true).await) }
        })
        .buffer_unordered(4)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect();

    let mut rows: BTreeMap<&'static str, Row> = BTreeMap::new();
    let mut disagreements = Vec::new();
    for (i, with) in &answers {
        let p = &base.cases[*i];
        let class = answer::upstream(&p.upstream).class();
        let qos_to = p.qos_to.as_ref().and_then(|r| r.as_deref().ok());
        let (outcome, why) = answer::judge(&p.upstream, with, qos_to, env.cp.minor());
        let row = rows.entry(class).or_default();
        *row.outcomes.entry(outcome_name(outcome)).or_default() += 1;
        if let Some(why) = why {
            row.disagreements += 1;
            disagreements.push((*i, why));
        }
    }

    let columns = [
        "accepted",
        "same refusal",
        "rg QoS",
        "rg Infeasible",
        "other",
    ];
    let mut table = format!(
        "\nfidelity: seed {}, {} cases ({} not created) on {} hollow nodes, phase 1 {:.1}s, phase 2 {:.1}s\n{:<14}{:>7}",
        base.seed,
        base.cases.len(),
        base.not_created.len(),
        base.nodes,
        base.elapsed.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        "upstream",
        "cases"
    );
    for c in columns {
        let _ = write!(table, "{c:>15}");
    }
    let _ = writeln!(table, "{:>10}", "disagree");
    for class in Upstream::CLASSES {
        let row = rows.remove(class).unwrap_or_default();
        let total: usize = row.outcomes.values().sum();
        let _ = write!(table, "{class:<14}{total:>7}");
        for c in columns {
            let _ = write!(table, "{:>15}", row.outcomes.get(c).copied().unwrap_or(0));
        }
        let _ = writeln!(table, "{:>10}", row.disagreements);
    }
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, why) in &disagreements {
        *kinds.entry(why.as_str()).or_default() += 1;
    }
    for (why, n) in &kinds {
        let _ = writeln!(table, "{n:>5} × {why}");
    }
    println!("{table}");
    for n in &base.not_created {
        println!("not created: {n}");
    }

    // `make test-matrix` shows this as one row of the version table.
    if let Some(dir) = std::env::var_os("RESIZE_GUARD_MATRIX_DIR") {
        let passed = disagreements.is_empty() && base.not_created.len() * 10 <= base.cases.len();
        let detail = format!(
            "{} generated resizes (seed {}): {} answered as upstream allows, {} not",
            base.cases.len(),
            base.seed,
            base.cases.len() - disagreements.len(),
            disagreements.len()
        );
        let doc = serde_json::json!({"rows": [{
            "id": "fidelity",
            "behaviour": "never contradicts the API server (generated resizes, dry run)",
            "result": if passed { "pass" } else { "fail" },
            "detail": detail,
        }]});
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("v1.{}.fidelity.json", env.cp.minor())),
            doc.to_string(),
        )
        .unwrap();
    }
    assert!(
        base.not_created.len() * 10 <= base.cases.len().max(1),
        "too many generated pods were not created: {:?}",
        base.not_created
    );
    assert!(
        disagreements.is_empty(),
        "{} of {} resizes answered differently with resize-guard installed (seed {}):{table}\n{}",
        disagreements.len(),
        base.cases.len(),
        base.seed,
        shown(&disagreements)
            .into_iter()
            .map(|(i, why)| report(base, &base.cases[*i], &answers[i], why))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
