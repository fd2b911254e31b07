//! `resize-guard-docs`: writes the book's reference pages from the code and checks the docs.
//!
//! ```text
//! resize-guard-docs generate [--root DIR]   write docs/src/reference/{policy,metrics,events}.md
//! resize-guard-docs check [--root DIR]      fail when a committed page differs from what the
//!                                           code generates, or when a link is dead
//! ```
//!
//! The pages come from the code itself: the policy keys from the policy types and their key
//! table (`shared/src/policy/keys.rs`), the metrics from each program's registry built as the
//! program builds it ([`metrics`]), the Events from the one reason enum
//! (`shared/src/event_reason.rs`). The link checker ([`links`]) resolves every relative link and
//! `#anchor` of the project's Markdown; `http(s)` links are not fetched (it runs offline). The
//! same check runs as a unit test of this crate, so `cargo test --workspace` catches a stale
//! page or a dead link with nothing installed. `DIR` defaults to the repository this tool was
//! built from.

mod events;
mod links;
mod markdown;
mod metrics;
mod pages;
mod policy;
mod table;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: resize-guard-docs generate|check [--root DIR]";

/// The repository this tool was built from.
fn default_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every problem `check` reports: stale pages, then dead links.
fn problems(root: &Path) -> Result<Vec<String>, String> {
    let pages = pages::all()?;
    let mut out = pages::stale(root, &pages);
    out.extend(links::check(root)?.iter().map(ToString::to_string));
    Ok(out)
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let (command, root) = match args {
        [command] => (command.as_str(), default_root()),
        [command, flag, dir] if flag == "--root" => (command.as_str(), PathBuf::from(dir)),
        _ => return Err(USAGE.to_owned()),
    };
    match command {
        "generate" => {
            let pages = pages::all()?;
            pages::write(&root, &pages)?;
            for page in &pages {
                println!("wrote {}", page.path);
            }
            Ok(ExitCode::SUCCESS)
        }
        "check" => {
            let problems = problems(&root)?;
            for p in &problems {
                eprintln!("{p}");
            }
            if problems.is_empty() {
                println!("docs check: the reference pages match the code; every link resolves");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("docs check: {} problem(s)", problems.len());
                Ok(ExitCode::FAILURE)
            }
        }
        _ => Err(USAGE.to_owned()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    run(&args).unwrap_or_else(|e| {
        eprintln!("resize-guard-docs: {e}");
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_docs_match_the_code_and_every_link_resolves() {
        let problems = problems(&default_root()).unwrap();
        assert!(
            problems.is_empty(),
            "{}\n(run `make docs` to regenerate the reference pages)",
            problems.join("\n")
        );
        // The same through the command `make docs-check` once ran and a person may still run.
        assert_eq!(run(&["check".to_owned()]).unwrap(), ExitCode::SUCCESS);
    }

    #[test]
    fn bad_arguments_are_refused_with_the_usage() {
        let cases: [Vec<String>; 3] = [
            vec![],
            vec!["publish".into()],
            vec!["check".into(), "--rot".into(), "x".into()],
        ];
        for args in &cases {
            assert_eq!(run(args).unwrap_err(), USAGE, "{args:?}");
        }
    }
}
