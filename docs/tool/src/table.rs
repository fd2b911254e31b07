//! Markdown tables for the generated pages.

/// `cell` safe inside a table row: `|` escaped, line breaks made spaces.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A table of `header` and `rows`.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(header.iter().map(|h| cell(h)).collect());
    out.push_str(&line(header.iter().map(|_| "---".to_owned()).collect()));
    for row in rows {
        out.push_str(&line(row.iter().map(|c| cell(c)).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_are_escaped_and_rows_follow_the_header() {
        let got = render(
            &["Key", "Meaning"],
            &[vec!["`a`".to_owned(), "x | y\nz".to_owned()]],
        );
        assert_eq!(
            got,
            "| Key | Meaning |\n| --- | --- |\n| `a` | x \\| y z |\n"
        );
    }
}
