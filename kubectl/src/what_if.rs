//! `kubectl resize-guard what-if POD --cpu 550m [--memory 1Gi]`: the resize a user is about to
//! send, tried first. The patch is built the way VPA builds its own (requests, with limits kept
//! in proportion unless `--requests-only`), sent as a server-side dry run so the API server and
//! every webhook answer for real ([`crate::dry_run`]), and judged locally with
//! `resize_guard_policy::classify` for the plan (whom resize-guard would preempt). The output
//! ends with the exact `kubectl patch` command that applies it.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use resize_guard_policy::upstream::quantity::ResourceName;
use resize_guard_policy::{Context, classify};
use serde::Serialize;
use serde_json::json;

use crate::args::WhatIf;
use crate::dry_run::Answer;
use crate::judgement::{DecisionView, decision_view, victims_table};
use crate::output::Document;
use crate::table::bold;

/// One planned change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// `requests` or `limits`.
    pub field: String,
    /// `cpu` or `memory`.
    pub resource: String,
    /// Before (empty if unset).
    pub from: String,
    /// After.
    pub to: String,
}

/// The resize to try.
#[derive(Debug, Clone)]
pub struct Proposal {
    /// The container.
    pub container: String,
    /// Whether it is an init (sidecar) container.
    pub init: bool,
    /// What changes.
    pub changes: Vec<Change>,
    /// The strategic-merge patch for `pods/resize`.
    pub patch: serde_json::Value,
    /// The pod as it would be.
    pub resized: Pod,
}

/// Builds the resize `args` asks for on `pod`.
pub fn propose(pod: &Pod, args: &WhatIf) -> anyhow::Result<Proposal> {
    anyhow::ensure!(
        args.cpu.is_some() || args.memory.is_some(),
        "nothing to resize: pass --cpu and/or --memory"
    );
    let (container, init) = pick(pod, args.container.as_deref())?;
    let resources = container.resources.clone().unwrap_or_default();
    let mut requests = resources.requests.clone().unwrap_or_default();
    let mut limits = resources.limits.clone().unwrap_or_default();
    let mut changes = Vec::new();
    let mut patch_requests = serde_json::Map::new();
    let mut patch_limits = serde_json::Map::new();
    for (name, value) in [
        (ResourceName::Cpu, args.cpu.as_deref()),
        (ResourceName::Memory, args.memory.as_deref()),
    ] {
        let Some(value) = value else { continue };
        let wanted = Quantity(value.to_owned());
        let amount = name
            .amount(&wanted)
            .with_context(|| format!("--{name} {value:?} is not a Kubernetes quantity"))?;
        let old_request = requests.get(name.key()).cloned();
        let old_limit = limits.get(name.key()).cloned();
        changes.push(Change {
            field: "requests".into(),
            resource: name.key().into(),
            from: old_request
                .as_ref()
                .map(|q| q.0.clone())
                .unwrap_or_default(),
            to: value.to_owned(),
        });
        requests.insert(name.key().into(), wanted.clone());
        patch_requests.insert(name.key().into(), json!(value));
        if args.requests_only {
            continue;
        }
        if let Some(limit) = old_limit {
            // A request defaulted from its limit is the limit (SetDefaults_Pod).
            let base = old_request.as_ref().unwrap_or(&limit);
            let new_limit = scaled(name, &limit, base, amount, value)?;
            changes.push(Change {
                field: "limits".into(),
                resource: name.key().into(),
                from: limit.0.clone(),
                to: new_limit.clone(),
            });
            limits.insert(name.key().into(), Quantity(new_limit.clone()));
            patch_limits.insert(name.key().into(), json!(new_limit));
        }
    }
    let mut body = serde_json::Map::new();
    body.insert("requests".into(), patch_requests.into());
    if !patch_limits.is_empty() {
        body.insert("limits".into(), patch_limits.into());
    }
    let list = if init { "initContainers" } else { "containers" };
    let patch = json!({"spec": {list: [{"name": container.name, "resources": body}]}});
    let mut resized = pod.clone();
    if let Some(s) = resized.spec.as_mut() {
        let target = if init {
            s.init_containers
                .iter_mut()
                .flatten()
                .find(|c| c.name == container.name)
        } else {
            s.containers.iter_mut().find(|c| c.name == container.name)
        };
        if let Some(c) = target {
            let r = c.resources.get_or_insert_with(Default::default);
            r.requests = Some(requests);
            if !limits.is_empty() {
                r.limits = Some(limits);
            }
        }
    }
    Ok(Proposal {
        container: container.name.clone(),
        init,
        changes,
        patch,
        resized,
    })
}

/// The container to resize: the named one (regular or sidecar), else the only one.
fn pick<'a>(pod: &'a Pod, name: Option<&str>) -> anyhow::Result<(&'a Container, bool)> {
    let spec = pod.spec.as_ref().context("the pod has no spec")?;
    let regular = spec.containers.iter().map(|c| (c, false));
    let init = spec.init_containers.iter().flatten().map(|c| (c, true));
    match name {
        Some(n) => regular
            .chain(init)
            .find(|(c, _)| c.name == n)
            .with_context(|| {
                format!(
                    "the pod has no container {n:?}; it has {}",
                    crate::facts::container_names(pod).join(", ")
                )
            }),
        None if spec.containers.len() == 1 => Ok((&spec.containers[0], false)),
        None => anyhow::bail!(
            "the pod has several containers ({}): pick one with --container",
            crate::facts::container_names(pod).join(", ")
        ),
    }
}

/// `limit × new / base`, VPA's proportional limit; the request's own spelling when the ratio
/// is 1 (a Guaranteed container stays Guaranteed, spelled as the user wrote it).
fn scaled(
    name: ResourceName,
    limit: &Quantity,
    base: &Quantity,
    new_amount: i64,
    spelled: &str,
) -> anyhow::Result<String> {
    let lim = name.amount(limit).context("the container's limit")?;
    let b = name.amount(base).context("the container's request")?;
    if lim == b || b == 0 {
        return Ok(spelled.to_owned());
    }
    let value = i128::from(new_amount) * i128::from(lim) / i128::from(b);
    Ok(name.format(i64::try_from(value).unwrap_or(i64::MAX)))
}

/// The `kubectl` command that applies `proposal`.
pub fn command(namespace: &str, pod: &str, proposal: &Proposal) -> String {
    format!(
        "kubectl patch pod {pod} -n {namespace} --subresource resize --type strategic -p '{}'",
        proposal.patch
    )
}

/// What `what-if` prints: `kind: WhatIf`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `namespace/name`.
    pub pod: String,
    /// The container.
    pub container: String,
    /// What changes.
    pub changes: Vec<Change>,
    /// The API server's answer to the dry run.
    pub api_server: Answer,
    /// resize-guard's own judgement, made here.
    pub plan: DecisionView,
    /// The command that applies it.
    pub command: String,
}

impl Document for Report {
    const KIND: &'static str = "WhatIf";

    fn text(&self, _wide: bool) -> String {
        render_text(self)
    }
}

/// Judges `proposal` locally (the plan).
pub fn local_plan(pod: &Pod, proposal: &Proposal, ctx: &Context<'_>) -> DecisionView {
    decision_view(&classify(pod, &proposal.resized, ctx), ctx, None)
}

/// The plan when the node or its pods could not be read with the caller's credentials: no
/// local judgement, only the API server's answer above (`unread`).
pub fn unread_plan(e: &anyhow::Error) -> DecisionView {
    DecisionView {
        label: "unread".into(),
        text: format!(
            "{e:#}: with your credentials the plan is only what resize-guard's webhook answered above, which names no pod outside this namespace"
        ),
        victims: vec![],
        reason: None,
        short: "unread".into(),
    }
}

/// The text form.
pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    let changes: Vec<String> = r
        .changes
        .iter()
        .map(|c| {
            let from = if c.from.is_empty() { "<none>" } else { &c.from };
            format!(
                "{} {} {from} → {}",
                c.resource,
                c.field.trim_end_matches('s'),
                c.to
            )
        })
        .collect();
    out.push_str(&format!(
        "{} pod {}, container {}: {}\n\n",
        bold("Resize"),
        r.pod,
        r.container,
        changes.join(", ")
    ));
    let a = &r.api_server;
    if a.accepted {
        out.push_str(&format!(
            "{} accepted (dry run: nothing was changed)\n",
            bold("API server:")
        ));
    } else {
        out.push_str(&format!(
            "{} refused (HTTP {}): {}\n",
            bold("API server:"),
            a.code,
            a.message.as_deref().unwrap_or_default()
        ));
    }
    for w in &a.warnings {
        out.push_str(&format!("  Warning: {w}\n"));
    }
    match a.decisions.as_slice() {
        [] if a.reached_resize_guard() => {}
        [] => out.push_str(
            "  resize-guard did not answer (not installed, or unreachable: run `kubectl resize-guard check`)\n",
        ),
        ds => {
            for d in ds {
                out.push_str(&format!(
                    "  resize-guard's {} webhook decided: {}\n",
                    d.stage, d.decision
                ));
            }
        }
    }
    out.push_str(&format!("\n{} {}\n", bold("Plan:"), r.plan.label));
    for line in r.plan.text.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str(&victims_table(&r.plan.victims, false));
    out.push_str(&format!("\n{}\n  {}\n", bold("To apply it:"), r.command));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::fixture::{PodBuilder, container};

    fn args(cpu: Option<&str>, memory: Option<&str>, requests_only: bool) -> WhatIf {
        WhatIf {
            pod: "p".into(),
            cpu: cpu.map(str::to_owned),
            memory: memory.map(str::to_owned),
            container: None,
            requests_only,
        }
    }

    #[test]
    fn limits_move_with_requests_unless_requests_only() {
        let g = PodBuilder::new("ns", "p")
            .container(container("app").guaranteed("250m", "256Mi"))
            .build();
        let p = propose(&g, &args(Some("550m"), None, false)).unwrap();
        assert_eq!(
            p.patch,
            json!({"spec": {"containers": [{"name": "app", "resources": {
                "requests": {"cpu": "550m"}, "limits": {"cpu": "550m"}}}]}})
        );
        let p = propose(&g, &args(Some("500m"), None, true)).unwrap();
        assert_eq!(
            p.patch,
            json!({"spec": {"containers": [{"name": "app", "resources": {
                "requests": {"cpu": "500m"}}}]}})
        );
        assert_eq!(
            command("shop", "p", &p),
            r#"kubectl patch pod p -n shop --subresource resize --type strategic -p '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m"}}}]}}'"#
        );

        let b = PodBuilder::new("ns", "p")
            .container(
                container("app")
                    .request("cpu", "100m")
                    .limit("cpu", "300m")
                    .request("memory", "64Mi"),
            )
            .build();
        let p = propose(&b, &args(Some("200m"), Some("128Mi"), false)).unwrap();
        assert_eq!(
            p.patch["spec"]["containers"][0]["resources"],
            json!({"requests": {"cpu": "200m", "memory": "128Mi"}, "limits": {"cpu": "600m"}})
        );
    }

    #[test]
    fn unclear_requests_get_clear_errors() {
        let two = PodBuilder::new("ns", "p")
            .container(container("a").guaranteed("1", "1Gi"))
            .container(container("b").guaranteed("1", "1Gi"))
            .build();
        let e = propose(&two, &args(Some("2"), None, false)).unwrap_err();
        assert!(e.to_string().contains("pick one with --container"), "{e}");
        let mut a = args(Some("2"), None, false);
        a.container = Some("c".into());
        let e = propose(&two, &a).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"the pod has no container "c"; it has a, b"#
        );
        let e = propose(&two, &args(None, None, false)).unwrap_err();
        assert!(e.to_string().contains("pass --cpu"), "{e}");
        a.container = Some("a".into());
        a.cpu = Some("lots".into());
        let e = propose(&two, &a).unwrap_err();
        assert!(
            e.to_string().contains("is not a Kubernetes quantity"),
            "{e}"
        );
    }
}
