//! `resize-guard-bench-report [--readme README.md]`: prints the benchmarks' goals beside their
//! figures and their results table from `target/bench/*.json`, and with `--readme` writes both
//! between the README's markers (`resize_guard_lab::bench_report`).

use anyhow::Context;
use resize_guard_bench::summary_dir;
use resize_guard_lab::bench_report;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let readme = match args.as_slice() {
        [] => None,
        [flag, path] if flag == "--readme" => Some(path.clone()),
        _ => anyhow::bail!("usage: resize-guard-bench-report [--readme README.md]"),
    };
    let summaries = bench_report::summaries(&summary_dir())?;
    let rows = bench_report::rows(&summaries);
    let goals = bench_report::table(&rows);
    let results = bench_report::results(&summaries);
    print!("{goals}\n{results}");
    if let Some(path) = readme {
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let updated = bench_report::replace(&text, &goals)?;
        let updated = bench_report::replace_between(
            &updated,
            bench_report::RESULTS_BEGIN,
            bench_report::RESULTS_END,
            &results,
        )?;
        std::fs::write(&path, updated).with_context(|| format!("writing {path}"))?;
        println!(
            "{} goals and {} summaries' results written to {path}",
            rows.len(),
            summaries.len()
        );
    }
    Ok(())
}
