//! The little of Markdown the link checker reads: the links of a document (inline links and
//! images, reference definitions, HTML `href`/`src`), outside fenced code blocks and code spans,
//! and the anchors it offers (its headings' slugs, explicit `{#id}`s and HTML `id`/`name`s).
//!
//! A heading's slug follows GitHub's rule (github.com/Flet/github-slugger, which github.com
//! uses: the heading's text lowercased, everything but letters, digits, `_`, `-` and spaces
//! dropped, spaces made `-`, a repeated slug suffixed `-1`, `-2`, …) and mdBook's
//! (`normalize_id` and `unique_id_from_content` in its HTML renderer), which agree for plain
//! headings.

use std::collections::{HashMap, HashSet};

/// A link found in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// 1-based line.
    pub line: usize,
    /// The destination as written (title and `<>` removed).
    pub dest: String,
}

/// The document's lines, each with whether it is inside a fenced code block (its fence lines
/// included).
fn lines_outside_code(text: &str) -> Vec<(usize, &str, bool)> {
    let mut fence: Option<(char, usize)> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (fence, marker) {
            (None, Some(c)) if run >= 3 && indent <= 3 => {
                fence = Some((c, run));
                out.push((i + 1, line, true));
            }
            (Some((c, n)), Some(m)) if m == c && run >= n && trimmed[run..].trim().is_empty() => {
                fence = None;
                out.push((i + 1, line, true));
            }
            (Some(_), _) => out.push((i + 1, line, true)),
            (None, _) => out.push((i + 1, line, false)),
        }
    }
    out
}

/// `line` with its code spans blanked (a run of n backticks up to the next run of exactly n).
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let close = (i + run..chars.len()).find(|&j| {
            chars[j] == '`'
                && (j == 0 || chars[j - 1] != '`')
                && chars[j..].iter().take_while(|c| **c == '`').count() == run
        });
        match close {
            Some(j) => {
                out.extend(std::iter::repeat_n(' ', j + run - i));
                i = j + run;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The destination that starts `rest` (what follows `](`): `<dest>`, or up to the first space
/// or the `)` that closes the link, parentheses balanced.
fn destination(rest: &str) -> Option<String> {
    if let Some(inner) = rest.strip_prefix('<') {
        return inner.find('>').map(|end| inner[..end].to_owned());
    }
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(rest[..i].to_owned()),
            ')' => depth -= 1,
            c if c.is_whitespace() => return Some(rest[..i].to_owned()),
            _ => {}
        }
    }
    None
}

/// Every link of `text`: inline links and images, reference definitions and HTML `href`/`src`
/// attributes, outside fenced code blocks and code spans.
pub fn links(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (line_no, raw, code) in lines_outside_code(text) {
        if code {
            continue;
        }
        let line = without_code_spans(raw);
        let mut push = |dest: String| {
            if !dest.is_empty() {
                out.push(Link {
                    line: line_no,
                    dest,
                });
            }
        };
        // A reference definition: `[label]: dest "title"` (not a footnote, `[^1]:`).
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3
            && trimmed.starts_with('[')
            && !trimmed.starts_with("[^")
            && let Some(end) = trimmed.find("]:")
        {
            if let Some(dest) = trimmed[end + 2..].split_whitespace().next() {
                push(
                    dest.trim_start_matches('<')
                        .trim_end_matches('>')
                        .to_owned(),
                );
            }
            continue;
        }
        let mut from = 0;
        while let Some(at) = line[from..].find("](") {
            let start = from + at + 2;
            if let Some(dest) = destination(&line[start..]) {
                push(dest);
            }
            from = start;
        }
        for attr in ["href=\"", "src=\""] {
            let mut from = 0;
            while let Some(at) = line[from..].find(attr) {
                let start = from + at + attr.len();
                if let Some(end) = line[start..].find('"') {
                    push(line[start..start + end].to_owned());
                }
                from = start;
            }
        }
    }
    out
}

/// A heading's plain text: code spans kept verbatim, links and images reduced to their text,
/// HTML tags and emphasis markers removed.
fn heading_text(heading: &str) -> String {
    let chars: Vec<char> = heading.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '`' => {
                let run = chars[i..].iter().take_while(|c| **c == '`').count();
                let body: String = chars[i + run..].iter().collect();
                let fence: String = "`".repeat(run);
                match body.find(&fence) {
                    Some(end) => {
                        out.push_str(body[..end].trim());
                        i += run + body[..end].chars().count() + run;
                    }
                    None => {
                        out.push_str(&fence);
                        i += run;
                    }
                }
            }
            // A link or image: its text stays, its destination goes.
            ']' if chars.get(i + 1) == Some(&'(') => {
                let rest: String = chars[i + 2..].iter().collect();
                let skip = rest.find(')').map_or(0, |end| rest[..=end].chars().count());
                i += 2 + skip;
            }
            '<' => {
                let rest: String = chars[i..].iter().collect();
                match rest.find('>') {
                    Some(end) => i += rest[..=end].chars().count(),
                    None => i += 1,
                }
            }
            '*' | '~' | '[' | '!' if chars.get(i + 1).is_none_or(|c| *c != ' ') => i += 1,
            // `_` marks emphasis at a word's edge, never inside one (`snake_case`).
            '_' => {
                let before = i.checked_sub(1).map(|j| chars[j]);
                let after = chars.get(i + 1).copied();
                let inside = before.is_some_and(char::is_alphanumeric)
                    && after.is_some_and(char::is_alphanumeric);
                if inside {
                    out.push('_');
                }
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The slug of a heading's text (before any `-N` suffix for repeats).
pub fn slug(heading: &str) -> String {
    heading_text(heading)
        .trim()
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// An ATX heading's text (`## Text ##` gives `Text`).
fn atx_heading(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    let closed = rest.trim_end_matches('#');
    Some(if closed.is_empty() || closed.ends_with([' ', '\t']) {
        closed.trim_end()
    } else {
        rest
    })
}

/// True for a setext underline (`===` or `---`).
fn setext_underline(line: &str) -> bool {
    let t = line.trim();
    line.len() - line.trim_start().len() <= 3
        && !t.is_empty()
        && (t.chars().all(|c| c == '=') || t.chars().all(|c| c == '-'))
}

/// True when `line` could be the text of a setext heading (a plain paragraph line).
fn paragraph_line(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty()
        && !t.starts_with(['#', '|', '>', '-', '*', '+', '<'])
        && !t.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// Every anchor `text` offers: its headings' slugs (repeats suffixed `-1`, `-2`, … as GitHub and
/// mdBook do), `{#id}` attributes of headings (mdBook) and HTML `id="…"`/`name="…"`.
pub fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = HashSet::new();
    let mut add_heading = |heading: &str, out: &mut HashSet<String>| {
        let (heading, custom) = match heading.rfind("{#") {
            Some(at) if heading.ends_with('}') => (
                heading[..at].trim_end(),
                Some(heading[at + 2..heading.len() - 1].to_owned()),
            ),
            _ => (heading, None),
        };
        if let Some(id) = custom {
            out.insert(id);
        }
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    };
    let lines = lines_outside_code(text);
    for (i, &(_, line, code)) in lines.iter().enumerate() {
        if code {
            continue;
        }
        if let Some(heading) = atx_heading(line) {
            add_heading(heading, &mut out);
        } else if setext_underline(line)
            && i > 0
            && !lines[i - 1].2
            && paragraph_line(lines[i - 1].1)
            && atx_heading(lines[i - 1].1).is_none()
        {
            add_heading(lines[i - 1].1.trim(), &mut out);
        }
        let plain = without_code_spans(line);
        for attr in [" id=\"", " name=\""] {
            let mut from = 0;
            while let Some(at) = plain[from..].find(attr) {
                let start = from + at + attr.len();
                if let Some(end) = plain[start..].find('"') {
                    out.insert(plain[start..start + end].to_owned());
                }
                from = start;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_github_and_mdbook() {
        for (heading, want) in [
            ("Install", "install"),
            ("Install in five steps", "install-in-five-steps"),
            ("What it does (and why)", "what-it-does-and-why"),
            (
                "`make test`: everything CI runs",
                "make-test-everything-ci-runs",
            ),
            ("`preemption.circuitBreaker`", "preemptioncircuitbreaker"),
            ("The `max_fds` limit", "the-max_fds-limit"),
            (
                "*Emphasis* and **strong** and _this_",
                "emphasis-and-strong-and-this",
            ),
            ("A [link](other.md#x) in it", "a-link-in-it"),
            ("Upgrade — from v0.1", "upgrade--from-v01"),
            ("FAQ?", "faq"),
            ("snake_case stays", "snake_case-stays"),
            ("Ünïcödé letters", "ünïcödé-letters"),
            ("  padded  ", "padded"),
            ("1.33 – 1.37", "133--137"),
        ] {
            assert_eq!(slug(heading), want, "{heading:?}");
        }
    }

    #[test]
    fn anchors_number_repeats_and_read_ids() {
        let doc = "# Title\n\n## Usage\n\ntext\n\n## Usage\n\n## Usage\n\nSetext one\n---\n\n\
                   Other\n===\n\n## Custom {#my-id}\n\n<a id=\"here\"></a>\n<a name=\"there\"></a>\n\
                   ```\n## not a heading\n```\n\n| a | b |\n|---|---|\n\n- item\n---\n";
        let got = anchors(doc);
        for want in [
            "title",
            "usage",
            "usage-1",
            "usage-2",
            "setext-one",
            "other",
            "custom",
            "my-id",
            "here",
            "there",
        ] {
            assert!(got.contains(want), "{want} missing from {got:?}");
        }
        for absent in ["not-a-heading", "a--b", "item"] {
            assert!(!got.contains(absent), "{absent} in {got:?}");
        }
    }

    #[test]
    fn atx_headings_lose_their_closing_hashes_only() {
        for (line, want) in [
            ("## Title ##", Some("Title")),
            ("# C#", Some("C#")),
            ("#Title", None),
            ("    # indented code", None),
            ("####### seven", None),
            ("#", Some("")),
        ] {
            assert_eq!(atx_heading(line), want, "{line:?}");
        }
    }

    #[test]
    fn links_are_found_outside_code_only() {
        let doc = "See [the book](docs/src/SUMMARY.md) and ![logo](img/logo.png \"Logo\").\n\
                   A [link with (parens)](a_(b).md#x) and <https://example.invalid>.\n\
                   `[not](a-link.md)` but [yes](b.md).\n\
                   ```\n[in](fence.md)\n```\n\
                   ~~~~\n[in](tilde.md)\n~~~~\n\
                   [ref]: ref-target.md#part \"title\"\n\
                   [^1]: a footnote\n\
                   <a href=\"c.md#y\">c</a> <img src=\"d.png\">\n\
                   [angle](<with space.md>) [self](#anchor) [web](https://example.invalid/x)\n";
        let got: Vec<(usize, String)> = links(doc).into_iter().map(|l| (l.line, l.dest)).collect();
        let want: Vec<(usize, String)> = [
            (1, "docs/src/SUMMARY.md"),
            (1, "img/logo.png"),
            (2, "a_(b).md#x"),
            (3, "b.md"),
            (10, "ref-target.md#part"),
            (12, "c.md#y"),
            (12, "d.png"),
            (13, "with space.md"),
            (13, "#anchor"),
            (13, "https://example.invalid/x"),
        ]
        .into_iter()
        .map(|(l, d)| (l, d.to_owned()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn code_spans_are_blanked_with_their_backticks() {
        assert_eq!(without_code_spans("a `b` c"), "a     c");
        assert_eq!(without_code_spans("a ``b ` c`` d"), "a           d");
        assert_eq!(without_code_spans("an ` unclosed"), "an ` unclosed");
    }
}
