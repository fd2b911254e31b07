//! The wall around `shared/src/upstream/`: the mirrors of upstream Kubernetes import nothing
//! from the rest of the crate but the plain data types they are handed ([`HANDED`]) and, in
//! tests, the fixtures ([`TEST_ONLY`]). Every `.rs` file under `src/upstream/` is read with its
//! comments and literals blanked, every path that starts at `crate::` (or climbs out of the
//! folder with `super::`) is expanded, `use` trees included, and any that leaves
//! `crate::upstream` for something not on those lists fails the test, naming file, line and
//! path. `make deps-check` runs it (`cargo test -p resize-guard-policy --test policy --
//! upstream_wall::`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs;
use std::path::{Path, PathBuf};

/// The plain data types the mirrors are handed, and so may name (with their associated items).
const HANDED: &[&str] = &[
    "crate::resources::ResourceList",
    "crate::resources::Resources",
    "crate::ledger::LedgerEntry",
];

/// Test builders: `fixture` exists only under `cfg(test)` or the `testing` feature
/// (`shared/src/lib.rs`), so product code that named it would not build.
const TEST_ONLY: &str = "crate::fixture";

/// One path out of the room that is not allowed.
#[derive(Debug, PartialEq, Eq)]
struct Breach {
    line: usize,
    path: String,
}

/// The source with comments, string and char literals replaced by spaces (newlines kept, so
/// line numbers still count).
fn blank(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank_to = |out: &mut Vec<u8>, from: usize, to: usize| {
        out.extend(
            b[from..to]
                .iter()
                .map(|&c| if c == b'\n' { b'\n' } else { b' ' }),
        );
    };
    let ident_before = |i: usize| i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            rest.iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p)
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if let Some(len) = raw_string(rest).filter(|_| !ident_before(i)) {
            i + len
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        } else if let Some(len) = char_literal(rest) {
            i + len
        } else {
            out.push(b[i]);
            i += 1;
            continue;
        };
        blank_to(&mut out, i, end);
        i = end;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The length of a char literal at the start of `s` (`'a'`, `'\''`, `'\u{1F600}'`, `'é'`), if
/// one starts there; a lifetime (`'a`) has no closing quote.
fn char_literal(s: &[u8]) -> Option<usize> {
    if s.first() != Some(&b'\'') {
        return None;
    }
    let (from, len) = match s.get(1)? {
        // An escape: the closing quote comes after the escaped character.
        b'\\' => (3, 10),
        // One character: ASCII, or the 2 to 4 bytes of one UTF-8 character.
        c if c.is_ascii() => (2, 1),
        _ => (2, 4),
    };
    let close = s.get(from..)?.iter().take(len).position(|&c| c == b'\'')?;
    if s[1] != b'\\' && !s[1].is_ascii() {
        // A lifetime is ASCII; a closing quote right after one UTF-8 character is a literal.
        return std::str::from_utf8(&s[1..from + close])
            .ok()
            .map(|_| from + close + 1);
    }
    (s[1] == b'\\' || close == 0).then_some(from + close + 1)
}

/// The length of a raw (byte) string literal at the start of `s`, if one starts there.
fn raw_string(s: &[u8]) -> Option<usize> {
    let s_r = s.strip_prefix(b"b").unwrap_or(s);
    let after_r = s_r.strip_prefix(b"r")?;
    let hashes = after_r.iter().take_while(|&&c| c == b'#').count();
    if after_r.get(hashes) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let body = s.len() - after_r.len() + hashes + 1;
    let end = s[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())?;
    Some(body + end + close.len())
}

fn skip_space(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident(s: &[u8], i: usize) -> Option<(&str, usize)> {
    let rest = s.get(i..)?;
    let first = *rest.first()?;
    if first == b'*' {
        return Some(("*", i + 1));
    }
    let len = rest
        .iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_')
        .count();
    (len > 0 && !first.is_ascii_digit())
        .then(|| (std::str::from_utf8(&rest[..len]).unwrap_or(""), i + len))
}

/// Expands the path or `use` tree at `s[i..]` (just after `prefix::`) into full paths; returns
/// where it ends.
fn expand(s: &[u8], i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let i = skip_space(s, i);
    if s.get(i) == Some(&b'{') {
        let mut j = i + 1;
        loop {
            j = skip_space(s, j);
            match s.get(j) {
                None => return j,
                Some(b'}') => return j + 1,
                Some(b',') => j += 1,
                Some(_) => {
                    let next = expand(s, j, prefix, out);
                    if next == j {
                        // Not a path (a stray token): stop rather than loop.
                        return j;
                    }
                    j = next;
                }
            }
        }
    }
    let Some((seg, after)) = ident(s, i) else {
        out.push(prefix.to_vec());
        return i;
    };
    let mut path = prefix.to_vec();
    path.push(seg.to_owned());
    let j = skip_space(s, after);
    if let Some(("as", renamed)) = ident(s, j) {
        // `Name as Other`: the path is `Name`'s.
        out.push(path);
        return ident(s, skip_space(s, renamed)).map_or(renamed, |(_, end)| end);
    }
    if s[j..].starts_with(b"::") && seg != "*" {
        let k = skip_space(s, j + 2);
        if s.get(k) == Some(&b'<') {
            // `Type::<T>`: the path ends before its generic arguments.
            out.push(path);
            return after;
        }
        return expand(s, j + 2, &path, out);
    }
    out.push(path);
    after
}

/// Whether `path` (starting at `crate`) stays in the room or is allowed out of it.
fn allowed(path: &[String]) -> bool {
    let mut path: Vec<&str> = path.iter().map(String::as_str).collect();
    if path.last() == Some(&"self") {
        path.pop();
    }
    let joined = path.join("::");
    let within = |root: &str| joined == root || joined.starts_with(&format!("{root}::"));
    within("crate::upstream") || within(TEST_ONLY) || HANDED.iter().any(|&h| within(h))
}

/// The module path of a file under `src/` (`upstream/qos/why.rs` → `upstream::qos::why`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every path out of the room in one file's source; `module` is the file's module path.
fn breaches(src: &str, module: &[String]) -> Vec<Breach> {
    let code = blank(src);
    let s = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some((word, after)) = next_word(s, i) {
        i = after;
        let start = after - word.len();
        let preceded =
            (start >= 2 && &s[start - 2..start] == b"::") || (start >= 1 && s[start - 1] == b'$');
        if preceded || !s[skip_space(s, after)..].starts_with(b"::") {
            continue;
        }
        let prefix: Vec<String> = match word {
            "crate" => vec!["crate".to_owned()],
            "super" => {
                // Climb `super::super::…` from the file's module (inline modules, such as
                // `mod tests`, are not counted: that only ever climbs higher, so it errs
                // towards a breach).
                let mut up = 1;
                let mut j = skip_space(s, after) + 2;
                while let Some(("super", next)) = ident(s, skip_space(s, j)) {
                    up += 1;
                    j = skip_space(s, next) + 2;
                }
                if up < module.len() {
                    continue;
                }
                let mut p = vec!["crate".to_owned()];
                p.extend(
                    module[..module.len() - up.min(module.len())]
                        .iter()
                        .cloned(),
                );
                let mut paths = Vec::new();
                i = expand(s, j, &p, &mut paths);
                record(s, start, paths, &mut found);
                continue;
            }
            _ => continue,
        };
        let mut paths = Vec::new();
        i = expand(s, skip_space(s, after) + 2, &prefix, &mut paths);
        record(s, start, paths, &mut found);
    }
    found
}

fn record(s: &[u8], at: usize, paths: Vec<Vec<String>>, found: &mut Vec<Breach>) {
    let line = s[..at].iter().filter(|&&c| c == b'\n').count() + 1;
    for p in paths.into_iter().filter(|p| !allowed(p)) {
        found.push(Breach {
            line,
            path: p.join("::"),
        });
    }
}

/// The next identifier at or after `i`, and where it ends.
fn next_word(s: &[u8], mut i: usize) -> Option<(&str, usize)> {
    while i < s.len() {
        let c = s[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
                i += 1;
            }
            return Some((std::str::from_utf8(&s[start..i]).unwrap_or(""), i));
        }
        i += 1;
    }
    None
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_upstream_room_imports_only_the_plain_data_it_is_handed() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("upstream"), &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    let mut report = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let text = fs::read_to_string(f).unwrap();
        for b in breaches(&text, &module_of(rel)) {
            report.push(format!(
                "shared/src/{}:{}: {}",
                rel.display(),
                b.line,
                b.path
            ));
        }
    }
    assert!(
        report.is_empty(),
        "shared/src/upstream/ may import from the rest of the crate only {HANDED:?} (and \
         {TEST_ONLY} in tests); move what it needs into the room or hand it in as plain data:\n{}",
        report.join("\n")
    );
}

fn check(src: &str, module: &str) -> Vec<String> {
    let module: Vec<String> = module.split("::").map(str::to_owned).collect();
    breaches(src, &module)
        .into_iter()
        .map(|b| format!("{}: {}", b.line, b.path))
        .collect()
}

#[test]
fn the_wall_refuses_a_path_out_of_the_room() {
    let m = "upstream::qos";
    assert_eq!(
        check("use crate::pod::PodKey;", m),
        ["1: crate::pod::PodKey"]
    );
    assert_eq!(
        check(
            "use crate::{\n  resources::ResourceList,\n  verdict::{Verdict, Outcome},\n};",
            m
        ),
        ["1: crate::verdict::Verdict", "1: crate::verdict::Outcome"]
    );
    assert_eq!(
        check("fn f() { crate::policy::Policy::default(); }", m),
        ["1: crate::policy::Policy::default"]
    );
    assert_eq!(
        check("use crate::resources::*;", m),
        ["1: crate::resources::*"]
    );
    assert_eq!(
        check("use crate::resources::{self, Resources};", m),
        ["1: crate::resources::self"]
    );
    // Climbing out with `super`.
    assert_eq!(
        check("use super::super::pod::is_deferred_now;", m),
        ["1: crate::pod::is_deferred_now"]
    );
    assert_eq!(
        check(
            "\n\nuse super::super::super::victims;",
            "upstream::qos::why"
        ),
        ["3: crate::victims"]
    );
}

#[test]
fn the_wall_lets_the_room_and_its_handed_data_through() {
    let m = "upstream::qos";
    let ok = r##"
        //! [`crate::verdict::Verdict`] in a doc comment is not an import.
        use crate::upstream::quantity::{ResourceName, parse_nanos};
        use crate::resources::{ResourceList, Resources};
        use crate::ledger::LedgerEntry;
        use super::strategy::is_hugepages;
        use super::*;
        /* crate::policy::Policy in a block comment */
        const S: &str = "crate::policy::Policy in a string";
        const R: &str = r#"crate::pod::PodKey"#;
        const C: char = '"';
        const Q: char = '\'';
        const U: char = '\u{22}';
        const E: char = 'é';
        use crate::resources::Resources as Amount;
        use crate::{ledger::LedgerEntry as Entry, upstream::pod};
        fn f<'a>(x: &'a str) -> Resources { crate::resources::Resources::ZERO }
        #[cfg(test)]
        mod tests {
            use crate::fixture::{PodBuilder, container};
        }
    "##;
    assert_eq!(check(ok, m), Vec::<String>::new());
}
