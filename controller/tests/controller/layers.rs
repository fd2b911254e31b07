//! The controller's import graph, drawn from its source: every `crate::…` path in code (comments
//! and test modules aside) is an arrow from the module it is written in to the module it names,
//! and every arrow points down the layers `controller/src/lib.rs` lists. A module the table
//! does not know fails the test, so a new module is placed in a layer before it is used.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, top to bottom; a module belongs to the longest entry its path starts with.
const LAYERS: &[&[&str]] = &[
    &["main", "lib"],
    &["run"],
    &["leading"],
    &["args"],
    &["preemption::reconcile"],
    &[
        "preemption::actuator",
        "certificates",
        "last_good",
        "admission_probe",
    ],
    &["preemption::decision"],
    &["preemption::brakes", "preemption::outcome"],
    &["preemption::seal"],
    &["preemption::write"],
    &["lease", "metrics"],
    // Module files that only declare their children.
    &["preemption"],
];

/// The unit (a [`LAYERS`] entry) and layer of the module at `path` (`a::b::c`).
fn unit(path: &str) -> Option<(&'static str, usize)> {
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, units)| units.iter().map(move |u| (*u, layer)))
        .filter(|(u, _)| path == *u || path.starts_with(&format!("{u}::")))
        .max_by_key(|(u, _)| u.len())
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of the file at `rel` (`preemption/actuator/preempt.rs` →
/// `preemption::actuator::preempt`); `None` for test files.
fn module_of(rel: &Path) -> Option<String> {
    let parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.iter().any(|p| p == "tests") {
        return None;
    }
    Some(parts.join("::"))
}

/// The code of `text` before its inline test module, without comments.
fn code(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut test_attr = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if test_attr && trimmed.starts_with("mod tests") {
            break;
        }
        test_attr = trimmed == "#[cfg(test)]";
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        lines.push(code.to_owned());
    }
    lines
}

/// The modules `crate::…` paths in `lines` name (the segments before the first item name, an
/// upper-case one or the end of the path), each once.
fn named(lines: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lines {
        let mut rest = line.as_str();
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                // `other_crate::` is not this crate.
                continue;
            }
            let mut segments = Vec::new();
            for seg in rest.split("::") {
                let word: String = seg
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if word.is_empty() || word.chars().next().is_some_and(char::is_uppercase) {
                    break;
                }
                segments.push(word.clone());
                if word.len() != seg.len() {
                    break;
                }
            }
            if !segments.is_empty() {
                out.insert(segments.join("::"));
            }
        }
    }
    out
}

#[test]
fn no_import_of_the_controller_points_back_up_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut edges = BTreeSet::new();
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let Some(from) = module_of(rel) else {
            continue;
        };
        let Some((from_unit, from_layer)) = unit(&from) else {
            wrong.push(format!("{from}: in no layer of LAYERS"));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for to in named(&code(&text)) {
            let Some((to_unit, to_layer)) = unit(&to) else {
                wrong.push(format!("{from} → {to}: {to} is in no layer of LAYERS"));
                continue;
            };
            if to_unit == from_unit {
                continue;
            }
            edges.insert(format!("{from_unit} → {to_unit}"));
            if to_layer <= from_layer {
                wrong.push(format!(
                    "{from} → {to}: layer {to_layer} ({to_unit}) is not below layer {from_layer} ({from_unit})"
                ));
            }
        }
    }
    println!("{}", edges.iter().cloned().collect::<Vec<_>>().join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The check saw the graph: the loop's arrows are there.
    for edge in [
        "preemption::reconcile → preemption::actuator",
        "preemption::reconcile → preemption::decision",
        "preemption::reconcile → preemption::brakes",
        "preemption::actuator → preemption::outcome",
        "preemption::decision → preemption::outcome",
        "leading → preemption::reconcile",
    ] {
        assert!(edges.contains(edge), "no {edge} in\n{edges:#?}");
    }
}
