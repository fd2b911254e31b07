//! `resize-guard-bench-report [--readme README.md]`: prints every benchmark goal from
//! `target/bench/*.json` beside its figure as a table, and with `--readme` writes that table
//! between the README's goals markers (`resize_guard_lab::bench_report`).

use anyhow::Context;
use resize_guard_harness::bench::summary_dir;
use resize_guard_lab::bench_report;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let readme = match args.as_slice() {
        [] => None,
        [flag, path] if flag == "--readme" => Some(path.clone()),
        _ => anyhow::bail!("usage: resize-guard-bench-report [--readme README.md]"),
    };
    let rows = bench_report::rows(&summary_dir())?;
    let table = bench_report::table(&rows);
    print!("{table}");
    if let Some(path) = readme {
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let updated = bench_report::replace(&text, &table)?;
        std::fs::write(&path, updated).with_context(|| format!("writing {path}"))?;
        println!("{} goals written to {path}", rows.len());
    }
    Ok(())
}
