//! The metrics reference: each program's registry built as the program builds it (the same
//! constructors: `Metrics::new`, the cluster view's `register`, the admission probe's
//! `Findings::new`), one series of every labelled family recorded through the program's own
//! methods, encoded, and read back: name, type and help from the descriptors, label names from
//! the samples. prometheus_client leaves a labelled family with no series out of the exposition,
//! so the registered names are also read from the registry ([`registered`]): a registered metric
//! missing from the exposition fails the generation, naming it, and a new labelled metric cannot
//! be left out of the reference unnoticed.

use std::time::{Duration, UNIX_EPOCH};

use resize_guard_cluster::exposition::{Readings, register};
use resize_guard_policy::policy::Mode;
use resize_guard_policy::version::KubernetesVersion;
use resize_guard_runtime::cluster_version::ClusterVersion;
use resize_guard_runtime::exposition::Exposition;

use crate::table;

/// One metric family as `/metrics` serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The name a query uses (counters with their `_total`).
    pub name: String,
    /// `counter`, `gauge`, `histogram`, …
    pub kind: String,
    /// The help text.
    pub help: String,
    /// Label names, in the order of the first series (`le` left out).
    pub labels: Vec<String>,
    /// How many series the exposition held.
    pub series: usize,
    /// The first series' value.
    pub first_value: Option<String>,
}

/// The families of an OpenMetrics text, in order.
pub fn parse(text: &str) -> Result<Vec<Family>, String> {
    let mut out: Vec<Family> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line}", i + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push(Family {
                name: name.to_owned(),
                kind: String::new(),
                help: help
                    .replace("\\n", " ")
                    .replace("\\\"", "\"")
                    .replace("\\\\", "\\"),
                labels: Vec::new(),
                series: 0,
                first_value: None,
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or_else(|| at("no type"))?;
            match out.last_mut() {
                Some(f) if f.name == name => f.kind = kind.to_owned(),
                _ => return Err(at("TYPE without its HELP")),
            }
        } else if line.starts_with('#') || line.is_empty() {
            // `# UNIT`, `# EOF`.
        } else {
            let family = out
                .last_mut()
                .ok_or_else(|| at("a sample before any HELP"))?;
            let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value"))?;
            if !line[..name_end].starts_with(&family.name) {
                return Err(at(&format!("a sample outside family {}", family.name)));
            }
            let (labels, value) = if line[name_end..].starts_with('{') {
                let close = label_set_end(&line[name_end..]).ok_or_else(|| at("unclosed {"))?;
                (
                    label_names(&line[name_end + 1..name_end + close])
                        .ok_or_else(|| at("bad labels"))?,
                    line[name_end + close + 1..].trim(),
                )
            } else {
                (Vec::new(), line[name_end..].trim())
            };
            for label in labels {
                if label != "le" && !family.labels.contains(&label) {
                    family.labels.push(label);
                }
            }
            family.series += 1;
            if family.first_value.is_none() {
                family.first_value = Some(value.to_owned());
            }
        }
    }
    for f in &mut out {
        if f.kind == "counter" {
            f.name.push_str("_total");
        }
    }
    Ok(out)
}

/// The index of the `}` closing the label set `s` starts with (quoted values may hold `}`).
fn label_set_end(s: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// The names of `a="x",b="y"` (values may hold escaped quotes, commas and braces).
fn label_names(set: &str) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut chars = set.chars().peekable();
    while chars.peek().is_some() {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next() != Some('"') || name.trim().is_empty() {
            return None;
        }
        let mut escaped = false;
        loop {
            match chars.next()? {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => break,
                _ => {}
            }
        }
        names.push(name.trim().to_owned());
        match chars.next() {
            None | Some(',') => {}
            Some(_) => return None,
        }
    }
    Some(names)
}

/// The readings a program's view would give: a policy in force from the ConfigMap.
fn view_readings() -> Readings {
    Readings {
        mode: Box::new(|| Some(Mode::Enforce)),
        origin: Box::new(|| "configmap"),
        config_map_state: Box::new(|| "valid"),
    }
}

/// The cluster view's metrics, as both programs register them, with a version read.
fn register_view(exposition: &Exposition) {
    let version = ClusterVersion::default();
    if let Some(v) = KubernetesVersion::parse("1", "37", "v1.37.0") {
        version.set(v);
    }
    register(exposition, &version, view_readings());
}

/// The names registered in a program's registry, read from its `Debug` form (`{:?}` of the
/// program's `Metrics`: prometheus_client's `Registry` offers no other way to list them), without
/// the `resize_guard` prefix; collectors' metrics are not among them.
fn registered(debug: &str) -> Vec<String> {
    const NEEDLE: &str = "Descriptor { name: \"";
    let mut out = Vec::new();
    let mut rest = debug;
    while let Some(at) = rest.find(NEEDLE) {
        rest = &rest[at + NEEDLE.len()..];
        let end = rest.find('"').unwrap_or(rest.len());
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

/// A program's `/metrics` and its registered names ([`registered`]).
struct Scrape {
    text: String,
    registered: Vec<String>,
}

/// The webhook's `/metrics`, one series of each labelled family recorded.
fn webhook() -> Scrape {
    let m = resize_guard_webhook::metrics::Metrics::new();
    register_view(m.exposition());
    m.review("validate", "fits", true, 0.001);
    m.refusal("shed", Some("regular"));
    m.connection_refused("limit");
    m.connection_closed_by("idle");
    m.usage_lookup("ok", 0.001);
    m.policy_reload(true);
    m.cert_reload(true);
    m.cert_expiry(UNIX_EPOCH + Duration::from_secs(1));
    m.watch_error("pods");
    Scrape {
        text: m.render(),
        registered: registered(&format!("{m:?}")),
    }
}

/// The controller's `/metrics`, one series of each labelled family recorded.
fn controller() -> Scrape {
    let m = resize_guard_controller::metrics::Metrics::new();
    register_view(m.exposition());
    let _probe = resize_guard_controller::admission_probe::findings::Findings::new(
        "resize-guard/probe",
        m.exposition(),
    );
    m.preemption("started");
    m.certificate_repair("ca");
    m.certificate_error("read");
    m.certificate_expiry("serving", UNIX_EPOCH + Duration::from_secs(1));
    m.watch_error("pods");
    m.task_exited("the reconcile loop");
    m.brakes_state_load("restored");
    m.brakes_state_write("ok");
    Scrape {
        text: m.render(),
        registered: registered(&format!("{m:?}")),
    }
}

/// A program's families, refusing a registered metric missing from the exposition or one
/// without a series (its labels would be unknown), and a run that could not read `/proc` (the
/// `process_*` families would be missing).
fn families(program: &str, scrape: &Scrape) -> Result<Vec<Family>, String> {
    let families = parse(&scrape.text).map_err(|e| format!("{program}'s /metrics: {e}"))?;
    if scrape.registered.is_empty() {
        return Err(format!(
            "no registered metric of {program} found in its registry's Debug form (did \
             prometheus_client change it?): docs/tool/src/metrics.rs `registered`"
        ));
    }
    let served = |name: &str| {
        let full = format!("resize_guard_{name}");
        families
            .iter()
            .any(|f| f.name == full || f.name == format!("{full}_total"))
    };
    let mut empty: Vec<String> = scrape
        .registered
        .iter()
        .filter(|name| !served(name))
        .map(|name| format!("resize_guard_{name}"))
        .collect();
    empty.extend(
        families
            .iter()
            .filter(|f| f.series == 0)
            .map(|f| f.name.clone()),
    );
    if !empty.is_empty() {
        return Err(format!(
            "{program}'s metrics {} have no series, so /metrics leaves them out and their labels \
             are unknown: record one of each in docs/tool/src/metrics.rs",
            empty.join(", ")
        ));
    }
    let proc_errors = families
        .iter()
        .find(|f| f.name == "resize_guard_process_metrics_errors_total")
        .and_then(|f| f.first_value.as_deref());
    if proc_errors != Some("0") {
        return Err(format!(
            "{program}'s process_* metrics could not be read from /proc here \
             (resize_guard_process_metrics_errors_total {}): generate the reference on Linux",
            proc_errors.unwrap_or("missing")
        ));
    }
    Ok(families)
}

/// Where a family is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    Both,
    Webhook,
    Controller,
}

/// The metrics reference page.
pub fn page() -> Result<String, String> {
    let webhook = families("resize-guard-webhook", &webhook())?;
    let controller = families("resize-guard-controller", &controller())?;
    let mut rows: Vec<(Served, &Family)> = Vec::new();
    for f in &webhook {
        let same = controller.iter().any(|c| same_metric(c, f));
        rows.push((if same { Served::Both } else { Served::Webhook }, f));
    }
    for f in &controller {
        if !webhook.iter().any(|w| same_metric(w, f)) {
            rows.push((Served::Controller, f));
        }
    }
    let mut out = crate::pages::header(
        "the programs' metric registries (webhook/src/metrics.rs, controller/src/metrics.rs, \
         runtime/src/, cluster/src/exposition.rs)",
    );
    out.push_str(
        "# Metrics\n\n\
         Both programs serve OpenMetrics text on `/metrics` (the `metrics` port). Counters are \
         listed by the sample name a query uses (`…_total`); histograms have `_bucket` (label \
         `le`), `_sum` and `_count` series. A metric with labels appears once it has its first \
         series.\n",
    );
    for (served, title) in [
        (Served::Both, "Both programs"),
        (Served::Webhook, "Webhook only (`resize-guard-webhook`)"),
        (
            Served::Controller,
            "Controller only (`resize-guard-controller`)",
        ),
    ] {
        out.push_str(&format!("\n## {title}\n\n"));
        let body: Vec<Vec<String>> = rows
            .iter()
            .filter(|(s, _)| *s == served)
            .map(|(_, f)| {
                vec![
                    format!("`{}`", f.name),
                    f.kind.clone(),
                    if f.labels.is_empty() {
                        "—".to_owned()
                    } else {
                        f.labels
                            .iter()
                            .map(|l| format!("`{l}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                    f.help.clone(),
                ]
            })
            .collect();
        out.push_str(&table::render(&["Metric", "Type", "Labels", "Help"], &body));
    }
    Ok(out)
}

/// One metric in both programs: same name, type, labels and help (values differ).
fn same_metric(a: &Family, b: &Family) -> bool {
    a.name == b.name && a.kind == b.kind && a.labels == b.labels && a.help == b.help
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_families_types_help_and_label_names() {
        let text = "# HELP resize_guard_things Things, by \\\"kind\\\".\n\
                    # TYPE resize_guard_things counter\n\
                    resize_guard_things_total{kind=\"a,b}\",lane=\"x\\\"y\"} 1\n\
                    resize_guard_things_total{kind=\"c\",lane=\"z\",extra=\"\"} 2\n\
                    # HELP resize_guard_wait_seconds Waits.\n\
                    # TYPE resize_guard_wait_seconds histogram\n\
                    resize_guard_wait_seconds_sum 0.5\n\
                    resize_guard_wait_seconds_count 1\n\
                    resize_guard_wait_seconds_bucket{le=\"0.1\"} 0\n\
                    # HELP resize_guard_empty Nothing yet.\n\
                    # TYPE resize_guard_empty gauge\n\
                    # EOF\n";
        let got = parse(text).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].name, "resize_guard_things_total");
        assert_eq!(got[0].help, "Things, by \"kind\".");
        assert_eq!(got[0].labels, ["kind", "lane", "extra"]);
        assert_eq!(got[0].series, 2);
        assert_eq!(got[1].kind, "histogram");
        assert!(got[1].labels.is_empty(), "{:?}", got[1].labels);
        assert_eq!(got[2].series, 0);
    }

    #[test]
    fn a_registered_metric_without_a_series_or_a_stray_sample_is_an_error() {
        let text = "# HELP resize_guard_process_metrics_errors E.\n\
                    # TYPE resize_guard_process_metrics_errors counter\n\
                    resize_guard_process_metrics_errors_total 0\n\
                    # HELP resize_guard_things Things.\n# TYPE resize_guard_things counter\n\
                    resize_guard_things_total 1\n\
                    # HELP resize_guard_empty Collected.\n# TYPE resize_guard_empty gauge\n# EOF\n";
        let scrape = |registered: &[&str]| Scrape {
            text: text.to_owned(),
            registered: registered.iter().map(|s| (*s).to_owned()).collect(),
        };
        let e = families("resize-guard-webhook", &scrape(&["things", "reloads"])).unwrap_err();
        assert!(
            e.contains("metrics resize_guard_reloads, resize_guard_empty have no series"),
            "{e}"
        );
        let e = families("resize-guard-webhook", &scrape(&[])).unwrap_err();
        assert!(e.contains("no registered metric"), "{e}");
        assert!(parse("other_metric 1\n").is_err());
        assert!(parse("# HELP a A.\n# TYPE a gauge\nb 1\n").is_err());
    }

    #[test]
    fn registered_names_are_read_from_the_registry() {
        let m = resize_guard_webhook::metrics::Metrics::new();
        let names = registered(&format!("{m:?}"));
        for name in [
            "build_info",
            "admission_reviews",
            "usage_lookup_duration_seconds",
        ] {
            assert!(
                names.iter().any(|n| n == name),
                "{name} missing from {names:?}"
            );
        }
    }

    #[test]
    fn both_programs_serve_the_shared_families_and_their_own() {
        let page = page().unwrap();
        for line in [
            "| `resize_guard_build_info` | gauge | `version`, `revision`, `program` |",
            "| `process_cpu_seconds_total` | counter | — |",
            "| `resize_guard_admission_reviews_total` | counter | `webhook`, `decision`, `allowed` |",
            "| `resize_guard_preemptions_total` | counter | `outcome` |",
            "| `resize_guard_admission_probe_total` | counter | `result` |",
            "| `resize_guard_kubernetes_info` | gauge | `git_version`, `minor`, `support` |",
        ] {
            assert!(page.contains(line), "{line} missing from\n{page}");
        }
    }
}
