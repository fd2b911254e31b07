//! The README's goals table, built from the benchmarks' summaries: every `goals` array in
//! `target/bench/*.json` (written by `resize_guard_harness::bench::report_goals`) becomes a row
//! — the goal, the figure beside it, whether it is met, and the summary it came from — and
//! replaces what stands between the README's `<!-- goals:begin -->` and `<!-- goals:end -->`
//! markers, so no figure in that table is copied by hand. `make bench-report` runs it.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;

/// The marker lines the table is written between.
pub const BEGIN: &str = "<!-- goals:begin -->";
/// See [`BEGIN`].
pub const END: &str = "<!-- goals:end -->";

/// One goal of one summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The summary's name (`scale` for `target/bench/scale.json`).
    pub bench: String,
    /// The goal as the summary states it.
    pub goal: Value,
}

/// Every goal of every `*.json` summary in `dir`, summaries in name order.
pub fn rows(dir: &Path) -> anyhow::Result<Vec<Row>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut rows = vec![];
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let summary: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let bench = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for goal in summary["goals"].as_array().into_iter().flatten() {
            rows.push(Row {
                bench: bench.clone(),
                goal: goal.clone(),
            });
        }
    }
    Ok(rows)
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

/// `readme` with the text between its markers replaced by `table`.
pub fn replace(readme: &str, table: &str) -> anyhow::Result<String> {
    let (Some(b), Some(e)) = (readme.find(BEGIN), readme.find(END)) else {
        bail!("the README has no {BEGIN} … {END} markers");
    };
    if e < b {
        bail!("the README's {END} comes before its {BEGIN}");
    }
    let start = b + BEGIN.len();
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
        let found = rows(dir.path()).unwrap();
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
        assert!(rows(dir.path()).is_err());
    }
}
