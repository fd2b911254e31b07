//! Reading `policy.yaml` with serde-saphyr under budgets sized for a policy: the parse, its
//! errors as [`PolicyError`] (line, column, and the key's dotted path), and the field readers
//! that keep scalars to their YAML type (`"true"` is not a boolean) and an empty section to its
//! default. [`super::Policy::from_yaml`] calls [`parse`].

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer};

use super::PolicyError;

/// `doc` as a policy (or, for tests, any `T`), or the first thing wrong with it.
pub(super) fn parse<'de, T: Deserialize<'de>>(doc: &'de str) -> Result<T, PolicyError> {
    // serde-saphyr bounds the size of reader input only (`Budget::max_reader_input_bytes`); a
    // string is measured by its caller (serde-saphyr `src/de/budget.rs`), before any parsing,
    // which reading it through the reader would cost (150 ms for 256 KiB in a debug build).
    if doc.len() > MAX_POLICY_BYTES {
        return Err(PolicyError {
            line: None,
            column: None,
            message: format!(
                "the document is larger than {MAX_POLICY_BYTES} bytes; no policy needs that"
            ),
        });
    }
    serde_saphyr::from_str_with_options(doc, parse_options()).map_err(|e| policy_error(doc, e))
}

/// The parser's budgets for one `policy.yaml`, sized for a policy rather than for YAML in general
/// (serde-saphyr `src/de/budget.rs`, `Budget`; `src/de/options.rs`, `AliasLimits`). The
/// fullest policy is 3 levels deep, about 40 keys, a few dozen namespaces and under 4 KiB; the
/// budgets leave a wide margin and refuse what no policy needs before it costs time: huge
/// documents (a ConfigMap may hold 1 MiB), deep nesting, many nodes, alias expansion ("billion
/// laughs"), several documents. Flow nesting stops at [`MAX_DEPTH`] too, so libyaml's quadratic
/// cost in deep flow nesting (the reason for the count of `[`/`{` this replaced) cannot arise.
fn parse_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_total_scalar_bytes: MAX_POLICY_BYTES,
            max_total_comment_bytes: MAX_POLICY_BYTES,
            max_depth: MAX_DEPTH,
            flow_nesting_limit: MAX_DEPTH,
            max_documents: 1,
            max_nodes: MAX_NODES,
            max_events: 2 * MAX_NODES,
            max_aliases: MAX_ALIASES,
            max_anchors: MAX_ALIASES,
            max_merge_keys: MAX_ALIASES,
            max_recorded_anchor_events: MAX_NODES,
            max_recorded_anchor_bytes: MAX_POLICY_BYTES,
            max_inclusion_depth: 0,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: MAX_NODES,
            max_replay_stack_depth: MAX_DEPTH,
        },
        // YAML 1.2 booleans only, as before: `yes`/`on` are not `true` in a policy.
        strict_booleans: true,
        // The location is reported in `PolicyError`; the message stays one line.
        with_snippet: false,
        // Comments are read past, not kept: the size budget bounds them.
        emit_comments: false,
    }
}

/// The largest `policy.yaml` read (bytes). The shipped policies are under 4 KiB.
const MAX_POLICY_BYTES: usize = 256 * 1024;
/// Deepest nesting, block or flow (a policy has 3 levels).
const MAX_DEPTH: usize = 16;
/// Most values (mappings, lists, scalars) in a policy, aliases expanded (a policy has ~60).
const MAX_NODES: usize = 10_000;
/// Most anchors, aliases and merge keys (a policy needs none).
const MAX_ALIASES: usize = 100;

/// The library's error as a [`PolicyError`]: its position, and its message without the
/// position suffix (serde-saphyr `src/de/error.rs`, `MessageFormatter::format_message`).
/// A bad value's message is prefixed with its key's dotted path when the key is on the error's
/// line (`preemption.pdb: unknown variant …`), since serde-saphyr names only the value.
fn policy_error(doc: &str, e: serde_saphyr::Error) -> PolicyError {
    use serde_saphyr::MessageFormatter;
    let loc = e.location();
    let line = loc
        .and_then(|l| usize::try_from(l.line()).ok())
        .filter(|&l| l > 0);
    let column = loc
        .and_then(|l| usize::try_from(l.column()).ok())
        .filter(|&c| c > 0);
    // The message may quote the document (an unknown key, a bad value): no control characters
    // from it reach a log line or an Event.
    let budget = over_budget(&e);
    let named = budget.is_none();
    let mut message: String = budget
        .map(Cow::Owned)
        .unwrap_or_else(|| serde_saphyr::DefaultMessageFormatter.format_message(original(&e)))
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if let Some(path) = line.filter(|_| named).and_then(|l| key_path(doc, l)) {
        // A message about the key itself (unknown, duplicate, out of range) already names it:
        // say where it is, as serde_yaml_ng did (`preemption: unknown field `maxVictim``).
        let named_here = path.last().is_some_and(|k| message.contains(k));
        let shown = &path[..path.len() - usize::from(named_here)];
        if !shown.is_empty() {
            message = format!("{}: {message}", shown.join("."));
        }
    }
    PolicyError {
        line,
        column,
        message,
    }
}

/// The error an alias's use wraps (serde-saphyr `src/de/error.rs`, `original_error`).
fn original(mut e: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::AliasError { error, .. } = e {
        e = error;
    }
    e
}

/// What [`parse_options`] refused, in a policy's terms; `None` for any other error.
fn over_budget(e: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::Error as E;
    use serde_saphyr::budget::BudgetBreach as B;
    let what = match original(e) {
        E::IOError { .. } => format!("is larger than {MAX_POLICY_BYTES} bytes"),
        E::Budget { breach, .. } => match breach {
            B::InputBytes { .. } | B::ScalarBytes { .. } | B::CommentBytes { .. } => {
                format!("is larger than {MAX_POLICY_BYTES} bytes")
            }
            B::Depth { .. } => format!("nests deeper than {MAX_DEPTH} levels"),
            B::Documents { .. } => "holds more than one YAML document".to_owned(),
            B::Nodes { .. } | B::Events { .. } => format!("has more than {MAX_NODES} values"),
            B::Aliases { .. }
            | B::Anchors { .. }
            | B::AliasAnchorRatio { .. }
            | B::MergeKeys { .. }
            | B::RecordedAnchorEvents { .. }
            | B::RecordedAnchorBytes { .. } => {
                format!("has more than {MAX_ALIASES} anchors or aliases")
            }
            other => format!("exceeds the parser budget: {other:?}"),
        },
        E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. }
        | E::AliasReplayCounterOverflow { .. } => {
            "expands its aliases to more than a policy holds".to_owned()
        }
        _ => return None,
    };
    Some(format!("the document {what}; no policy needs that"))
}

/// The keys leading to the block-style key on 1-based `line`, outermost first, found by
/// walking up to the keys of lesser indentation.
fn key_path(doc: &str, line: usize) -> Option<Vec<&str>> {
    let lines: Vec<&str> = doc.lines().collect();
    let above = lines.get(..line.checked_sub(1)?)?;
    let (indent, key) = block_key(lines.get(line - 1)?)?;
    let mut path = vec![key];
    let mut level = indent;
    for text in above.iter().rev() {
        if level == 0 {
            break;
        }
        if let Some((i, k)) = block_key(text).filter(|&(i, _)| i < level) {
            path.push(k);
            level = i;
        }
    }
    path.reverse();
    Some(path)
}

/// `(indent, key)` of a `key:` or `key: value` line whose key is a plain word.
fn block_key(text: &str) -> Option<(usize, &str)> {
    let body = text.trim_start_matches(' ');
    let (key, rest) = body.split_once(':')?;
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric());
    (plain && (rest.is_empty() || rest.starts_with([' ', '\t'])))
        .then_some((text.len() - body.len(), key))
}

/// A section or list written with nothing after its key (`qos:`) is its default, as the YAML
/// library before serde-saphyr read it; so is `~`.
pub(super) fn empty_is_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A boolean written as one: `true`, not `"true"`. serde-saphyr reads a quoted scalar as a
/// boolean or number when the target asks for one (`deserialize_bool`, `deserialize_u32` in its
/// `src/de/deserializer.rs`); asking for any type instead makes it resolve the scalar by the YAML
/// 1.2 core schema, so a quoted value stays a string and is refused, as Kubernetes' own YAML
/// (JSON types) would.
pub(super) fn plain_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Plain;
    impl serde::de::Visitor<'_> for Plain {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("true or false")
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
    }
    d.deserialize_any(Plain)
}

/// A whole number from 0 to 4294967295 written as a number, not a string (see [`plain_bool`]).
pub(super) fn plain_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    plain_optional(d, false)?.ok_or_else(|| serde::de::Error::custom("a number is required"))
}

/// [`plain_u32`], or nothing for `~`/`null`.
pub(super) fn plain_optional_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    plain_optional(d, true)
}

fn plain_optional<'de, D: Deserializer<'de>>(
    d: D,
    nullable: bool,
) -> Result<Option<u32>, D::Error> {
    struct Plain(bool);
    impl serde::de::Visitor<'_> for Plain {
        type Value = Option<u32>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a whole number from 0 to 4294967295")?;
            if self.0 {
                f.write_str(" or null")?;
            }
            Ok(())
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            u32::try_from(v)
                .map(Some)
                .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            u32::try_from(v)
                .map(Some)
                .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            if self.0 {
                Ok(None)
            } else {
                Err(E::invalid_type(serde::de::Unexpected::Unit, &self))
            }
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            self.visit_unit()
        }
    }
    d.deserialize_any(Plain(nullable))
}
