//! The README's two benchmark tables, built from the benchmarks' summaries, so that no figure in
//! them is copied by hand. `make bench-report` runs it.
//!
//! - Goals: every `goals` array in `target/bench/*.json` (written by
//!   `resize_guard_bench::report_goals`) becomes a row — the goal, the figure beside it,
//!   whether it is met, and the summary it came from — between the README's
//!   `<!-- goals:begin -->` and `<!-- goals:end -->` markers.
//! - Results: every `rows` array (`resize_guard_bench::Row`: what ran, the command
//!   that reproduces it, this run's figures), summaries in [`ORDER`], between
//!   `<!-- results:begin -->` and `<!-- results:end -->`; a benchmark of [`ORDER`] with no
//!   summary is named under the table with the command that writes it.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;

/// The marker lines the goals table is written between.
pub const BEGIN: &str = "<!-- goals:begin -->";
/// See [`BEGIN`].
pub const END: &str = "<!-- goals:end -->";
/// The marker lines the results table is written between.
pub const RESULTS_BEGIN: &str = "<!-- results:begin -->";
/// See [`RESULTS_BEGIN`].
pub const RESULTS_END: &str = "<!-- results:end -->";

/// The summaries whose rows make the results table, in its order, each with the command that
/// writes it.
pub const ORDER: &[(&str, &str)] = &[
    (
        "policy",
        "cargo bench -p resize-guard-policy --bench decision",
    ),
    (
        "victims",
        "cargo bench -p resize-guard-policy --bench victims",
    ),
    (
        "webhook",
        "cargo bench -p resize-guard-webhook --bench admission",
    ),
    ("preemption_victims", "make bench"),
    ("preemption_latency", "make bench"),
    ("scale", "cargo bench -p resize-guard-lab --bench scale"),
    ("scale_apiserver", "make bench-scale STEPS=30000"),
    (
        "scale_apiserver_paged",
        "RESIZE_GUARD_INITIAL_LIST=paged make bench-scale STEPS=30000",
    ),
    ("resize_latency", "make bench"),
    ("upstream_preemption", "make upstream-e2e"),
];

/// One goal of one summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The summary's name (`scale` for `target/bench/scale.json`).
    pub bench: String,
    /// The goal as the summary states it.
    pub goal: Value,
}

/// Every `*.json` summary in `dir` by name (`scale` for `scale.json`), in name order.
pub fn summaries(dir: &Path) -> anyhow::Result<Vec<(String, Value)>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut out = vec![];
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let summary: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let bench = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push((bench, summary));
    }
    Ok(out)
}

/// Every goal of every summary, summaries in name order.
pub fn rows(summaries: &[(String, Value)]) -> Vec<Row> {
    let mut rows = vec![];
    for (bench, summary) in summaries {
        for goal in summary["goals"].as_array().into_iter().flatten() {
            rows.push(Row {
                bench: bench.clone(),
                goal: goal.clone(),
            });
        }
    }
    rows
}

/// The results table: the `rows` of the summaries in [`ORDER`], then those of any other
/// summary in name order, and a line naming each summary of [`ORDER`] that is missing.
pub fn results(summaries: &[(String, Value)]) -> String {
    let rank = |name: &str| {
        ORDER
            .iter()
            .position(|(n, _)| *n == name)
            .unwrap_or(ORDER.len())
    };
    let mut ordered: Vec<&(String, Value)> = summaries.iter().collect();
    ordered.sort_by_key(|(name, _)| rank(name));
    let cell = |v: &Value| v.as_str().unwrap_or_default().replace('|', "\\|");
    let mut out = String::from("| what | command | p50 | p99 | other |\n|---|---|---|---|---|\n");
    for (_, summary) in ordered {
        for row in summary["rows"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                cell(&row["what"]),
                cell(&row["command"]),
                cell(&row["p50"]),
                cell(&row["p99"]),
                cell(&row["other"]),
            ));
        }
    }
    let missing: Vec<String> = ORDER
        .iter()
        .filter(|(name, _)| !summaries.iter().any(|(n, _)| n == name))
        .map(|(name, command)| format!("`{name}` (`{command}`)"))
        .collect();
    if !missing.is_empty() {
        out.push_str(&format!(
            "\nNot in this report (no summary in `target/bench/`): {}.\n",
            missing.join(", ")
        ));
    }
    out
}

/// The rows as a Markdown table.
pub fn table(rows: &[Row]) -> String {
    let mut out =
        String::from("| goal | target | figure | met | summary |\n|---|---:|---:|---|---|\n");
    for r in rows {
        let g = &r.goal;
        let op = if g["at_least"] == Value::Bool(true) {
            "≥"
        } else {
            "≤"
        };
        let unit = g["unit"].as_str().unwrap_or_default();
        let detail = g["detail"].as_str().filter(|d| !d.is_empty());
        out.push_str(&format!(
            "| {} | {op} {} {unit} | **{} {unit}**{} | {} | `target/bench/{}.json` |\n",
            g["what"].as_str().unwrap_or_default(),
            g["target"],
            g["figure"],
            detail.map(|d| format!(" ({d})")).unwrap_or_default(),
            if g["met"] == Value::Bool(true) {
                "yes"
            } else {
                "**no**"
            },
            r.bench,
        ));
    }
    out
}

/// `readme` with the text between the goals markers replaced by `table`.
pub fn replace(readme: &str, table: &str) -> anyhow::Result<String> {
    replace_between(readme, BEGIN, END, table)
}

/// `readme` with the text between `begin` and `end` replaced by `table`.
pub fn replace_between(
    readme: &str,
    begin: &str,
    end: &str,
    table: &str,
) -> anyhow::Result<String> {
    let (Some(b), Some(e)) = (readme.find(begin), readme.find(end)) else {
        bail!("the README has no {begin} … {end} markers");
    };
    if e < b {
        bail!("the README's {end} comes before its {begin}");
    }
    let start = b + begin.len();
    Ok(format!("{}\n{}{}", &readme[..start], table, &readme[e..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_of_every_summary_become_rows_and_replace_the_marked_table() {
        let dir = tempfile::tempdir().unwrap();
        let goal = serde_json::json!({"what": "review p99", "target": 1000.0, "figure": 412.4,
            "unit": "µs", "at_least": false, "detail": "150000 pods", "met": true});
        std::fs::write(
            dir.path().join("scale.json"),
            serde_json::json!({"goals": [goal]}).to_string(),
        )
        .unwrap();
        std::fs::write(dir.path().join("victims.json"), "{\"runs\": []}").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a summary").unwrap();
        let found = rows(&summaries(dir.path()).unwrap());
        assert_eq!(found.len(), 1);
        let t = table(&found);
        assert!(
            t.contains("| review p99 | ≤ 1000.0 µs | **412.4 µs** (150000 pods) | yes | `target/bench/scale.json` |"),
            "{t}"
        );
        let readme = format!("# x\n\n{BEGIN}\nold table\n{END}\nafter\n");
        let new = replace(&readme, &t).unwrap();
        assert!(new.contains(&format!("{BEGIN}\n| goal |")) && !new.contains("old table"));
        assert!(new.ends_with(&format!("{END}\nafter\n")));
        assert_eq!(replace(&new, &t).unwrap(), new, "idempotent");
        assert!(replace("no markers", &t).is_err());
        std::fs::write(dir.path().join("broken.json"), "{").unwrap();
        assert!(summaries(dir.path()).is_err());
    }

    #[test]
    fn rows_of_the_summaries_make_the_results_table_in_order_naming_what_is_missing() {
        let row = |what: &str| serde_json::json!({"what": what, "command": "make bench", "p50": "1 ms", "p99": "2 ms", "other": "a | b"});
        let summaries = vec![
            (
                "resize_latency".to_owned(),
                serde_json::json!({"rows": [row("latency")]}),
            ),
            (
                "policy".to_owned(),
                serde_json::json!({"rows": [row("classify")]}),
            ),
            (
                "extra".to_owned(),
                serde_json::json!({"rows": [row("something else")]}),
            ),
        ];
        let t = results(&summaries);
        let classify = t
            .find("| classify | make bench | 1 ms | 2 ms | a \\| b |")
            .unwrap();
        let latency = t.find("| latency |").unwrap();
        let extra = t.find("| something else |").unwrap();
        assert!(classify < latency && latency < extra, "{t}");
        assert!(
            t.contains("`webhook` (`cargo bench -p resize-guard-webhook --bench admission`)"),
            "{t}"
        );
        assert!(!t.contains("`policy` ("), "{t}");
        let readme = format!("{BEGIN}\n{END}\n{RESULTS_BEGIN}\nold\n{RESULTS_END}\n");
        let new = replace_between(&readme, RESULTS_BEGIN, RESULTS_END, &t).unwrap();
        assert!(new.contains("| classify |") && !new.contains("old"));
    }
}
