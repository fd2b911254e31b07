//! Fuzzes `Policy::from_yaml` (ConfigMap `resize-guard`, key `policy.yaml`): arbitrary bytes,
//! dictionary text made of the real keys and YAML punctuation, mutations of
//! `fuzz/corpus/policy/` (anchors, aliases, merge keys, duplicate keys, tags, wrong types, deep
//! nesting), arbitrary YAML trees built from the real field names, and block-style documents
//! generated from a policy model with at most one injected mistake. Never panics; an error has
//! a message and a 1-based position; a parsed policy prints (`to_yaml`) to YAML that parses back
//! to it; a model document parses to exactly the model's policy, a document with a mistake
//! is refused naming the mistake's line, and one that leaves out `mode` (or sets preemption keys
//! without `preemption.enabled`) is refused naming the key it must state.
//!
//! A duplicate key, `maxVictimsPerResize: 0` and an invalid `protectedSelector` are checked after
//! the value was read; serde_yaml_ng marked the enclosing mapping's first line, serde-saphyr (the
//! parser now) marks their own line (`preemption:\n  enabled: true\n  protectedSelector: "env in
//! prod"` says line 3). For those the test still requires only a line at or before the mistake.
//!
//! Runs for `RESIZE_GUARD_FUZZ_SECONDS` (default 10): `make fuzz` runs it longer, or
//! `RESIZE_GUARD_FUZZ_SECONDS=300 cargo test -p resize-guard-policy --test policy -- fuzz_policy::
//! --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use proptest::prelude::*;
use resize_guard_fuzz::{Case, Fuzz};
use resize_guard_policy::policy::{
    FeasibilityPolicy, Mode, NamespacePolicy, OnQosChange, PdbMode, Policy, PreemptionPolicy,
    ProtectedSelector, QosPolicy,
};
use resize_guard_policy::upstream::selector::Selector;

/// Keys of the real document, then YAML punctuation and values of every type.
const DICTIONARY: &[&str] = &[
    "mode",
    "qos",
    "onChange",
    "feasibility",
    "rejectInfeasible",
    "rejectStuckDeferred",
    "revertInfeasible",
    "preemption",
    "enabled",
    "pdb",
    "maxVictimsPerResize",
    "maxGracePeriodSeconds",
    "minDeferredSeconds",
    "stallAfterSeconds",
    "protectedNamespaces",
    "protectedSelector",
    "namespaces",
    "exclude",
    "audit",
    "enforce",
    "repair",
    "reject",
    "respect",
    "bestEffort",
    "true",
    "false",
    "yes",
    "~",
    "null",
    "0",
    "-1",
    "4294967296",
    "1e3",
    "0x10",
    ": ",
    ":",
    "\n",
    "\n  ",
    "\n    ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "&a ",
    "*a",
    "<<: ",
    "!!str ",
    "!!int ",
    "!custom ",
    "---\n",
    "...\n",
    "# c\n",
    "'",
    "\"",
    "|\n  ",
    ">-\n  ",
    "? ",
    "%YAML 1.2\n",
    "\t",
    "\u{feff}",
    "\u{0}",
    "é",
];

/// The real keys (the start of [`DICTIONARY`]).
const KEYS: &[&str] = DICTIONARY.split_at(17).0;

const SELECTORS: &[&str] = &[
    "",
    "resize-guard.io/protected=true",
    "tier in (db, cache)",
    "!legacy",
    "app, env notin (dev)",
    "a==b,c!=d",
];

/// A mistake injected into a model document.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mistake {
    None,
    /// An unknown key in a section (or at the top).
    UnknownKey,
    /// A value of the wrong type or out of range.
    BadValue,
    /// A key given twice.
    Duplicate,
}

/// Where a model document's mistake is reported.
#[derive(Debug, Clone, Copy)]
struct Refusal {
    line: usize,
    exact: bool,
}

#[derive(Debug, Clone, Default)]
enum Expect {
    #[default]
    Unknown,
    /// A model document: parses to this policy, or is refused naming this line (`exact`) or a
    /// line at most this one.
    Model(Box<Result<Policy, Refusal>>),
    /// A model document without a mistake that leaves out a key a policy must state: refused,
    /// naming it.
    Unstated(&'static str),
}

/// One `key: value` line of a section, or a key with a block list under it.
#[derive(Debug, Clone)]
struct Entry {
    key: &'static str,
    value: Value,
    /// Wrong values for this key, any of which makes the document invalid.
    wrong: &'static [&'static str],
}

#[derive(Debug, Clone)]
enum Value {
    Scalar(String),
    List(Vec<String>, bool),
}

fn entry(key: &'static str, value: String, wrong: &'static [&'static str]) -> Entry {
    Entry {
        key,
        value: Value::Scalar(value),
        wrong,
    }
}

const BOOL_WRONG: &[&str] = &["maybe", "3", "[]", "{}", "\"true\""];
const U32_WRONG: &[&str] = &["-5", "4294967296", "1.5", "many", "[1]", "\"7\""];
const ENUM_WRONG: &[&str] = &["fix", "3", "[audit]", "Audit", "{}"];
const LIST_WRONG: &[&str] = &["kube-system", "3", "{a: b}", "[[a]]"];
const SELECTOR_WRONG: &[&str] = &["\"env in prod\"", "\"a=b,,c\"", "[a]", "\"bad key=1\""];

fn quoted(s: &str, style: u8) -> String {
    match style % 3 {
        0 => s.to_owned(),
        1 => format!("'{s}'"),
        _ => format!("\"{s}\""),
    }
}

fn namespace() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}".prop_map(|s| format!("ns-{s}"))
}

/// A policy and the document that spells it: sections and keys in any order, some left out
/// (their defaults apply), comments, flow or block lists, optional `---` and `...`.
fn model() -> impl Strategy<Value = Case<Expect>> {
    let bools = prop::array::uniform4(any::<bool>());
    let numbers = (1..=u32::MAX, any::<u32>(), any::<u32>());
    let lists = (
        prop::collection::vec(namespace(), 0..4),
        prop::collection::vec(namespace(), 0..4),
    );
    let enums = (any::<bool>(), any::<bool>(), any::<bool>(), any::<u8>());
    let layout = (
        prop::collection::vec(any::<bool>(), 16),
        prop::collection::vec(any::<u8>(), 16),
        any::<[bool; 4]>(),
        (
            0..4u8,
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
        ),
        prop::sample::select(SELECTORS),
    );
    (bools, numbers, lists, enums, layout).prop_map(
        |(
            b,
            (victims, grace, deferred),
            (protected, exclude),
            (audit, repair, best, style),
            layout,
        )| {
            let (
                present,
                styles,
                [dashes, dots, comments, flow],
                (mistake, where_, wrong),
                selector,
            ) = layout;
            let mistake = [
                Mistake::None,
                Mistake::UnknownKey,
                Mistake::BadValue,
                Mistake::Duplicate,
            ][usize::from(mistake)];
            let policy = Policy {
                mode: if audit { Mode::Audit } else { Mode::Enforce },
                qos: QosPolicy {
                    on_change: if repair {
                        OnQosChange::Repair
                    } else {
                        OnQosChange::Reject
                    },
                },
                feasibility: FeasibilityPolicy {
                    reject_infeasible: b[0],
                    reject_stuck_deferred: b[1],
                    revert_infeasible: b[2],
                },
                preemption: PreemptionPolicy {
                    enabled: b[3],
                    pdb: if best {
                        PdbMode::BestEffort
                    } else {
                        PdbMode::Respect
                    },
                    max_victims_per_resize: victims,
                    max_evictions_per_minute: 20,
                    max_evictions_per_namespace_per_minute: 6,
                    circuit_breaker: Default::default(),
                    max_grace_period_seconds: Some(grace),
                    min_deferred_seconds: deferred,
                    stall_after_seconds: 600,
                    protected_namespaces: protected.clone(),
                    protected_selector: ProtectedSelector(Selector::parse(selector).unwrap()),
                    allow_daemon_set_victims: false,
                    allow_bare_pod_victims: false,
                },
                // Nested two levels deep, which this model does not render: the parser's
                // tests cover `memory.decrease` (shared/src/policy/tests.rs).
                memory: Default::default(),
                namespaces: NamespacePolicy {
                    exclude: exclude.clone(),
                },
            };
            let enum_value = |s: &str, i: usize| quoted(s, styles[i]);
            let list = |l: &[String]| Value::List(l.to_vec(), flow);
            let sections: Vec<(&'static str, Vec<Entry>)> = vec![
                (
                    "mode",
                    vec![entry(
                        "",
                        enum_value(if audit { "audit" } else { "enforce" }, 0),
                        ENUM_WRONG,
                    )],
                ),
                (
                    "qos",
                    vec![entry(
                        "onChange",
                        enum_value(if repair { "repair" } else { "reject" }, 1),
                        ENUM_WRONG,
                    )],
                ),
                (
                    "feasibility",
                    vec![
                        entry("rejectInfeasible", b[0].to_string(), BOOL_WRONG),
                        entry("rejectStuckDeferred", b[1].to_string(), BOOL_WRONG),
                        entry("revertInfeasible", b[2].to_string(), BOOL_WRONG),
                    ],
                ),
                (
                    "preemption",
                    vec![
                        entry("enabled", b[3].to_string(), BOOL_WRONG),
                        entry(
                            "pdb",
                            enum_value(if best { "bestEffort" } else { "respect" }, 2),
                            ENUM_WRONG,
                        ),
                        entry(
                            "maxVictimsPerResize",
                            victims.to_string(),
                            &["0", "-1", "4294967296", "x"],
                        ),
                        entry("maxGracePeriodSeconds", grace.to_string(), U32_WRONG),
                        entry("minDeferredSeconds", deferred.to_string(), U32_WRONG),
                        Entry {
                            key: "protectedNamespaces",
                            value: list(&protected),
                            wrong: LIST_WRONG,
                        },
                        entry("protectedSelector", format!("{selector:?}"), SELECTOR_WRONG),
                    ],
                ),
                (
                    "namespaces",
                    vec![Entry {
                        key: "exclude",
                        value: list(&exclude),
                        wrong: LIST_WRONG,
                    }],
                ),
            ];
            render(
                policy,
                sections,
                &present,
                style,
                (dashes, dots, comments),
                mistake,
                where_,
                wrong,
            )
        },
    )
}

/// Writes the document; keys whose `present` flag is false are left out and keep their default.
#[allow(clippy::too_many_arguments)]
fn render(
    policy: Policy,
    sections: Vec<(&'static str, Vec<Entry>)>,
    present: &[bool],
    order: u8,
    (dashes, dots, comments): (bool, bool, bool),
    mistake: Mistake,
    where_: prop::sample::Index,
    wrong: prop::sample::Index,
) -> Case<Expect> {
    let defaults = Policy::default();
    let mut expected = policy;
    let mut lines: Vec<String> = Vec::new();
    if dashes {
        lines.push("---".into());
    }
    // Rotate the sections and the keys inside them by `order`.
    let mut sections = sections;
    let n = sections.len();
    sections.rotate_left(usize::from(order) % n);
    let mut slot = 0;
    let mut candidates: Vec<(usize, &'static [&'static str], String)> = Vec::new();
    let mut rendered: Vec<(&'static str, &'static str)> = Vec::new();
    for (section, mut entries) in sections {
        let k = entries.len();
        entries.rotate_left(usize::from(order / 2) % k);
        let top = entries.len() == 1 && entries[0].key.is_empty();
        let mut body = Vec::new();
        for e in entries {
            slot += 1;
            if !present[slot % present.len()] {
                forget(&mut expected, &defaults, section, e.key);
                continue;
            }
            rendered.push((section, e.key));
            let (indent, key) = if top { ("", section) } else { ("  ", e.key) };
            match e.value {
                Value::Scalar(v) => body.push((
                    format!("{indent}{key}: {v}"),
                    e.wrong,
                    format!("{indent}{key}"),
                )),
                Value::List(items, flow) if flow || items.is_empty() => body.push((
                    format!("{indent}{key}: [{}]", items.join(", ")),
                    e.wrong,
                    format!("{indent}{key}"),
                )),
                Value::List(items, _) => {
                    body.push((format!("{indent}{key}:"), e.wrong, format!("{indent}{key}")));
                    for i in items {
                        body.push((format!("{indent}  - {i}"), &[], String::new()));
                    }
                }
            }
        }
        if body.is_empty() {
            continue;
        }
        if !top {
            lines.push(format!("{section}:"));
        }
        for (line, wrong, key) in body {
            if comments {
                lines.push(format!("{}# about {section}", if top { "" } else { "  " }));
            }
            lines.push(line);
            if !wrong.is_empty() {
                candidates.push((lines.len() - 1, wrong, key));
            }
        }
    }
    let result = match mistake {
        Mistake::None => Ok(expected),
        _ if candidates.is_empty() => Ok(expected),
        Mistake::UnknownKey => {
            let (at, _, key) = where_.get(&candidates).clone();
            let indent = &key[..key.len() - key.trim_start().len()];
            lines.insert(at + 1, format!("{indent}maxVictims: 3"));
            Err(Refusal {
                line: at + 2,
                exact: true,
            })
        }
        Mistake::BadValue => {
            let (at, wrong_values, key) = where_.get(&candidates).clone();
            // A block list's items go with the key they belonged to.
            while lines
                .get(at + 1)
                .is_some_and(|l| l.trim_start().starts_with("- "))
            {
                lines.remove(at + 1);
            }
            let value = wrong.get(wrong_values);
            lines[at] = format!("{key}: {value}");
            // Checks made after the value was read (`at_least_one`, the selector syntax): see the
            // module comment.
            let after_reading = (key.ends_with("protectedSelector") && value.starts_with('"'))
                || (key.ends_with("maxVictimsPerResize") && *value == "0");
            Err(Refusal {
                line: at + 1,
                exact: !after_reading,
            })
        }
        Mistake::Duplicate => {
            let (at, _, _) = where_.get(&candidates).clone();
            let line = lines[at].clone();
            // Past the block list under the key, if any.
            let mut end = at + 1;
            while lines
                .get(end)
                .is_some_and(|l| l.trim_start().starts_with("- "))
            {
                end += 1;
            }
            lines.insert(end, line);
            // Marked at the start of its mapping, like the checks above.
            Err(Refusal {
                line: end + 1,
                exact: false,
            })
        }
    };
    // A document end marker after no content at all is not a document (libyaml refuses it).
    if dots && lines.iter().any(|l| l != "---") {
        lines.push("...".into());
    }
    let doc = lines.join("\n") + "\n";
    let preemption: Vec<&str> = rendered
        .iter()
        .filter(|(section, _)| *section == "preemption")
        .map(|(_, key)| *key)
        .collect();
    let unstated = if rendered.is_empty() {
        Some("the document is empty")
    } else if !rendered.iter().any(|(section, _)| *section == "mode") {
        Some("`mode` is not stated")
    } else if !preemption.is_empty() && !preemption.contains(&"enabled") {
        Some("preemption.enabled is not stated")
    } else {
        None
    };
    let expect = match (result, unstated) {
        (Ok(_), Some(key)) => Expect::Unstated(key),
        (result, _) => Expect::Model(Box::new(result)),
    };
    Case {
        bytes: doc.into_bytes(),
        expect,
    }
}

/// Puts one key of the expected policy back to its default.
fn forget(p: &mut Policy, d: &Policy, section: &str, key: &str) {
    match (section, key) {
        ("mode", _) => p.mode = d.mode,
        ("qos", _) => p.qos = d.qos.clone(),
        ("feasibility", "rejectInfeasible") => {
            p.feasibility.reject_infeasible = d.feasibility.reject_infeasible
        }
        ("feasibility", "rejectStuckDeferred") => {
            p.feasibility.reject_stuck_deferred = d.feasibility.reject_stuck_deferred
        }
        ("feasibility", _) => p.feasibility.revert_infeasible = d.feasibility.revert_infeasible,
        ("preemption", "enabled") => p.preemption.enabled = d.preemption.enabled,
        ("preemption", "pdb") => p.preemption.pdb = d.preemption.pdb,
        ("preemption", "maxVictimsPerResize") => {
            p.preemption.max_victims_per_resize = d.preemption.max_victims_per_resize
        }
        ("preemption", "maxGracePeriodSeconds") => {
            p.preemption.max_grace_period_seconds = d.preemption.max_grace_period_seconds
        }
        ("preemption", "minDeferredSeconds") => {
            p.preemption.min_deferred_seconds = d.preemption.min_deferred_seconds
        }
        ("preemption", "protectedNamespaces") => {
            p.preemption.protected_namespaces = d.preemption.protected_namespaces.clone()
        }
        ("preemption", _) => {
            p.preemption.protected_selector = d.preemption.protected_selector.clone()
        }
        (_, _) => p.namespaces = d.namespaces.clone(),
    }
}

/// Arbitrary YAML trees in flow style whose keys are the real field names: wrong nesting, wrong
/// types, anchors and aliases, merge keys, tags, nulls.
fn tree() -> impl Strategy<Value = Case<Expect>> {
    let scalar = prop_oneof![
        prop::sample::select(DICTIONARY).prop_map(|s| quoted(s.trim(), 0)),
        prop::sample::select(DICTIONARY).prop_map(|s| format!("{:?}", s)),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        Just("*a".to_owned()),
        Just("~".to_owned()),
        Just("!!binary aGk=".to_owned()),
    ];
    let key = prop::sample::select(KEYS).prop_map(str::to_owned);
    let node = scalar.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(
                (
                    prop_oneof![4 => key.clone(), 1 => Just("<<".to_owned())],
                    inner.clone()
                ),
                0..6
            )
            .prop_map(|kv| {
                let items: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", items.join(", "))
            }),
            inner.clone().prop_map(|v| format!("&a {v}")),
        ]
    });
    prop::collection::vec((prop::sample::select(KEYS), node), 1..6).prop_map(|kv| {
        let doc: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
        Case::raw((doc.join("\n") + "\n").into_bytes())
    })
}

fn inputs(fuzz: &Fuzz) -> impl Strategy<Value = Case<Expect>> + use<> {
    prop_oneof![
        6 => crate::unstructured(fuzz, DICTIONARY, 128, 24, 2),
        2 => tree(),
        3 => model(),
    ]
}

fn check(case: Case<Expect>) -> Result<(), TestCaseError> {
    let doc = case.text();
    let parsed = Policy::from_yaml(&doc);
    match &parsed {
        Ok(p) => {
            let printed = p.to_yaml();
            prop_assert!(!printed.starts_with("<unprintable"), "{}", printed);
            let again = Policy::from_yaml(&printed);
            prop_assert_eq!(again.as_ref(), Ok(p), "printed as\n{}", printed);
        }
        Err(e) => {
            prop_assert!(!e.message.is_empty());
            prop_assert!(e.line.is_none_or(|l| l >= 1), "{:?}", e);
            prop_assert!(e.column.is_none_or(|c| c >= 1), "{:?}", e);
            prop_assert!(e.to_string().starts_with("policy.yaml"), "{}", e);
        }
    }
    if let Expect::Unstated(key) = &case.expect {
        match &parsed {
            Ok(p) => prop_assert!(false, "accepted without {}: {:?}", key, p),
            Err(e) => prop_assert!(e.message.contains(key), "{}", e),
        }
    }
    if let Expect::Model(expected) = &case.expect {
        match (expected.as_ref(), &parsed) {
            (Ok(want), Ok(got)) => prop_assert_eq!(got, want),
            (Ok(_), Err(e)) => prop_assert!(false, "model document refused: {}", e),
            (Err(r), Ok(_)) => prop_assert!(false, "mistake on line {} accepted", r.line),
            (Err(r), Err(e)) if r.exact => prop_assert_eq!(e.line, Some(r.line), "{}", e),
            (Err(r), Err(e)) => prop_assert!(e.line.is_some_and(|l| l <= r.line), "{}", e),
        }
    }
    Ok(())
}

#[test]
fn policy_parsing_never_panics_and_names_the_line_of_a_mistake() {
    let fuzz = Fuzz::new("policy");
    fuzz.run(inputs(&fuzz), check);
}
