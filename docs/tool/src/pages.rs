//! The generated reference pages: where each lives, writing them, and comparing them with what
//! is committed.

use std::path::Path;

/// The command that regenerates the pages.
pub const REGENERATE: &str = "make docs";

/// The first lines of a generated page made from `source`.
pub fn header(source: &str) -> String {
    format!(
        "<!-- Generated from {source} by `{REGENERATE}` (cargo run -p resize-guard-docs -- \
         generate); do not edit: `make docs-check` fails when it differs from the code. -->\n\n"
    )
}

/// A generated page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Its path, relative to the repository root.
    pub path: &'static str,
    /// Its text.
    pub text: String,
}

/// Every generated page, made from the code.
pub fn all() -> Result<Vec<Page>, String> {
    Ok(vec![
        Page {
            path: "docs/src/reference/policy.md",
            text: crate::policy::page()?,
        },
        Page {
            path: "docs/src/reference/metrics.md",
            text: crate::metrics::page()?,
        },
        Page {
            path: "docs/src/reference/events.md",
            text: crate::events::page(),
        },
    ])
}

/// Writes `pages` under `root`.
pub fn write(root: &Path, pages: &[Page]) -> Result<(), String> {
    for page in pages {
        let path = root.join(page.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        std::fs::write(&path, &page.text)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

/// How many differing lines a stale page lists.
const SHOWN: usize = 20;

/// Each page whose committed copy under `root` differs from `pages`, with the lines that
/// differ (`-` committed only, `+` generated only).
pub fn stale(root: &Path, pages: &[Page]) -> Vec<String> {
    let mut out = Vec::new();
    for page in pages {
        let committed = match std::fs::read_to_string(root.join(page.path)) {
            Ok(text) => text,
            Err(e) => {
                out.push(format!(
                    "{}: cannot read it ({e}); run `{REGENERATE}`",
                    page.path
                ));
                continue;
            }
        };
        if committed == page.text {
            continue;
        }
        let mut lines = vec![format!(
            "{} differs from what the code generates; run `{REGENERATE}` and commit it:",
            page.path
        )];
        let (old, new): (Vec<&str>, Vec<&str>) =
            (committed.lines().collect(), page.text.lines().collect());
        let mut diff = line_diff(&old, &new);
        if diff.is_empty() {
            diff.push("  (the same lines, with other line endings)".to_owned());
        }
        let more = diff.len().saturating_sub(SHOWN);
        lines.extend(diff.into_iter().take(SHOWN));
        if more > 0 {
            lines.push(format!("  … and {more} more lines"));
        }
        out.push(lines.join("\n"));
    }
    out
}

/// The lines of `old` not in `new` (`-`, with their line in `old`) and of `new` not in `old`
/// (`+`, with their line in `new`), by a longest common subsequence of the lines.
fn line_diff(old: &[&str], new: &[&str]) -> Vec<String> {
    // common[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] = if old[i] == new[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            i += 1;
            j += 1;
        } else if j < new.len() && (i == old.len() || common[i][j + 1] >= common[i + 1][j]) {
            out.push(format!("  + {}: {}", j + 1, new[j]));
            j += 1;
        } else {
            out.push(format!("  - {}: {}", i + 1, old[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pages written into a scratch root, one of them then edited by `edit`.
    fn stale_after(path: &str, edit: impl Fn(&str) -> String) -> Vec<String> {
        let pages = all().unwrap();
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &pages).unwrap();
        assert!(stale(dir.path(), &pages).is_empty());
        let file = dir.path().join(path);
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, edit(&text)).unwrap();
        stale(dir.path(), &pages)
    }

    fn without_line(text: &str, containing: &str) -> String {
        assert!(text.contains(containing), "{containing}");
        text.lines()
            .filter(|l| !l.contains(containing))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    #[test]
    fn a_stale_policy_key_metric_or_event_reason_is_reported() {
        for (path, line) in [
            (
                "docs/src/reference/policy.md",
                "`preemption.maxVictimsPerResize`",
            ),
            (
                "docs/src/reference/metrics.md",
                "`resize_guard_admission_reviews_total`",
            ),
            ("docs/src/reference/events.md", "`PreemptionStalled`"),
        ] {
            let problems = stale_after(path, |t| without_line(t, line));
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(problems[0].starts_with(path), "{}", problems[0]);
            assert!(
                problems[0].contains("  + ") && problems[0].contains(&format!(": | {line}")),
                "{}",
                problems[0]
            );
        }
        // A row the code no longer has, and lines moved.
        let problems = stale_after("docs/src/reference/events.md", |t| {
            let mut lines: Vec<&str> = t.lines().collect();
            let last = lines.len() - 1;
            lines.swap(last - 1, last);
            lines.iter().map(|l| format!("{l}\n")).collect()
        });
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(!problems[0].contains("other line endings"), "{problems:?}");
        let problems = stale_after("docs/src/reference/events.md", |t| {
            format!("{t}| `ResizeTeleported` | Normal | the pod | webhook | Gone. |\n")
        });
        assert!(
            problems[0].contains("  - ") && problems[0].contains(": | `ResizeTeleported`"),
            "{problems:?}"
        );
    }

    #[test]
    fn each_page_starts_with_how_to_regenerate_it() {
        for page in all().unwrap() {
            let first = page.text.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("<!-- Generated from") && first.contains(REGENERATE),
                "{}: {first}",
                page.path
            );
        }
    }
}
