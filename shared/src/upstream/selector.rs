//! Label selectors: the structured `LabelSelector` of PDBs and the string form
//! (`key=value,tier!=web,!legacy,env in (a,b)`) used in the policy's `protectedSelector`.
//!
//! Matching follows `metav1.LabelSelectorAsSelector` + `labels.Selector.Matches`. An empty
//! selector matches everything here; PDB code applies upstream's "empty PDB selector matches
//! nothing" rule itself.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key in (values)` / `key=value`.
    In(String, Vec<String>),
    /// `key notin (values)` / `key!=value`: also true when the key is absent.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A conjunction of requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
    source: String,
}

/// A selector that cannot be parsed or converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {problem}")]
pub struct SelectorError {
    /// The selector as written.
    pub selector: String,
    /// What is wrong.
    pub problem: String,
}

impl Selector {
    /// True when the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// True when every requirement holds for `labels`.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        let labels = labels.unwrap_or(&EMPTY);
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Parses the string form, as `kubectl -l` accepts it.
    pub fn parse(input: &str) -> Result<Selector, SelectorError> {
        let err = |problem: &str| SelectorError {
            selector: input.to_owned(),
            problem: problem.to_owned(),
        };
        let mut requirements = Vec::new();
        for term in split_terms(input) {
            let term = term.trim();
            if term.is_empty() {
                if input.trim().is_empty() {
                    continue;
                }
                return Err(err("empty requirement"));
            }
            requirements.push(parse_term(term).map_err(|p| err(&p))?);
        }
        Ok(Selector {
            requirements,
            source: input.trim().to_owned(),
        })
    }

    /// Converts a structured `LabelSelector` (`metav1.LabelSelectorAsSelector`).
    pub fn from_label_selector(ls: &LabelSelector) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in ls.match_labels.iter().flatten() {
            requirements.push(Requirement::In(k.clone(), vec![v.clone()]));
        }
        for e in ls.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let bad = |problem: &str| SelectorError {
                selector: format!("{} {} {:?}", e.key, e.operator, values),
                problem: problem.to_owned(),
            };
            requirements.push(match e.operator.as_str() {
                "In" if !values.is_empty() => Requirement::In(e.key.clone(), values),
                "NotIn" if !values.is_empty() => Requirement::NotIn(e.key.clone(), values),
                "In" | "NotIn" => return Err(bad("In and NotIn need values")),
                "Exists" => Requirement::Exists(e.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
                _ => return Err(bad("unknown operator")),
            });
        }
        Ok(Selector {
            requirements,
            source: String::new(),
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(input: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0_i32, 0);
    for (i, ch) in input.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&input[start..]);
    out
}

fn parse_term(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(valid_key(key.trim())?));
    }
    for (op, negate) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = term.split_once(op) {
            let (k, v) = (valid_key(k.trim())?, valid_value(v.trim())?);
            return Ok(if negate {
                Requirement::NotIn(k, vec![v])
            } else {
                Requirement::In(k, vec![v])
            });
        }
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim();
        let (negate, list) = if let Some(l) = rest.strip_prefix("notin") {
            (true, l)
        } else if let Some(l) = rest.strip_prefix("in") {
            (false, l)
        } else {
            return Err(format!("expected in or notin after {key:?}"));
        };
        let list = list
            .trim()
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or("set must be in parentheses")?;
        let values = list
            .split(',')
            .map(|v| valid_value(v.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        let key = valid_key(key)?;
        return Ok(if negate {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    Ok(Requirement::Exists(valid_key(term)?))
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty() && key.len() <= 317 && label_chars(key, "-_./");
    valid("key", key, ok)
}

fn valid_value(value: &str) -> Result<String, String> {
    let ok = value.len() <= 63 && label_chars(value, "-_.");
    valid("value", value, ok)
}

/// Every character of `text` is ASCII alphanumeric or one of `punctuation`.
fn label_chars(text: &str, punctuation: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || punctuation.contains(c))
}

fn valid(what: &str, text: &str, ok: bool) -> Result<String, String> {
    if ok {
        Ok(text.to_owned())
    } else {
        Err(format!("invalid label {what} {text:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_equality_inequality_existence_and_sets() {
        let s = Selector::parse("resize-guard.io/protected=true").unwrap();
        assert!(s.matches(Some(&labels(&[("resize-guard.io/protected", "true")]))));
        assert!(!s.matches(Some(&labels(&[("resize-guard.io/protected", "false")]))));
        assert!(!s.matches(None));

        let s = Selector::parse("tier!=web, app, !legacy, env in (prod, staging)").unwrap();
        assert!(s.matches(Some(&labels(&[("app", "x"), ("env", "prod")]))));
        assert!(!s.matches(Some(&labels(&[("app", "x"), ("env", "dev")]))));
        assert!(!s.matches(Some(&labels(&[
            ("app", "x"),
            ("env", "prod"),
            ("legacy", "")
        ]))));
        assert!(!s.matches(Some(&labels(&[
            ("app", "x"),
            ("env", "prod"),
            ("tier", "web")
        ]))));

        let s = Selector::parse("env notin (dev)").unwrap();
        assert!(s.matches(None));
        assert!(!s.matches(Some(&labels(&[("env", "dev")]))));
    }

    #[test]
    fn empty_string_is_an_empty_selector_that_matches_everything() {
        let s = Selector::parse("").unwrap();
        assert!(s.is_empty() && s.matches(None));
    }

    #[test]
    fn rejects_malformed_selectors() {
        for bad in [
            "a=b,,c",
            "env in prod",
            "env in (a",
            "bad key=1",
            "a=b c",
            "x oops (y)",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn converts_structured_selectors() {
        let ls = LabelSelector {
            match_labels: Some([("app".to_owned(), "db".to_owned())].into()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["cache".into()]),
            }]),
        };
        let s = Selector::from_label_selector(&ls).unwrap();
        assert!(s.matches(Some(&labels(&[("app", "db")]))));
        assert!(!s.matches(Some(&labels(&[("app", "db"), ("tier", "cache")]))));
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "x".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(Selector::from_label_selector(&bad).is_err());
    }
}
