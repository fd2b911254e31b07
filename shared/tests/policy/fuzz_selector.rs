//! Fuzzes label selectors (`resize_guard_policy::upstream::selector`): the string form of
//! `preemption.protectedSelector` on arbitrary bytes, dictionary text and mutations of
//! `fuzz/corpus/selector/`, and on selectors generated from a model, whose matches are compared
//! with the model's and with the same selector in structured form (`Selector::from_label_selector`,
//! as PDBs carry it). Arbitrary structured selectors (any operator, key and values) are converted
//! too. Never panics; an error names the selector; a parsed selector re-parses from its
//! `Display` to an equal one.
//!
//! Runs for `RESIZE_GUARD_FUZZ_SECONDS` (default 10): `make fuzz` runs it longer, or
//! `RESIZE_GUARD_FUZZ_SECONDS=300 cargo test -p resize-guard-policy --test policy --
//! fuzz_selector:: --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use proptest::prelude::*;
use resize_guard_fuzz::{Case, Fuzz};
use resize_guard_policy::upstream::selector::Selector;

const DICTIONARY: &[&str] = &[
    "=",
    "==",
    "!=",
    "!",
    ",",
    "(",
    ")",
    " ",
    "\t",
    "in",
    "notin",
    " in (",
    " notin (",
    "app",
    "tier",
    "env",
    "a",
    "b",
    "-",
    "_",
    ".",
    "/",
    "resize-guard.io/protected",
    "true",
    "é",
    "𝔘",
    ",,",
    "((",
    "))",
    "\u{0}",
    "\u{2028}",
];

const KEYS: &[&str] = &[
    "app",
    "tier",
    "env",
    "a",
    "in",
    "notin",
    "k_1",
    "x.y/z",
    "resize-guard.io/protected",
];
const VALUES: &[&str] = &["a", "b", "prod", "true", "x-1", "v.2", "in", "A_b"];

type Labels = BTreeMap<String, String>;

/// One requirement of the model, with how it is spelled.
#[derive(Debug, Clone)]
enum Req {
    In(&'static str, Vec<&'static str>, u8),
    NotIn(&'static str, Vec<&'static str>, u8),
    Exists(&'static str),
    DoesNotExist(&'static str, bool),
}

impl Req {
    fn matches(&self, labels: &Labels) -> bool {
        match self {
            Req::In(k, vs, _) => labels.get(*k).is_some_and(|v| vs.contains(&v.as_str())),
            Req::NotIn(k, vs, _) => labels.get(*k).is_none_or(|v| !vs.contains(&v.as_str())),
            Req::Exists(k) => labels.contains_key(*k),
            Req::DoesNotExist(k, _) => !labels.contains_key(*k),
        }
    }

    /// The `kubectl -l` spelling; `style` picks `=`, `==` or `in (…)` where there is a choice.
    fn spell(&self, pad: &str) -> String {
        let set = |vs: &[&str]| vs.join(&format!(",{pad}"));
        match self {
            Req::In(k, vs, style) if vs.len() == 1 && *style % 3 == 0 => format!("{k}={}", vs[0]),
            Req::In(k, vs, style) if vs.len() == 1 && *style % 3 == 1 => {
                format!("{k}{pad}=={pad}{}", vs[0])
            }
            Req::In(k, vs, _) => format!("{k} in{pad}({})", set(vs)),
            Req::NotIn(k, vs, style) if vs.len() == 1 && *style % 2 == 0 => {
                format!("{k}{pad}!={pad}{}", vs[0])
            }
            Req::NotIn(k, vs, _) => format!("{k} notin ({pad}{}{pad})", set(vs)),
            Req::Exists(k) => (*k).to_owned(),
            Req::DoesNotExist(k, spaced) => format!("!{}{k}", if *spaced { " " } else { "" }),
        }
    }

    fn structured(
        &self,
        as_match_label: bool,
    ) -> Result<(String, String), LabelSelectorRequirement> {
        let req = |k: &str, op: &str, vs: &[&str]| LabelSelectorRequirement {
            key: k.to_owned(),
            operator: op.to_owned(),
            values: (!vs.is_empty()).then(|| vs.iter().map(|v| (*v).to_owned()).collect()),
        };
        match self {
            Req::In(k, vs, _) if vs.len() == 1 && as_match_label => {
                Ok(((*k).to_owned(), vs[0].to_owned()))
            }
            Req::In(k, vs, _) => Err(req(k, "In", vs)),
            Req::NotIn(k, vs, _) => Err(req(k, "NotIn", vs)),
            Req::Exists(k) => Err(req(k, "Exists", &[])),
            Req::DoesNotExist(k, _) => Err(req(k, "DoesNotExist", &[])),
        }
    }
}

#[derive(Debug, Clone, Default)]
enum Expect {
    #[default]
    Unknown,
    /// Spelled from these requirements; must parse and match like them.
    Model(Vec<Req>, Vec<Labels>, bool),
    /// The bytes are a structured `LabelSelector` as JSON.
    Structured,
}

fn req() -> impl Strategy<Value = Req> {
    let key = prop::sample::select(KEYS);
    let values = prop::collection::vec(prop::sample::select(VALUES), 1..4);
    prop_oneof![
        (key.clone(), values.clone(), any::<u8>()).prop_map(|(k, v, s)| Req::In(k, v, s)),
        (key.clone(), values, any::<u8>()).prop_map(|(k, v, s)| Req::NotIn(k, v, s)),
        key.clone().prop_map(Req::Exists),
        (key, any::<bool>()).prop_map(|(k, s)| Req::DoesNotExist(k, s)),
    ]
}

fn labels() -> impl Strategy<Value = Labels> {
    prop::collection::btree_map(
        prop::sample::select(KEYS).prop_map(str::to_owned),
        prop::sample::select(VALUES).prop_map(str::to_owned),
        0..5,
    )
}

fn model() -> impl Strategy<Value = Case<Expect>> {
    (
        prop::collection::vec(req(), 0..5),
        prop::sample::select(&["", " ", "  ", "\t"][..]),
        prop::collection::vec(labels(), 1..6),
        any::<bool>(),
    )
        .prop_map(|(reqs, pad, labels, match_labels)| {
            let spelled: Vec<String> = reqs.iter().map(|r| r.spell(pad)).collect();
            Case {
                bytes: format!("{pad}{}{pad}", spelled.join(&format!("{pad},{pad}"))).into_bytes(),
                expect: Expect::Model(reqs, labels, match_labels),
            }
        })
}

/// Structured selectors with any operator, key and values (empty ones included).
fn structured() -> impl Strategy<Value = Case<Expect>> {
    let text = prop_oneof![prop::sample::select(KEYS).prop_map(str::to_owned), ".{0,6}"];
    let op = prop_oneof![
        prop::sample::select(&["In", "NotIn", "Exists", "DoesNotExist", "in", "Gt", ""][..])
            .prop_map(str::to_owned),
        ".{0,6}",
    ];
    let requirement = (
        text.clone(),
        op,
        prop::option::of(prop::collection::vec(text.clone(), 0..3)),
    )
        .prop_map(|(key, operator, values)| LabelSelectorRequirement {
            key,
            operator,
            values,
        });
    (
        prop::option::of(prop::collection::btree_map(text.clone(), text, 0..3)),
        prop::option::of(prop::collection::vec(requirement, 0..4)),
    )
        .prop_map(|(match_labels, match_expressions)| {
            let ls = LabelSelector {
                match_labels,
                match_expressions,
            };
            Case {
                bytes: serde_json::to_vec(&ls).unwrap(),
                expect: Expect::Structured,
            }
        })
}

fn inputs(fuzz: &Fuzz) -> impl Strategy<Value = Case<Expect>> + use<> {
    prop_oneof![
        7 => crate::unstructured(fuzz, DICTIONARY, 64, 16, 3),
        3 => model(),
        1 => structured(),
    ]
}

fn check(case: Case<Expect>) -> Result<(), TestCaseError> {
    let text = case.text();
    if let Expect::Structured = case.expect {
        let ls: LabelSelector = serde_json::from_slice(&case.bytes).unwrap();
        if let Ok(s) = Selector::from_label_selector(&ls) {
            for l in ls.match_labels.iter() {
                s.matches(Some(l));
            }
            s.matches(None);
        }
        return Ok(());
    }
    let parsed = Selector::parse(&text);
    if let Expect::Model(reqs, label_sets, match_labels) = &case.expect {
        let s = parsed
            .as_ref()
            .map_err(|e| TestCaseError::fail(format!("model selector rejected: {e}")))?;
        // The same requirements in structured form: `In` with one value as matchLabels or not.
        let mut ls = LabelSelector::default();
        for r in reqs {
            match r.structured(*match_labels) {
                Ok((k, v)) => {
                    ls.match_labels
                        .get_or_insert_with(BTreeMap::new)
                        .insert(k, v);
                }
                Err(e) => ls.match_expressions.get_or_insert_with(Vec::new).push(e),
            }
        }
        // matchLabels is a map: a repeated key keeps its last value, so compare with the model
        // only when no key repeats among those entries.
        let entries = reqs
            .iter()
            .filter_map(|r| r.structured(*match_labels).ok())
            .count();
        let structured_is_exact = entries == ls.match_labels.as_ref().map_or(0, BTreeMap::len);
        let from_struct = Selector::from_label_selector(&ls)
            .map_err(|e| TestCaseError::fail(format!("structured form rejected: {e}")))?;
        for labels in label_sets.iter().chain([&Labels::new()]) {
            let want = reqs.iter().all(|r| r.matches(labels));
            prop_assert_eq!(s.matches(Some(labels)), want, "labels {:?}", labels);
            if structured_is_exact {
                prop_assert_eq!(
                    from_struct.matches(Some(labels)),
                    want,
                    "structured {:?}",
                    ls
                );
            }
        }
        prop_assert_eq!(
            s.matches(None),
            reqs.iter().all(|r| r.matches(&Labels::new()))
        );
    }
    match parsed {
        Ok(s) => {
            let again = Selector::parse(&s.to_string());
            prop_assert_eq!(again.as_ref(), Ok(&s), "re-parsing {}", s);
            prop_assert_eq!(s.is_empty(), text.trim().is_empty());
            s.matches(None);
        }
        Err(e) => {
            prop_assert_eq!(&e.selector, &text);
            prop_assert!(!e.problem.is_empty());
            prop_assert!(e.to_string().contains("invalid label selector"));
        }
    }
    Ok(())
}

#[test]
fn selector_parsing_never_panics_and_matches_like_its_model() {
    let fuzz = Fuzz::new("selector");
    fuzz.run(inputs(&fuzz), check);
}
