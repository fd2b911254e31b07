//! Where the cursor is on a `kubectl resize-guard` command line, read over clap's own model of
//! the command ([`crate::args::Cli`]), so completion knows every subcommand and flag the parser
//! does: the subcommand path, the values given so far, and what the last word is — a flag, a
//! flag's value, a subcommand or a positional argument. Flags are read as clap reads them:
//! `--name value`, `--name=value`, `-o value`, `-ovalue`, `-Ao value` (shorts run together),
//! `--` ending the flags; a value-optional flag (`--wait[=TIMEOUT]`) takes a value only after
//! `=`.

use std::collections::BTreeMap;

use clap::{Arg, Command};

/// What the last word is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// A flag's value: the flag's id, the value typed so far, and what goes before each
    /// candidate in the word (`--output=` when typed that way).
    Value {
        /// The flag's id.
        id: String,
        /// Typed so far.
        typed: String,
        /// Put before each candidate.
        prefix: String,
    },
    /// A flag's name (the word starts with `-`).
    Flag {
        /// Typed so far.
        typed: String,
    },
    /// A subcommand, or the next positional argument of the current one (`None`: it takes no
    /// more).
    Word {
        /// The positional argument's id, if the command takes one here.
        positional: Option<String>,
        /// Typed so far.
        typed: String,
    },
}

/// A command line read up to its last word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The subcommands chosen, outermost first (empty: the top level).
    pub path: Vec<String>,
    /// The values given, by argument id (flags and positionals), in order.
    pub values: BTreeMap<String, Vec<String>>,
    /// What the last word is.
    pub want: Want,
}

/// The command at `path` under `root` (`root` itself for an empty path).
pub fn command_at<'a>(root: &'a Command, path: &[String]) -> &'a Command {
    path.iter()
        .try_fold(root, |cmd, name| cmd.find_subcommand(name))
        .unwrap_or(root)
}

/// Whether `arg`, as a flag, consumes the next word as its value.
fn takes_next_word(arg: &Arg) -> bool {
    arg.get_action().takes_values() && !arg.is_require_equals_set()
}

fn by_long<'a>(cmd: &'a Command, name: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long_and_visible_aliases()
            .is_some_and(|l| l.contains(&name))
    })
}

fn by_short(cmd: &Command, c: char) -> Option<&Arg> {
    cmd.get_arguments().find(|a| {
        a.get_short_and_visible_aliases()
            .is_some_and(|s| s.contains(&c))
    })
}

/// Reads `words` (everything after `resize-guard`; the last is the word being completed, `""`
/// for a new one) over `root`, a built command ([`Command::build`]).
pub fn parse(root: &Command, words: &[String]) -> Parsed {
    let (typed, before) = match words.split_last() {
        Some((last, before)) => (last.clone(), before),
        None => (String::new(), &[][..]),
    };
    let mut path: Vec<String> = Vec::new();
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut positionals = 0usize;
    let mut awaiting: Option<String> = None;
    let mut flags_done = false;
    for word in before {
        let cmd = command_at(root, &path);
        if let Some(id) = awaiting.take() {
            values.entry(id).or_default().push(word.clone());
            continue;
        }
        if !flags_done && word == "--" {
            flags_done = true;
            continue;
        }
        if !flags_done && let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            if let Some(arg) = by_long(cmd, name) {
                let id = arg.get_id().to_string();
                match value {
                    Some(v) => values.entry(id).or_default().push(v.to_owned()),
                    None if takes_next_word(arg) => awaiting = Some(id),
                    None => values.entry(id).or_default().push(String::new()),
                }
            }
            continue;
        }
        if !flags_done && word.len() > 1 && word.starts_with('-') {
            let shorts = &word[1..];
            for (i, c) in shorts.char_indices() {
                let Some(arg) = by_short(cmd, c) else { break };
                let id = arg.get_id().to_string();
                if arg.get_action().takes_values() {
                    let rest = &shorts[i + c.len_utf8()..];
                    let rest = rest.strip_prefix('=').unwrap_or(rest);
                    if rest.is_empty() && takes_next_word(arg) {
                        awaiting = Some(id);
                    } else {
                        values.entry(id).or_default().push(rest.to_owned());
                    }
                    break;
                }
                values.entry(id).or_default().push(String::new());
            }
            continue;
        }
        if let Some(sub) = cmd.find_subcommand(word) {
            path.push(sub.get_name().to_owned());
            positionals = 0;
            continue;
        }
        if let Some(arg) = cmd.get_positionals().nth(positionals) {
            values
                .entry(arg.get_id().to_string())
                .or_default()
                .push(word.clone());
        }
        positionals += 1;
    }
    let cmd = command_at(root, &path);
    let want = if let Some(id) = awaiting {
        Want::Value {
            id,
            typed,
            prefix: String::new(),
        }
    } else if !flags_done && typed.starts_with('-') {
        flag_value(cmd, &typed).unwrap_or(Want::Flag { typed })
    } else {
        let positional = cmd
            .get_positionals()
            .nth(positionals)
            .map(|a| a.get_id().to_string());
        Want::Word { positional, typed }
    };
    Parsed { path, values, want }
}

/// A flag's value typed in the same word: `--output=js`, `-ojs`.
fn flag_value(cmd: &Command, typed: &str) -> Option<Want> {
    if let Some(long) = typed.strip_prefix("--") {
        let (name, value) = long.split_once('=')?;
        let arg = by_long(cmd, name)?;
        return arg.get_action().takes_values().then(|| Want::Value {
            id: arg.get_id().to_string(),
            typed: value.to_owned(),
            prefix: format!("--{name}="),
        });
    }
    let mut chars = typed[1..].char_indices();
    let (_, c) = chars.next()?;
    let arg = by_short(cmd, c)?;
    let rest = &typed[1 + c.len_utf8()..];
    (arg.get_action().takes_values() && !rest.is_empty()).then(|| Want::Value {
        id: arg.get_id().to_string(),
        typed: rest.to_owned(),
        prefix: format!("-{c}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Cli;
    use clap::CommandFactory;

    fn parsed(line: &[&str]) -> Parsed {
        let mut root = Cli::command();
        root.build();
        let words: Vec<String> = line.iter().map(|w| (*w).to_owned()).collect();
        parse(&root, &words)
    }

    fn word(positional: Option<&str>, typed: &str) -> Want {
        Want::Word {
            positional: positional.map(str::to_owned),
            typed: typed.into(),
        }
    }

    fn value(id: &str, typed: &str, prefix: &str) -> Want {
        Want::Value {
            id: id.into(),
            typed: typed.into(),
            prefix: prefix.into(),
        }
    }

    #[test]
    fn subcommands_then_their_positionals() {
        assert_eq!(parsed(&[""]).want, word(None, ""));
        assert!(parsed(&[""]).path.is_empty());
        let p = parsed(&["explain", "we"]);
        assert_eq!(p.path, ["explain"]);
        assert_eq!(p.want, word(Some("pod"), "we"));
        let p = parsed(&["explain", "web-0", ""]);
        assert_eq!(p.want, word(None, ""));
        assert_eq!(p.values["pod"], ["web-0"]);
        // Global flags before the subcommand, with their values, do not count as positionals.
        let p = parsed(&["-n", "shop", "--context=prod", "what-if", ""]);
        assert_eq!(p.path, ["what-if"]);
        assert_eq!(p.want, word(Some("pod"), ""));
        assert_eq!(p.values["namespace"], ["shop"]);
        assert_eq!(p.values["context"], ["prod"]);
    }

    #[test]
    fn flag_values_in_every_spelling() {
        assert_eq!(parsed(&["status", "-o", ""]).want, value("output", "", ""));
        assert_eq!(parsed(&["-o", "j"]).want, value("output", "j", ""));
        assert_eq!(
            parsed(&["status", "--output=ya"]).want,
            value("output", "ya", "--output=")
        );
        assert_eq!(parsed(&["status", "-oj"]).want, value("output", "j", "-o"));
        assert_eq!(parsed(&["status", "-Ao", ""]).want, value("output", "", ""));
        assert_eq!(
            parsed(&["what-if", "web-0", "-c", ""]).want,
            value("container", "", "")
        );
        let p = parsed(&["status", "-Aojson", "-n", "shop", "--"]);
        assert_eq!(p.values["all_namespaces"], [""]);
        assert_eq!(p.values["output"], ["json"]);
        assert_eq!(p.values["namespace"], ["shop"]);
        assert_eq!(p.want, Want::Flag { typed: "--".into() });
    }

    #[test]
    fn a_value_optional_flag_takes_a_value_only_after_equals() {
        let p = parsed(&["check", "--wait", ""]);
        assert_eq!(p.values["wait"], [""]);
        assert_eq!(p.want, word(None, ""));
        assert_eq!(
            parsed(&["check", "--wait="]).want,
            value("wait", "", "--wait=")
        );
    }

    #[test]
    fn after_double_dash_everything_is_positional() {
        let p = parsed(&["explain", "--", "-"]);
        assert_eq!(p.want, word(Some("pod"), "-"));
        assert_eq!(
            parsed(&["check", "--pr"]).want,
            Want::Flag {
                typed: "--pr".into()
            }
        );
    }
}
