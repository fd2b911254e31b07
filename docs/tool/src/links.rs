//! The link checker: every relative link and `#anchor` of the project's Markdown must resolve.
//!
//! Checked documents: `README.md`, `ARCHITECTURE.md`, `CHANGELOG.md`, every `.md` under `docs/`
//! and `charts/`, every `README.md` under `third_party/` and `tests/`, and `fuzz/README.md`. A
//! link's file must exist (relative to the document, or to the repository root when it starts
//! with `/`); an anchor into a Markdown file (or the document itself) must be one of its
//! anchors ([`crate::markdown::anchors`]). Links with a scheme (`https:`, `mailto:`, …) are not
//! fetched: the checker runs offline, in CI and in `cargo test`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::markdown;

/// A link that does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeadLink {
    /// The document, relative to the root.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// The link as written.
    pub dest: String,
    /// Why it is dead.
    pub why: String,
}

impl fmt::Display for DeadLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: dead link `{}`: {}",
            self.file.display(),
            self.line,
            self.dest,
            self.why
        )
    }
}

/// Directories never walked.
const SKIPPED_DIRS: [&str; 2] = ["target", "node_modules"];

/// The documents checked, relative to `root`, sorted.
pub fn documents(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = BTreeSet::new();
    for top in [
        "README.md",
        "ARCHITECTURE.md",
        "CHANGELOG.md",
        "fuzz/README.md",
    ] {
        if root.join(top).is_file() {
            out.insert(PathBuf::from(top));
        }
    }
    for (dir, only_readme) in [
        ("docs", false),
        ("charts", false),
        ("third_party", true),
        ("tests", true),
    ] {
        walk(root, Path::new(dir), only_readme, &mut out)?;
    }
    Ok(out.into_iter().collect())
}

fn walk(
    root: &Path,
    dir: &Path,
    only_readme: bool,
    out: &mut BTreeSet<PathBuf>,
) -> Result<(), String> {
    let full = root.join(dir);
    if !full.is_dir() {
        return Ok(());
    }
    let entries =
        std::fs::read_dir(&full).map_err(|e| format!("reading {}: {e}", full.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading {}: {e}", full.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let rel = dir.join(name.as_ref());
        let kind = entry
            .file_type()
            .map_err(|e| format!("reading {}: {e}", rel.display()))?;
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                walk(root, &rel, only_readme, out)?;
            }
        } else {
            let wanted = if only_readme {
                name == "README.md"
            } else {
                name.ends_with(".md")
            };
            if wanted {
                out.insert(rel);
            }
        }
    }
    Ok(())
}

/// True when `dest` names a scheme (`https:`, `mailto:`): not checked.
fn external(dest: &str) -> bool {
    let scheme: String = dest.chars().take_while(|c| *c != ':').collect();
    scheme.len() < dest.len()
        && !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `%XX` escapes decoded (a link to `a%20b.md` names `a b.md`).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `base/rel` with `.` and `..` resolved lexically; `None` when it climbs above `base`'s root.
fn joined(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in base.join(rel).components() {
        match part {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// The checker, with each target's anchors read once.
struct Checker<'a> {
    root: &'a Path,
    anchors: HashMap<PathBuf, Result<HashSet<String>, String>>,
}

impl Checker<'_> {
    fn anchors_of(&mut self, rel: &Path) -> &Result<HashSet<String>, String> {
        let root = self.root;
        self.anchors.entry(rel.to_owned()).or_insert_with(|| {
            std::fs::read_to_string(root.join(rel))
                .map(|text| markdown::anchors(&text))
                .map_err(|e| format!("cannot read it: {e}"))
        })
    }

    /// Why `dest`, written in document `doc`, is dead; `None` when it resolves.
    fn dead(&mut self, doc: &Path, dest: &str) -> Option<String> {
        if external(dest) {
            return None;
        }
        let (path, anchor) = match dest.split_once('#') {
            Some((p, a)) => (p, Some(percent_decoded(a))),
            None => (dest, None),
        };
        let path = percent_decoded(path.split('?').next().unwrap_or(path));
        let target = if path.is_empty() {
            Some(doc.to_owned())
        } else if let Some(from_root) = path.strip_prefix('/') {
            joined(Path::new(""), from_root)
        } else {
            joined(doc.parent().unwrap_or(Path::new("")), &path)
        };
        let Some(target) = target else {
            return Some("it climbs out of the repository".to_owned());
        };
        let full = self.root.join(&target);
        if !full.exists() {
            return Some(format!("{} does not exist", target.display()));
        }
        let anchor = anchor.filter(|a| !a.is_empty())?;
        if full.is_dir() || target.extension().is_none_or(|e| e != "md") {
            return None;
        }
        match self.anchors_of(&target) {
            Ok(anchors) if anchors.contains(&anchor) => None,
            Ok(_) => Some(format!(
                "{} has no heading or id with anchor #{anchor}",
                target.display()
            )),
            Err(e) => Some(format!("{}: {e}", target.display())),
        }
    }
}

/// Every dead link of the documents under `root` ([`documents`]), in file and line order.
pub fn check(root: &Path) -> Result<Vec<DeadLink>, String> {
    let mut checker = Checker {
        root,
        anchors: HashMap::new(),
    };
    let mut out = Vec::new();
    for doc in documents(root)? {
        let text = std::fs::read_to_string(root.join(&doc))
            .map_err(|e| format!("reading {}: {e}", doc.display()))?;
        for link in markdown::links(&text) {
            if let Some(why) = checker.dead(&doc, &link.dest) {
                out.push(DeadLink {
                    file: doc.clone(),
                    line: link.line,
                    dest: link.dest,
                    why,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn schemes_are_external_and_paths_are_not() {
        for (dest, want) in [
            ("https://example.invalid/x", true),
            ("http://example.invalid", true),
            ("mailto:someone@example.invalid", true),
            ("docs/src/SUMMARY.md", false),
            ("#anchor", false),
            ("a.md#b:c", false),
            ("../x.md", false),
            ("1:2", false),
        ] {
            assert_eq!(external(dest), want, "{dest}");
        }
    }

    #[test]
    fn each_kind_of_dead_link_is_reported_and_live_ones_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "README.md",
            "# Project\n\n## Install steps\n\n\
             [ok](docs/guide.md) [ok](docs/guide.md#usage) [ok](#install-steps) [ok](charts/)\n\
             [ok](a%20b.md) [ok](/docs/guide.md) [web](https://example.invalid/gone)\n\
             [dead file](docs/missing.md)\n\
             [dead anchor](docs/guide.md#no-such-part)\n\
             [dead self](#nowhere)\n\
             [climbs](../../outside.md)\n",
        );
        write(root, "a b.md", "# Spaced\n");
        write(
            root,
            "charts/x/README.md",
            "[up](../../README.md#project)\n",
        );
        write(
            root,
            "docs/guide.md",
            "# Guide\n\n## Usage\n\n[back](../README.md#install-steps)\n",
        );
        // Not checked: only READMEs under tests/ and third_party/.
        write(root, "tests/notes.md", "[dead](nowhere.md)\n");
        write(root, "tests/e2e/README.md", "[dead](nowhere.md)\n");
        let dead = check(root).unwrap();
        let got: Vec<(String, usize, &str)> = dead
            .iter()
            .map(|d| (d.file.display().to_string(), d.line, d.dest.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("README.md".to_owned(), 7, "docs/missing.md"),
                ("README.md".to_owned(), 8, "docs/guide.md#no-such-part"),
                ("README.md".to_owned(), 9, "#nowhere"),
                ("README.md".to_owned(), 10, "../../outside.md"),
                ("tests/e2e/README.md".to_owned(), 1, "nowhere.md"),
            ],
            "{dead:#?}"
        );
        assert!(
            dead[1]
                .to_string()
                .contains("no heading or id with anchor #no-such-part")
        );
    }
}
