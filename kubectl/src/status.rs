//! `kubectl resize-guard status`: every pod whose resize the kubelet has not finished —
//! `PodResizePending` (Deferred, Infeasible) or `PodResizeInProgress` — with its node, how long
//! it has waited and what resize-guard will do about it, highest priority first (the order the
//! kubelet retries Deferred resizes in and the order an operator should look). Like `kubectl get
//! pods`, it lists the namespace `-n` names, else the context's, and every namespace with `-A`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use resize_guard_policy::assess;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::pod::{self, PodKey};
use resize_guard_policy::upstream;
use serde::Serialize;

use crate::connection::Connection;
use crate::facts::{Judge, LeaseState, ago, ledger, list_pages};
use crate::judgement::{DecisionView, decision_view};
use crate::output::{Document, rfc3339};
use crate::table::{age, render};
use crate::versions::Versions;

/// What `status` prints: `kind: Status`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The namespace listed; `null` for every namespace (`-A`).
    pub namespace: Option<String>,
    /// The pending resizes, highest priority first.
    pub items: Vec<Row>,
    /// Assumptions made because something could not be read.
    pub notes: Vec<String>,
    /// The plugin's release and the installed programs' ([`crate::versions`]).
    pub versions: Versions,
}

impl Document for Report {
    const KIND: &'static str = "Status";

    /// The table, then a note per assumption, then a warning if the installed programs run
    /// another release than the plugin.
    fn text(&self, wide: bool) -> String {
        let mut text = render_text(&self.items, self.namespace.as_deref(), wide);
        for n in &self.notes {
            text.push_str(&format!("note: {n}\n"));
        }
        if let Some(w) = self.versions.warning() {
            text.push_str(&format!("warning: {w}\n"));
        }
        text
    }
}

/// One pending resize.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Node.
    pub node: String,
    /// Priority.
    pub priority: i32,
    /// `Deferred`, `Infeasible` or `InProgress`.
    pub state: String,
    /// Since the condition last changed (`lastTransitionTime`), as kubectl prints ages.
    pub age: String,
    /// The condition's `lastTransitionTime` (RFC 3339), which [`Row::age`] counts from.
    pub since: Option<String>,
    /// The kubelet's message.
    pub message: String,
    /// What resize-guard decides.
    pub decision: DecisionView,
    #[serde(skip)]
    since_seconds: u64,
}

/// The pods with a pending resize in `namespace` (all when `None`), judged.
pub async fn collect(
    conn: &Connection,
    namespace: Option<&str>,
    judge: &Judge,
    lease: Option<&LeaseState>,
    now: Timestamp,
) -> anyhow::Result<Vec<Row>> {
    let api: Api<Pod> = match namespace {
        Some(ns) => Api::namespaced(conn.client.clone(), ns),
        None => Api::all(conn.client.clone()),
    };
    let pods = list_pages(&api, ListParams::default(), |p| pending(p).is_some()).await?;
    let mut ledgers: BTreeMap<String, Option<NodeLedger>> = BTreeMap::new();
    let mut rows = Vec::new();
    for p in pods.iter() {
        let Some((state, message, since)) = pending(p) else {
            continue;
        };
        let node = pod::node_name(p).unwrap_or_default().to_owned();
        if !ledgers.contains_key(&node) {
            let l = if node.is_empty() {
                None
            } else {
                ledger(conn, &node).await?
            };
            ledgers.insert(node.clone(), l);
        }
        let l = ledgers.get(&node).and_then(Option::as_ref);
        let ctx = judge.context(l);
        let decision = decision_view(&assess(p, &ctx), &ctx, lease);
        let key = PodKey::of(p);
        let waited = since.map(|t| ago(t, now)).unwrap_or_default();
        rows.push(Row {
            namespace: key.namespace,
            name: key.name,
            node,
            priority: upstream::pod::priority(p),
            state,
            age: since.map(|_| age(waited)).unwrap_or_default(),
            since: since.map(rfc3339),
            message,
            decision,
            since_seconds: waited.as_secs(),
        });
    }
    rows.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(b.since_seconds.cmp(&a.since_seconds))
            .then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
    });
    Ok(rows)
}

/// The pod's unfinished resize: state, kubelet message and since when.
fn pending(p: &Pod) -> Option<(String, String, Option<Timestamp>)> {
    let conditions = p.status.as_ref()?.conditions.as_ref()?;
    let c = conditions
        .iter()
        .find(|c| c.type_ == "PodResizePending" && c.status == "True")
        .or_else(|| {
            conditions
                .iter()
                .find(|c| c.type_ == "PodResizeInProgress" && c.status == "True")
        })?;
    let state = match c.type_.as_str() {
        "PodResizeInProgress" => "InProgress".to_owned(),
        _ => c.reason.clone().unwrap_or_else(|| "Pending".into()),
    };
    Some((
        state,
        c.message.clone().unwrap_or_default(),
        c.last_transition_time.as_ref().map(|t| t.0),
    ))
}

/// The table; `namespace` is the one listed (`None`: every namespace, with a NAMESPACE column);
/// `wide` adds the kubelet's message.
pub fn render_text(rows: &[Row], namespace: Option<&str>, wide: bool) -> String {
    let all_namespaces = namespace.is_none();
    if rows.is_empty() {
        return match namespace {
            Some(ns) => format!("No pending resizes in namespace {ns}.\n"),
            None => "No pending resizes.\n".to_owned(),
        };
    }
    let mut headers = vec![];
    if all_namespaces {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "NODE", "PRIORITY", "RESIZE", "AGE", "RESIZE-GUARD"]);
    if wide {
        headers.push("KUBELET");
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![];
            if all_namespaces {
                row.push(r.namespace.clone());
            }
            row.extend([
                r.name.clone(),
                r.node.clone(),
                r.priority.to_string(),
                r.state.clone(),
                r.age.clone(),
                r.decision.short.clone(),
            ]);
            if wide {
                row.push(r.message.clone());
            }
            row
        })
        .collect();
    render(&headers, &table)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::Output;
    use crate::output::render;
    use crate::versions::{Program, compare};

    fn row() -> Row {
        Row {
            namespace: "shop".into(),
            name: "web-0".into(),
            node: "n1".into(),
            priority: 1000,
            state: "Deferred".into(),
            age: "3m".into(),
            since: Some("2026-01-02T15:01:05Z".into()),
            message: "Node didn't have enough resource: cpu".into(),
            decision: DecisionView::idle(false),
            since_seconds: 180,
        }
    }

    #[test]
    fn the_text_shows_what_the_json_holds() {
        let old = Program {
            deployment: "rg/resize-guard-webhook".into(),
            image: Some("r/w:0.1.0".into()),
            version: Some("0.1.0".into()),
            source: Some("imageTag"),
            error: None,
        };
        let report = Report {
            namespace: None,
            items: vec![row()],
            notes: vec!["PodDisruptionBudgets could not be listed".into()],
            versions: compare("0.2.0", vec![old]),
        };
        let at: Timestamp = "2026-01-02T15:04:05Z".parse().unwrap();
        let text = render(Output::Wide, &report, at).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&render(Output::Json, &report, at).unwrap()).unwrap();
        assert_eq!(json["kind"], "Status");
        assert_eq!(json["observedAt"], "2026-01-02T15:04:05Z");
        assert_eq!(json["namespace"], serde_json::Value::Null);
        let item = &json["items"][0];
        let row = text.lines().nth(1).unwrap();
        for key in ["namespace", "name", "node", "state", "age", "message"] {
            assert!(row.contains(item[key].as_str().unwrap()), "{key} in {row}");
        }
        assert!(row.contains(&item["priority"].to_string()), "{row}");
        assert!(
            row.contains(item["decision"]["short"].as_str().unwrap()),
            "{row}"
        );
        assert_eq!(item["since"], "2026-01-02T15:01:05Z");
        for n in json["notes"].as_array().unwrap() {
            assert!(
                text.contains(&format!("note: {}\n", n.as_str().unwrap())),
                "{text}"
            );
        }
        assert_eq!(json["versions"]["skew"], true);
        assert!(
            text.contains("warning: kubectl resize-guard is 0.2.0, but rg/resize-guard-webhook runs 0.1.0 (image tag)"),
            "{text}"
        );
    }

    #[test]
    fn no_pending_resize_names_the_namespace_looked_in() {
        assert_eq!(
            render_text(&[], Some("shop"), false),
            "No pending resizes in namespace shop.\n"
        );
        assert_eq!(render_text(&[], None, true), "No pending resizes.\n");
    }
}
