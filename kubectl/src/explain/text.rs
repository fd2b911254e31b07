//! The text form of an [`Explanation`]: the pod's facts, its node's ledger as a table, the
//! pending resize, what resize-guard decides (with victims, the memory rule, the recorded plan
//! and the controller), and the resize Events.

use super::{Amount, EventView, Explanation, LedgerView, PendingView, PlanView};
use crate::judgement::victims_table;
use crate::table::{bold, render};

/// The text form.
pub fn render_text(x: &Explanation, wide: bool) -> String {
    let mut out = String::new();
    let mut field = |k: &str, v: String| out.push_str(&format!("{:<12}{v}\n", format!("{k}:")));
    field("Pod", x.pod.clone());
    field("Node", x.node.clone().unwrap_or_else(|| "<none>".into()));
    field(
        "Priority",
        match &x.priority_class {
            Some(c) => format!("{} (PriorityClass {c})", x.priority),
            None => x.priority.to_string(),
        },
    );
    field("QoS class", format!("{} — {}", x.qos.class, x.qos.why));
    if let Some(l) = &x.ledger {
        ledger_text(&mut out, x, l);
    }
    out.push('\n');
    resize_text(&mut out, x.resize.as_ref());
    decision_text(&mut out, x);
    events_text(&mut out, &x.events, wide);
    out
}

/// The node's ledger, as a table of cpu and memory.
fn ledger_text(out: &mut String, x: &Explanation, l: &LedgerView) {
    out.push_str(&format!(
        "\n{}\n",
        bold(&format!(
            "Node {} (kubelet accounting):",
            x.node.as_deref().unwrap_or_default()
        ))
    ));
    let row = |name: &str, pick: fn(&Amount) -> &String| -> Vec<String> {
        let mut r = vec![name.to_owned()];
        for a in [
            &l.allocatable,
            &l.others_hold,
            &l.terminating,
            &l.this_pod_holds,
            &l.this_pod_wants,
            &l.free,
        ] {
            r.push(pick(a).clone());
        }
        r
    };
    let table = render(
        &[
            "RESOURCE",
            "ALLOCATABLE",
            "OTHER PODS",
            "TERMINATING",
            "THIS POD HOLDS",
            "THIS POD WANTS",
            "FREE",
        ],
        &[row("cpu", |a| &a.cpu), row("memory", |a| &a.memory)],
    );
    out.push_str(&indent(&table));
}

/// The pending resize, or that none is.
fn resize_text(out: &mut String, resize: Option<&PendingView>) {
    match resize {
        Some(p) => {
            let state = if p.reason.is_empty() {
                p.condition.clone()
            } else {
                format!("{} ({})", p.reason, p.condition)
            };
            let since = p
                .age
                .as_deref()
                .map(|a| format!(", for {a}"))
                .unwrap_or_default();
            out.push_str(&format!("{} {state}{since}\n", bold("Resize:")));
            if !p.message.is_empty() {
                out.push_str(&format!("  kubelet: {}\n", p.message));
            }
        }
        None => out.push_str(&format!(
            "{} none pending (spec and status agree)\n",
            bold("Resize:")
        )),
    }
}

/// What resize-guard decides, and what stands behind it.
fn decision_text(out: &mut String, x: &Explanation) {
    out.push_str(&format!(
        "\n{} {}\n",
        bold("resize-guard:"),
        x.decision.label
    ));
    for line in x.decision.text.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str(&victims_table(&x.decision.victims, true));
    if let Some(m) = &x.memory {
        out.push_str(&format!("  memory ({}): {}\n", m.verdict, m.text));
    }
    if let Some(p) = &x.recorded_plan {
        out.push_str(&format!(
            "  recorded plan ({} ago, generation {}{}): {}\n",
            p.age,
            p.generation,
            if p.current { "" } else { ", stale" },
            plan_victims(p)
        ));
    }
    if let Some(c) = &x.controller {
        out.push_str(&format!("  controller: {c}\n"));
    }
    for n in &x.notes {
        out.push_str(&format!("  note: {n}\n"));
    }
}

/// The resize Events, `wide` with where each came from.
fn events_text(out: &mut String, events: &[EventView], wide: bool) {
    out.push_str(&format!("\n{}", bold("Events:")));
    if events.is_empty() {
        out.push_str(" <none>\n");
    } else {
        out.push('\n');
        let rows: Vec<Vec<String>> = events
            .iter()
            .map(|e| {
                let mut r = vec![e.age.clone(), e.kind.clone(), e.reason.clone()];
                if wide {
                    r.push(e.from.clone());
                }
                r.push(e.message.clone());
                r
            })
            .collect();
        let headers: &[&str] = if wide {
            &["LAST SEEN", "TYPE", "REASON", "FROM", "MESSAGE"]
        } else {
            &["LAST SEEN", "TYPE", "REASON", "MESSAGE"]
        };
        out.push_str(&indent(&render(headers, &rows)));
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// A recorded plan's victims: its own namespace's by name, the others counted.
fn plan_victims(p: &PlanView) -> String {
    let others = match p.others {
        0 => String::new(),
        1 => "1 pod in another namespace".to_owned(),
        n => format!("{n} pods in other namespaces"),
    };
    match (p.victims.is_empty(), others.is_empty()) {
        (_, true) => p.victims.join(", "),
        (true, false) => others,
        (false, false) => format!("{} and {others}", p.victims.join(", ")),
    }
}
