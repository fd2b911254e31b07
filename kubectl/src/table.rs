//! Output as kubectl prints it: tables with upper-case headers and columns padded to the widest
//! cell plus three spaces, ages in kubectl's `HumanDuration` form, and colour (✓ green, ✗ red,
//! ‼ yellow) only when stdout is a terminal and `NO_COLOR` is unset.

use std::io::IsTerminal;
use std::time::Duration;

/// Renders `rows` under `headers`, columns separated by three spaces (kubectl's tabwriter).
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = widths[i] + 3 - cell.chars().count();
                out.push_str(&" ".repeat(pad));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// kubectl's `duration.HumanDuration` (k8s.io/apimachinery/pkg/util/duration): `45s`, `3m2s`,
/// `25m`, `5h3m`, `20h`, `2d5h`, `30d`, `1y10d`.
pub fn age(d: Duration) -> String {
    let s = d.as_secs();
    let (m, h, day) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        with_rest(m, 'm', s % 60, 's')
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        with_rest(h, 'h', m % 60, 'm')
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        with_rest(day, 'd', h % 24, 'h')
    } else if day < 365 * 2 {
        format!("{day}d")
    } else if day < 365 * 8 {
        with_rest(day / 365, 'y', day % 365, 'd')
    } else {
        format!("{}y", day / 365)
    }
}

/// `n` `unit`s and, unless it is 0, the `rest` in `rest_unit`s: `3m`, `3m2s`.
fn with_rest(n: u64, unit: char, rest: u64, rest_unit: char) -> String {
    match rest {
        0 => format!("{n}{unit}"),
        r => format!("{n}{unit}{r}{rest_unit}"),
    }
}

/// A mark for a check line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mark {
    /// Passed.
    Ok,
    /// Failed: `check` exits 4.
    Fail,
    /// Could not be judged, or worth a look; does not fail `check`.
    Warn,
}

impl Mark {
    /// `✓`, `✗` or `‼`, coloured on a terminal.
    pub fn symbol(self) -> String {
        let (s, colour) = match self {
            Mark::Ok => ("✓", "32"),
            Mark::Fail => ("✗", "31"),
            Mark::Warn => ("‼", "33"),
        };
        if colour_enabled() {
            format!("\x1b[{colour}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
}

/// Bold text on a terminal.
pub fn bold(text: &str) -> String {
    if colour_enabled() {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

fn colour_enabled() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectls() {
        let cases = [
            (45, "45s"),
            (119, "119s"),
            (182, "3m2s"),
            (600, "10m"),
            (25 * 60, "25m"),
            (5 * 3600 + 180, "5h3m"),
            (20 * 3600, "20h"),
            (2 * 86400 + 5 * 3600, "2d5h"),
            (30 * 86400, "30d"),
            (375 * 86400 * 2, "2y20d"),
        ];
        for (secs, want) in cases {
            assert_eq!(age(Duration::from_secs(secs)), want, "{secs}s");
        }
    }

    #[test]
    fn columns_are_padded_to_the_widest_cell_plus_three() {
        let t = render(
            &["NAME", "NODE"],
            &[
                vec!["a".into(), "n1".into()],
                vec!["longer-name".into(), "n2".into()],
            ],
        );
        assert_eq!(
            t,
            "NAME          NODE\na             n1\nlonger-name   n2\n"
        );
    }
}
