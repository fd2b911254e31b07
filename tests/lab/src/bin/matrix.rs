//! `make test-matrix`'s last step: prints the version-sensitive suite's results as a table
//! (behaviour × minor) and writes it into the README's "Supported versions" section.
//! Exits 1 when a minor has no results or any behaviour failed.

use std::path::PathBuf;

use clap::Parser;
use resize_guard_lab::matrix;

/// Collates `make test-matrix`'s results.
#[derive(Debug, Parser)]
struct Args {
    /// Where the suite wrote v1.N.json.
    #[arg(long)]
    dir: PathBuf,
    /// The minors, e.g. "1.33 1.34 1.35 1.36 1.37".
    #[arg(long)]
    minors: String,
    /// The README to update (between its test-matrix markers).
    #[arg(long)]
    readme: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let minors = args
        .minors
        .split_whitespace()
        .map(|m| {
            resize_guard_harness::binaries::parse_minor(m)
                .ok_or_else(|| anyhow::anyhow!("--minors: {m} is not a minor such as 1.35"))
        })
        .collect::<anyhow::Result<Vec<u32>>>()?;
    let results = matrix::load(&args.dir, &minors);
    let table = matrix::table(&results);
    println!("\n{table}");
    if let Some(readme) = &args.readme {
        let text = std::fs::read_to_string(readme)?;
        std::fs::write(readme, matrix::splice(&text, &table)?)?;
        println!("(written to {})", readme.display());
    }
    if !matrix::all_passed(&results) {
        eprintln!(
            "test-matrix: failures above; each minor's log is {}/v1.N.log",
            args.dir.display()
        );
        std::process::exit(1);
    }
    Ok(())
}
